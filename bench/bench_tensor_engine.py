# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=tensor_engine``: utilization of the tensor engine on GEMMs (Verilator).

Utilization = useful MACs / (rows x cols x cycles), cycles from the first input beat accepted
(stationary or moving) to the last PSUM write. Scenarios: one BF16 tile (K = rows, M = cols,
N = one PSUM bank), 8 back-to-back BF16 tiles (each with its own LoadStationary, overlapped), and
the same for FP8 / FP32 / MX when the config has them. Every result is also checked bit for bit.
"""

from __future__ import annotations

import json
import time

from rtl.fp.pipe import owned
from rtl.tensor.engine import TensorEngine
from tb.runner import build_dir_for
from tb.tensor.build import tensor_sim

NAME = "tensor_engine"


def depths_for(cfg, tiles=8):
    return dict(cmd=64, st=tiles * cfg.pe_cols, mv=tiles * cfg.psum_bank_fp32,
                res=cfg.psum_bank_fp32)


def cycle_formula(cfg, *, M, N, tiles=1):
    """Predicted cycles from the first stationary beat to the last PSUM write for ``tiles``
    back-to-back full tiles (loads overlapped): ``M + 1 + tiles * N + L`` with
    ``L = TensorEngine.latency = 1 + (R-1)*La + (Lm+La) + (C-1) + (1+La)``: the first load
    (M beats), one dispatch cycle, the moving beats (consecutive matmuls issue without a gap),
    and the fill/drain latency of the last beat."""
    return M + 1 + tiles * N + owned(TensorEngine(cfg)).latency


def scalesim_ws(cfg, *, N):
    """SCALE-Sim-style weight-stationary fold time ``2R + C + T - 2`` (T = moving columns)."""
    return 2 * cfg.pe_rows + cfg.pe_cols + N - 2


def run(cfg, seed=1, scenarios=None, *, rates=True):
    """Metrics of ``cfg``; with ``rates`` and a preset other than ``small``, the small preset's
    simulation speed and build time are added with a ``_small`` suffix."""
    t0 = time.monotonic()
    m = _run_one(cfg, seed, scenarios)
    if rates and cfg.name != "small":
        from rtl.config import get_preset
        small = _run_one(get_preset("small"), seed, None)
        for k in ("sim_cycles_per_second", "verilator_build_seconds"):
            m[f"{k}_small"] = small[k]
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


def _run_one(cfg, seed, scenarios):
    sim = tensor_sim(cfg, depths_for(cfg), name="tensor_bench")
    build = sim.build_seconds
    out = build_dir_for(cfg, "tensor_bench") / "bench_result.json"
    params = {"seed": seed, "depths": sim.depths, "out": str(out)}
    if scenarios:
        params["scenarios"] = list(scenarios)
    sim.run("tb.tensor.tb_bench", params=params, tag="bench")
    r = json.loads(out.read_text())
    N, M = cfg.psum_bank_fp32, cfg.pe_cols
    lat = owned(TensorEngine(cfg)).latency
    m = {}
    if "b2b_bf16" in r:
        m["utilization_back_to_back_bf16"] = r["b2b_bf16"]["utilization"]
        m["cycles_back_to_back_bf16"] = r["b2b_bf16"]["window_cycles"]
    if "single_bf16" in r:
        m["utilization_single_tile_bf16"] = r["single_bf16"]["utilization"]
        m["cycles_single_tile_bf16"] = r["single_bf16"]["window_cycles"]
    cps = [v["sim_cycles_per_second"] for v in r.values()]
    m["sim_cycles_per_second"] = max(cps) if cps else 0.0
    m["verilator_build_seconds"] = build
    m["formula_single_tile_cycles"] = cycle_formula(cfg, M=M, N=N)
    m["formula_back_to_back_cycles"] = cycle_formula(cfg, M=M, N=N, tiles=8)
    m["engine_latency_cycles"] = lat
    m["scalesim_ws_fold_cycles"] = scalesim_ws(cfg, N=N)
    for name in ("b2b_fp8", "b2b_fp32", "b2b_mx"):
        if name in r:
            m[f"utilization_{name}"] = r[name]["utilization"]
            if "b2b_bf16" in r:
                # MACs per cycle relative to BF16 (1.0 = same rate)
                m[f"rate_vs_bf16_{name[4:]}"] = (
                    (r[name]["macs"] / r[name]["window_cycles"])
                    / (r["b2b_bf16"]["macs"] / r["b2b_bf16"]["window_cycles"]))
    return m


if __name__ == "__main__":
    import sys
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
    sys.exit(0)
