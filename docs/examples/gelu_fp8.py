# SPDX-License-Identifier: Apache-2.0
"""An FP8 residual GELU block ``YT = XT + gelu(W.T @ XT)``, tiled over K and N
(docs/kernels.md §5).

``XT [D, T]`` (features on the rows, as the tensor engine contracts over the partitions) and
``W [D, D]`` are ``fp8_e4m3``; ``YT [D, T]`` is bf16. The D x D product runs in K tiles of
``pe_rows`` rows accumulated in one PSUM bank (``accumulate=True`` after the first), M tiles
of ``pe_cols`` output features, N tiles of at most ``psum_bank_fp32`` tokens (the last one
partial). ``W`` is loaded once, one descriptor per K tile, and the matmuls take column views
of it; each ``XT`` K tile is loaded once per N tile. The scalar engine applies GELU from PSUM
to an fp32 tile; the vector engine adds the residual (an fp8 tile) and rounds to bf16.

    make sim KERNEL=docs/examples/gelu_fp8.py:residual_gelu_fp8
"""

import ml_dtypes
import numpy as np

from golden.kernel import Kernel

FP8 = "fp8_e4m3"


def inputs(cfg, seed=2):
    """``(XT [D, T], W [D, D])`` as ``ml_dtypes.float8_e4m3`` arrays: ``D = 2 pe_rows`` (two
    K tiles), ``T = 1.5 psum_bank_fp32`` (two N tiles, the second half full)."""
    rng = np.random.default_rng(seed)
    D, T = 2 * cfg.pe_rows, cfg.psum_bank_fp32 * 3 // 2
    xt = rng.standard_normal((D, T)).astype(ml_dtypes.float8_e4m3)
    w = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(ml_dtypes.float8_e4m3)
    return xt, w


def residual_gelu_fp8(cfg):
    """The kernel for ``cfg``: inputs from :func:`inputs`, output ``YT``."""
    xt, w = inputs(cfg)
    D, T = xt.shape
    KT, MT, NT = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    k = Kernel(cfg)
    k.load_table("gelu")        # first: on small the table takes most of an SBUF partition
    xt_d = k.dram_tensor("XT", dtype=FP8, data=xt)       # ml_dtypes fp8 values, taken as they are
    w_d = k.dram_tensor("W", dtype=FP8, data=w)
    yt_d = k.dram_tensor("YT", (D, T), "bf16")
    w_s = []
    for k0 in range(0, D, KT):                           # W resident: one load per K tile
        t = k.sbuf_tile(KT, D, FP8, f"w{k0}")
        k.load(t, w_d, row0=k0)
        w_s.append(t)
    for t0 in range(0, T, NT):
        tn = min(NT, T - t0)
        x_s = []
        for k0 in range(0, D, KT):
            t = k.sbuf_tile(KT, tn, FP8, f"x{k0}_{t0}")
            k.load(t, xt_d, row0=k0, col0=t0)
            x_s.append(t)
        for m0 in range(0, D, MT):
            acc = k.psum_tile(MT, tn)
            for i, (wt, xk) in enumerate(zip(w_s, x_s)):
                k.matmul(acc, wt.view(m0, MT), xk, accumulate=i > 0)
            g = k.sbuf_tile(MT, tn, "fp32", f"g{m0}_{t0}")
            k.activation(g, acc, "gelu")
            res = k.sbuf_tile(MT, tn, FP8, f"res{m0}_{t0}")
            k.load(res, xt_d, row0=m0, col0=t0)
            y = k.sbuf_tile(MT, tn, "bf16", f"y{m0}_{t0}")
            k.tensor_tensor(y, g, res, "add")
            k.store(yt_d, y, row0=m0, col0=t0)
            for t in (g, res, y):
                k.free(t)
        for t in x_s:
            k.free(t)
    k.output("YT", yt_d)
    return k
