# SPDX-License-Identifier: Apache-2.0
"""``make sim`` part: a 4:16 structured-sparse GEMM next to its dense twin (Verilator).

``python -m tb.demo_sparse`` (preset from ``CONFIG``, default ``small``). The sparse GEMM runs
K_logical = rows * 4 over one compressed stationary tile; its dense twin runs the decompressed
tile as 4 dense K-chunks accumulating in PSUM. Both are checked bit for bit against the golden
model (``golden.sparse`` / ``golden.tensor``), and both cycle counts are printed.
"""

from __future__ import annotations

from rtl.config import preset_from_env


def main(cfg=None):
    from tb.tensor.sparse_gemm import run_demo
    cfg = cfg or preset_from_env("small")
    if not cfg.sparsity:
        print(f"[sparse] preset {cfg.name}: no sparse patterns enabled")
        return None
    d = run_demo(cfg)
    k = d["k_logical"]
    print(f"[sparse] preset {cfg.name}: GEMM K={k} M={cfg.pe_cols} N={d['n']} ({d['fmt']}), "
          f"checked bit-exact")
    print(f"[sparse] {d['pattern']} sparse (one compressed tile of {cfg.pe_rows} rows): "
          f"{d['sparse_cycles']} cycles; dense twin ({k // cfg.pe_rows} K-chunks accumulated "
          f"in PSUM): {d['dense_cycles']} cycles; speed-up "
          f"{d['dense_cycles'] / d['sparse_cycles']:.2f}x")
    return d


if __name__ == "__main__":
    main()
