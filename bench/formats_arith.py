# SPDX-License-Identifier: Apache-2.0
"""Throughput of the arithmetic-unit testbenches (exact multiplier, FMA, FP32 adder; cocotb +
Verilator through the vector harness) and the cold Verilator build time of each unit.

Runs ``tb.fp_arith.tb_{mul,fma,add}`` (fixed seed; the multiplier without its exhaustive FP8
part, so every unit streams the same kind of random load) on fresh build directories of their
own, so the build time is a cold build and the test caches are untouched.
``cases_per_second`` counts checked vectors over the time spent streaming them (harness memory
writes, simulation, read-back; golden model excluded).
"""

from bench.unit_bench import cold_run

NAME = "formats_arith"  # part of bench_formats
SEED = 12345
N_RANDOM = 200_000


def _unit(cfg, unit):
    params = {"seed": SEED, "n_random": N_RANDOM, "exhaustive": False}
    return cold_run(cfg, unit=unit, test_module=f"tb.fp_arith.tb_{unit}", params=params)


def run(cfg):
    out = {}
    for unit in ("mul", "fma", "add"):
        out.update(_unit(cfg, unit))
    return out
