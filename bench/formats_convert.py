# SPDX-License-Identifier: Apache-2.0
"""Throughput of the conversion-unit testbenches (cocotb + Verilator through the vector
harness) and the cold Verilator build time of each unit.

Runs ``tb.fp_convert.tb_convert`` and ``tb.fp_convert.tb_widen`` (fast-tier vectors, fixed
seed) on fresh build directories of their own, so the build time is a cold build and the
test caches are untouched. ``cases_per_second`` counts checked vectors over the time spent
streaming them (harness memory writes, simulation, read-back; golden model excluded).
"""

from bench.unit_bench import cold_run
from tb.fp_convert import designs
from tb.fp.build import DEPTH

NAME = "formats_convert"  # part of bench_formats
SEED = 12345
N_RANDOM = 200_000


def _unit(cfg, unit, formats):
    params = {"seed": SEED, "formats": list(formats), "lane": 0, "depth": DEPTH,
              "tier": "fast", "n_random": N_RANDOM}
    return cold_run(cfg, unit=unit, test_module=f"tb.fp_convert.tb_{unit}", params=params)


def run(cfg):
    out = {}
    out.update(_unit(cfg, "convert", designs.CONVERT_FORMATS))
    out.update(_unit(cfg, "widen", designs.WIDEN_FORMATS))
    return out
