# SPDX-License-Identifier: Apache-2.0
"""Shared by the floating-point unit benchmarks: one cold build and one timed cocotb run."""

import json
import shutil

from tb.fp import build as fp_build
from tb.runner import build_dir_for


def cold_run(cfg, *, unit, test_module, params):
    """Build ``unit`` (see :mod:`tb.fp.build`) from scratch as ``bench_<unit>``, run
    ``test_module`` with ``params`` (the module appends ``{"cases", "seconds"}`` rows to
    ``params["metrics"]``), and return the per-unit metrics: cases, cases per second of
    streaming, cold build seconds, latency."""
    name = f"bench_{unit}"
    shutil.rmtree(build_dir_for(cfg, name), ignore_errors=True)   # measure a cold build
    sim = fp_build.sim(unit, cfg, params, name=name)
    latency = fp_build.signature(unit, cfg, params).latency
    metrics_path = sim.build_dir / "metrics.jsonl"
    metrics_path.unlink(missing_ok=True)
    sim.run(test_module, params={**params, "metrics": str(metrics_path)}, tag="bench")
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    cases = sum(r["cases"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    return {f"{unit}_cases": cases,
            f"{unit}_cases_per_second": cases / seconds,
            f"{unit}_verilator_build_seconds": sim.build_seconds,
            f"{unit}_latency_cycles": latency}
