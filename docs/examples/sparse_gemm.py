# SPDX-License-Identifier: Apache-2.0
"""A 2:4 sparse GEMM with SiLU, ``Y = silu(Ws.T @ X)``, on the tensor engine's sparse mode
(docs/kernels.md §5).

``W [K, M]`` (bf16) is pruned 2:4 along K by magnitude (the 2 largest of every 4 rows of a
column, :func:`golden.sparse.compress`) and kept **compressed**: the host stores each kept
value with its 2-bit position tag as a 32-bit (value, tag) pair (:func:`golden.kernel.
sparse_pairs`), ``[K / 2, M]``. ``X [K, N]`` (bf16) goes in as 32-bit lanes of the 2 logical
rows each physical row meets (:func:`golden.sparse.moving_lanes`), ``[K / 2, N]``. Both are
element codes, so they go in through ``codes=`` as fp32 tensors. K runs in tiles of
``pe_rows`` physical rows (``2 pe_rows`` logical) accumulated in PSUM. The config must enable
the ``2:4`` pattern (the small and default presets do).

    make sim KERNEL=docs/examples/sparse_gemm.py:sparse_gemm_silu
"""

import ml_dtypes
import numpy as np

from golden import sparse as gs
from golden.kernel import Kernel, sparse_pairs

PATTERN = "2:4"
N = 48


def inputs(cfg, seed=3):
    """Float32 ``(W [K, M], X [K, N])``: ``K = 4 pe_rows`` logical rows (two K tiles)."""
    rng = np.random.default_rng(seed)
    K = 4 * cfg.pe_rows
    w = (rng.standard_normal((K, cfg.pe_cols)) / np.sqrt(K / 2)).astype(np.float32)
    x = rng.standard_normal((K, N)).astype(np.float32)
    return w, x


def bf16_codes(a):
    """The bf16 element codes (RNE) of a float array."""
    return np.asarray(a).astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32)


def compressed(cfg):
    """The host side: ``(pairs [K/2, M], lanes [K/2, N], values, tags)`` of :func:`inputs`,
    W pruned 2:4 per K tile of ``2 pe_rows`` logical rows."""
    w, x = inputs(cfg)
    kl = 2 * cfg.pe_rows
    parts = [gs.compress(bf16_codes(w[k0:k0 + kl]), "bf16", PATTERN, cfg)
             for k0 in range(0, w.shape[0], kl)]
    values = np.concatenate([v for v, _ in parts])
    tags = np.concatenate([t for _, t in parts])
    lanes = gs.moving_lanes(bf16_codes(x), "bf16", PATTERN, cfg)
    return sparse_pairs(values, tags, "bf16", cfg), lanes, values, tags


def sparse_gemm_silu(cfg):
    """The kernel for ``cfg``: inputs from :func:`compressed`, output ``Y [M, N]``."""
    pairs, lanes, _, _ = compressed(cfg)
    KP, M = pairs.shape
    k = Kernel(cfg)
    k.load_table("silu")
    w_d = k.dram_tensor("Wpairs", dtype="fp32", codes=pairs)    # codes, by name
    x_d = k.dram_tensor("Xlanes", dtype="fp32", codes=lanes)
    y_d = k.dram_tensor("Y", (M, N), "fp32")
    acc = k.psum_tile(M, N)
    R = cfg.pe_rows
    for i, k0 in enumerate(range(0, KP, R)):
        wt = k.sbuf_tile(R, M, "fp32", f"w{k0}")
        xt = k.sbuf_tile(R, N, "fp32", f"x{k0}")
        k.load(wt, w_d, row0=k0)
        k.load(xt, x_d, row0=k0)
        k.sparse_matmul(acc, wt, xt, PATTERN, "bf16", "bf16", accumulate=i > 0)
    y = k.sbuf_tile(M, N, "fp32", "y")
    k.activation(y, acc, "silu")
    k.store(y_d, y)
    k.output("Y", y_d)
    return k
