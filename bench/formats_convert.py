# SPDX-License-Identifier: Apache-2.0
"""Throughput of the conversion-unit testbenches (cocotb + Verilator through the vector
harness) and the cold Verilator build time of each unit.

Runs ``tb.fp_convert.tb_convert`` and ``tb.fp_convert.tb_widen`` (fast-tier vectors, fixed
seed) on fresh build directories of their own, so the build time is a cold build and the
test caches are untouched. ``cases_per_second`` counts checked vectors over the time spent
streaming them (harness memory writes, simulation, read-back; golden model excluded).
"""

import json
import shutil

from tb.fp_convert import designs
from tb.runner import SimBuild, build_dir_for

NAME = "formats_convert"  # part of bench_formats
SEED = 12345
N_RANDOM = 200_000


def _unit(cfg, unit, make, formats):
    params = {"seed": SEED, "formats": list(formats), "lane": 0, "depth": designs.DEPTH,
              "tier": "fast", "n_random": N_RANDOM}
    dut = make(cfg, params)
    name = f"bench_{unit}"
    shutil.rmtree(build_dir_for(cfg, name), ignore_errors=True)   # measure a cold build
    sim = SimBuild(designs.harness(dut, params), name=name, cfg=cfg)
    metrics_path = sim.build_dir / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    params["metrics"] = str(metrics_path)
    sim.run(f"tb.fp_convert.tb_{unit}", params=params, tag="bench")
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    cases = sum(r["cases"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {f"{unit}_cases": cases,
            f"{unit}_cases_per_second": cases / seconds,
            f"{unit}_verilator_build_seconds": sim.build_seconds,
            f"{unit}_latency_cycles": dut.latency}


def run(cfg):
    out = {}
    out.update(_unit(cfg, "convert", designs.convert_dut, designs.CONVERT_FORMATS))
    out.update(_unit(cfg, "widen", designs.widen_dut, designs.WIDEN_FORMATS))
    cases = out["convert_cases"] + out["widen_cases"]
    secs = (out["convert_cases"] / out["convert_cases_per_second"]
            + out["widen_cases"] / out["widen_cases_per_second"])
    out["cases_per_second"] = cases / secs
    out["verilator_build_seconds"] = (out["convert_verilator_build_seconds"]
                                      + out["widen_verilator_build_seconds"])
    return out
