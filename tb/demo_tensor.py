# SPDX-License-Identifier: Apache-2.0
"""``make sim`` part: a GEMM on the tensor engine (Verilator), with cycles and utilization.

``python -m tb.demo_tensor`` (preset from ``CONFIG``, default ``small``). Runs one BF16 tile
(K = rows, M = cols, N = one PSUM bank) and 8 back-to-back tiles, checks the PSUM read-out bit
for bit against ``golden.tensor``, and prints cycles, the cycle formula and utilization.
"""

from __future__ import annotations

from rtl.config import preset_from_env


def main(cfg=None):
    from tb.tensor.gemm import run
    cfg = cfg or preset_from_env("small")
    if "bf16" not in cfg.formats:
        return other_format(cfg, run)
    R, C, N = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    print(f"[tensor] preset {cfg.name}: {R}x{C} PEs, GEMM tiles K={R} M={C} N={N} (BF16 in, "
          f"FP32 PSUM), results checked bit-exact against golden.tensor")
    m = run(cfg, scenarios=["single_bf16", "b2b_bf16"])
    print(f"[tensor] 1 tile : {m['cycles_single_tile_bf16']} cycles first input -> last PSUM "
          f"write (formula M+1+N+L = {m['formula_single_tile_cycles']}, L = "
          f"{m['engine_latency_cycles']}), utilization {m['utilization_single_tile_bf16']:.3f}")
    print(f"[tensor] 8 tiles: {m['cycles_back_to_back_bf16']} cycles (formula "
          f"{m['formula_back_to_back_cycles']}), utilization "
          f"{m['utilization_back_to_back_bf16']:.3f}; sim {m['sim_cycles_per_second']:.0f} "
          f"cycles/s")
    return m


def other_format(cfg, run):
    """A preset without BF16: 8 back-to-back tiles in its first format (FP8 or FP32)."""
    from tb.tensor.tb_tensor_bench import scenarios
    names = [n for n in scenarios(cfg) if n.startswith("b2b_")]
    if not names:
        print(f"[tensor] preset {cfg.name}: no dense format to run a GEMM in")
        return None
    name = names[0]
    m = run(cfg, scenarios=[name])
    print(f"[tensor] preset {cfg.name}: {cfg.pe_rows}x{cfg.pe_cols} PEs, 8 back-to-back tiles "
          f"K={cfg.pe_rows} M={cfg.pe_cols} N={cfg.psum_bank_fp32} ({name[4:]}), checked "
          f"bit-exact: utilization {m[f'utilization_{name}']:.3f} (formula "
          f"{m['formula_back_to_back_cycles']} cycles); sim {m['sim_cycles_per_second']:.0f} "
          f"cycles/s")
    return m


if __name__ == "__main__":
    main()
