# SPDX-License-Identifier: Apache-2.0
"""Your first kernel: ``y = silu(w.T @ x)`` on one tile (docs/kernels.md, "Your first kernel").

``w [K, M]`` and ``x [K, N]`` are bf16 with ``K = cfg.pe_rows`` (the contraction, on the SBUF
partitions) and ``M = cfg.pe_cols``; the tensor engine computes ``stationary.T @ moving`` into
an FP32 PSUM bank, the scalar engine applies SiLU on the way out to an fp32 SBUF tile, and
the sync engine's DMA stores it to ``y [M, N]``.

Run it on the golden simulator and on the RTL core::

    make sim KERNEL=docs/examples/first.py:first
"""

import numpy as np

from golden.kernel import Kernel

N = 32          # columns of x and y (<= cfg.psum_bank_fp32)


def inputs(cfg, seed=0):
    """The float32 inputs ``w [K, M]``, ``x [K, N]`` for ``cfg``."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((cfg.pe_rows, cfg.pe_cols)).astype(np.float32)
    x = rng.standard_normal((cfg.pe_rows, N)).astype(np.float32)
    return w, x


def first(cfg):
    """The kernel for ``cfg``: inputs from :func:`inputs`, output ``y``."""
    w, x = inputs(cfg)
    K, M = w.shape
    k = Kernel(cfg)
    w_d = k.dram_tensor("w", dtype="bf16", data=w)      # float32 values, rounded to bf16 (RNE)
    x_d = k.dram_tensor("x", dtype="bf16", data=x)
    y_d = k.dram_tensor("y", (M, N), "fp32")            # the result, zero until written
    w_s = k.sbuf_tile(K, M, "bf16", "w")                # SBUF tiles: partitions x elements
    x_s = k.sbuf_tile(K, N, "bf16", "x")
    k.load(w_s, w_d)                                    # one DMA descriptor each
    k.load(x_s, x_d)
    acc = k.psum_tile(M, N)                             # a PSUM bank, FP32
    k.matmul(acc, w_s, x_s)                             # acc = w.T @ x
    y_s = k.sbuf_tile(M, N, "fp32", "y")
    k.activation(y_s, acc, "silu")                      # y = silu(acc): PSUM -> SBUF
    k.store(y_d, y_s)
    k.output("y", y_d)
    return k
