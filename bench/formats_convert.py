# SPDX-License-Identifier: Apache-2.0
"""Throughput of the conversion-unit testbenches (cocotb + Verilator through the vector
harness) and the cold Verilator build time of each unit.

Runs ``tb.fp_convert.tb_convert`` and ``tb.fp_convert.tb_widen`` (fast-tier vectors, fixed
seed) on fresh build directories of their own, so the build time is a cold build and the
test caches are untouched. ``cases_per_second`` counts checked vectors over the time spent
streaming them (harness memory writes, simulation, read-back; golden model excluded).
"""

from tb.fp_convert import designs
from bench.unit_bench import cold_run

NAME = "formats_convert"  # part of bench_formats
SEED = 12345
N_RANDOM = 200_000


def _unit(cfg, unit, make, formats):
    params = {"seed": SEED, "formats": list(formats), "lane": 0, "depth": designs.DEPTH,
              "tier": "fast", "n_random": N_RANDOM}
    dut = make(cfg, params)
    return cold_run(cfg, unit=unit, top=designs.harness(dut, params),
                    test_module=f"tb.fp_convert.tb_{unit}", params=params, latency=dut.latency)


def run(cfg):
    out = {}
    out.update(_unit(cfg, "convert", designs.convert_dut, designs.CONVERT_FORMATS))
    out.update(_unit(cfg, "widen", designs.widen_dut, designs.WIDEN_FORMATS))
    return out
