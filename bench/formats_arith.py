# SPDX-License-Identifier: Apache-2.0
"""Throughput of the arithmetic-unit testbenches (exact multiplier, FMA, FP32 adder; cocotb +
Verilator through the vector harness) and the cold Verilator build time of each unit.

Runs ``tb.fp_arith.tb_{mul,fma,add}`` (fixed seed; the multiplier without its exhaustive FP8
part, so every unit streams the same kind of random load) on fresh build directories of their
own, so the build time is a cold build and the test caches are untouched.
``cases_per_second`` counts checked vectors over the time spent streaming them (harness memory
writes, simulation, read-back; golden model excluded).
"""

import json
import shutil

from tb.fp_arith import designs
from tb.runner import SimBuild, build_dir_for

NAME = "formats_arith"  # part of bench_formats
SEED = 12345
N_RANDOM = 200_000


def _unit(cfg, unit):
    name = f"bench_fp_{unit}"
    shutil.rmtree(build_dir_for(cfg, name), ignore_errors=True)   # measure a cold build
    sim = SimBuild(designs.harness(unit, cfg), name=name, cfg=cfg)
    metrics_path = sim.build_dir / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    params = {"seed": SEED, "n_random": N_RANDOM, "exhaustive": False,
              "metrics": str(metrics_path)}
    sim.run(f"tb.fp_arith.tb_{unit}", params=params, tag="bench")
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    cases = sum(r["cases"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {f"{unit}_cases": cases,
            f"{unit}_cases_per_second": cases / seconds,
            f"{unit}_verilator_build_seconds": sim.build_seconds,
            f"{unit}_latency_cycles": designs.rebuild(unit, cfg).latency}


def run(cfg):
    out = {}
    for unit in designs.UNITS:
        out.update(_unit(cfg, unit))
    cases = sum(out[f"{u}_cases"] for u in designs.UNITS)
    secs = sum(out[f"{u}_cases"] / out[f"{u}_cases_per_second"] for u in designs.UNITS)
    out["cases_per_second"] = cases / secs
    out["verilator_build_seconds"] = sum(out[f"{u}_verilator_build_seconds"]
                                         for u in designs.UNITS)
    return out
