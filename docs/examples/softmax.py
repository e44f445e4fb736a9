# SPDX-License-Identifier: Apache-2.0
"""Row softmax ``y[r, :] = exp(x[r, :] - max x[r, :]) / sum exp(...)`` over an odd free size
``F = 96``, ``ROW_TILES`` tiles of ``cfg.partitions`` rows (docs/kernels.md §5).

Each row tile: the row max (``tensor_reduce``), its negation (``tensor_scalar``), ``exp(x -
max)`` on the scalar engine with the negated max as a per-partition bias, the row sum
(``tensor_reduce``), its reciprocal (``activation``), the product (``tensor_scalar`` with a
per-partition operand). ``x`` is bf16, ``y`` fp32.

    make sim KERNEL=docs/examples/softmax.py:softmax
"""

import numpy as np

from golden.kernel import Kernel

F = 96          # the free size: not a power of two
ROW_TILES = 2


def inputs(cfg, seed=1):
    """The float32 input ``x [ROW_TILES * partitions, F]``."""
    rng = np.random.default_rng(seed)
    return (2.0 * rng.standard_normal((ROW_TILES * cfg.partitions, F))).astype(np.float32)


def softmax(cfg):
    """The kernel for ``cfg``: input from :func:`inputs`, output ``y``."""
    x = inputs(cfg)
    P = cfg.partitions
    k = Kernel(cfg)
    k.load_table("exp")                 # the first function the scalar engine needs
    x_d = k.dram_tensor("x", dtype="bf16", data=x)
    y_d = k.dram_tensor("y", x.shape, "fp32")
    for r0 in range(0, x.shape[0], P):
        xt = k.sbuf_tile(P, F, "bf16", f"x{r0}")
        k.load(xt, x_d, row0=r0)
        mx = k.sbuf_tile(P, 1, "fp32", f"max{r0}")
        k.tensor_reduce(mx, xt, "max")
        negmx = k.sbuf_tile(P, 1, "fp32", f"negmax{r0}")
        k.tensor_scalar(negmx, mx, "multiply", -1.0)
        e = k.sbuf_tile(P, F, "fp32", f"e{r0}")
        k.activation(e, xt, "exp", bias_tile=negmx)         # exp(x - max)
        s = k.sbuf_tile(P, 1, "fp32", f"sum{r0}")
        k.tensor_reduce(s, e, "add")
        rs = k.sbuf_tile(P, 1, "fp32", f"rsum{r0}")
        k.activation(rs, s, "reciprocal")                   # loads the reciprocal table
        y = k.sbuf_tile(P, F, "fp32", f"y{r0}")
        k.tensor_scalar(y, e, "multiply", rs)
        k.store(y_d, y, row0=r0)
        for t in (xt, mx, negmx, e, s, rs, y):
            k.free(t)
    k.output("y", y_d)
    return k
