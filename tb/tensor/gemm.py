# SPDX-License-Identifier: Apache-2.0
"""GEMM scenarios on the tensor engine (Verilator) with their metrics: cycles, utilization, the
cycle formula, simulation speed. Used by ``make sim`` (``tb.demo_tensor``) and by
``make bench BENCH=tensor_engine``; every result is checked bit for bit (``tb.tensor.tb_tensor_bench``).
"""

from __future__ import annotations

import json
import time

from rtl.tensor.engine import TensorEngine
from rtl.tensor.layouts import TensorLayouts
from tb.runner import build_dir_for
from tb.tensor.build import cycle_formula, depths_for, tensor_sim

__all__ = ["run", "scalesim_ws"]


def scalesim_ws(cfg, *, N):
    """SCALE-Sim-style weight-stationary fold time ``2R + C + T - 2`` (T = moving columns)."""
    return 2 * cfg.pe_rows + cfg.pe_cols + N - 2


def run(cfg, seed=1, scenarios=None):
    """Metrics of the GEMM scenarios ``scenarios`` (default: every one of ``cfg``, see
    ``tb.tensor.tb_tensor_bench.scenarios``) on ``cfg``."""
    exe = build_dir_for(cfg, "tensor_bench") / "tensor_bench"
    cold = not exe.exists()
    sim = tensor_sim(cfg, depths_for(cfg), name="tensor_bench")
    build = sim.build_seconds
    # a rebuild after a source change counts as cold too (the executable is replaced)
    cold = cold or (exe.exists() and exe.stat().st_mtime > time.time() - build - 1)
    out = build_dir_for(cfg, "tensor_bench") / "bench_result.json"
    params = {"seed": seed, "depths": sim.depths, "out": str(out)}
    if scenarios:
        params["scenarios"] = list(scenarios)
    sim.run("tb.tensor.tb_tensor_bench", params=params, tag="bench")
    r = json.loads(out.read_text())
    N, M = cfg.psum_bank_fp32, cfg.pe_cols
    lat = TensorEngine.Signature(cfg).latency
    m = {}
    if "b2b_bf16" in r:
        m["utilization_back_to_back_bf16"] = r["b2b_bf16"]["utilization"]
        m["cycles_back_to_back_bf16"] = r["b2b_bf16"]["window_cycles"]
    if "single_bf16" in r:
        m["utilization_single_tile_bf16"] = r["single_bf16"]["utilization"]
        m["cycles_single_tile_bf16"] = r["single_bf16"]["window_cycles"]
    # the headline is the best scenario (as first measured); the whole bench's rate (every
    # scenario's cycles over every scenario's wall seconds) and the slowest scenario beside it
    cps = [v["sim_cycles_per_second"] for v in r.values()]
    m["sim_cycles_per_second"] = max(cps) if cps else 0.0
    wall = sum(v["wall_seconds"] for v in r.values())
    m["sim_cycles_per_second_all_scenarios"] = (sum(v["total_cycles"] for v in r.values())
                                                / wall if wall > 0 else 0.0)
    m["sim_cycles_per_second_slowest_scenario"] = min(cps) if cps else 0.0
    cpu = [v.get("sim_cycles_per_cpu_second", 0.0) for v in r.values()]
    m["sim_cycles_per_cpu_second"] = max(cpu) if cpu else 0.0
    # what this run's build took: a cold build (verilator + gcc of the whole model) when
    # ``verilator_build_cold`` is 1, else the cached no-op (a fraction of a second)
    m["verilator_build_seconds_this_run"] = build
    m["verilator_build_cold"] = int(cold)
    if cold:
        m["verilator_build_seconds_cold"] = build
    m["formula_single_tile_cycles"] = cycle_formula(cfg, M=M, N=N)
    m["formula_back_to_back_cycles"] = cycle_formula(cfg, M=M, N=N, tiles=8)
    m["engine_latency_cycles"] = lat
    m["scalesim_ws_fold_cycles"] = scalesim_ws(cfg, N=N)
    if "b2b_fp32" in r:
        parts = 4 if TensorLayouts(cfg).fp32_split else 1
        m["cycles_back_to_back_fp32"] = r["b2b_fp32"]["window_cycles"]
        m["formula_back_to_back_fp32_cycles"] = cycle_formula(cfg, M=M, N=N, tiles=8,
                                                              parts=parts)
    for name in ("b2b_fp8", "b2b_fp32", "b2b_mx", "b2b_fp8_unpacked", "b2b_mx_unpacked"):
        if name in r:
            m[f"utilization_{name}"] = r[name]["utilization"]
            if "b2b_bf16" in r:
                # MACs per cycle relative to BF16 (1.0 = same rate)
                m[f"rate_vs_bf16_{name[4:]}"] = (
                    (r[name]["macs"] / r[name]["window_cycles"])
                    / (r["b2b_bf16"]["macs"] / r["b2b_bf16"]["window_cycles"]))
                # steady state: the windows without the one-off first load, dispatch and
                # fill/drain (M + 1 + L, the cycle formula's constant), same MACs
                fixed = cycle_formula(cfg, M=M, N=0)
                m[f"rate_vs_bf16_{name[4:]}_steady"] = (
                    (r[name]["macs"] / (r[name]["window_cycles"] - fixed))
                    / (r["b2b_bf16"]["macs"] / (r["b2b_bf16"]["window_cycles"] - fixed)))
    return m
