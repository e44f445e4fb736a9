# SPDX-License-Identifier: Apache-2.0
"""The cycle-model suite: small kernels that together exercise every engine with odd free
sizes (``docs/core.md``, cycle model), each a :class:`~golden.kernels.KernelCase` with the
expected codes composed from ``golden.vector`` / ``golden.activation`` / ``golden.tensor``
calls directly (no ISA simulator) and a float64 reference with its bound.

* :func:`softmax_rows`: row softmax of ``X [T, F]`` (vector reduce, scalar ``exp`` with the
  per-partition bias, reciprocal, vector scale);
* :func:`row_reduce`: per-row sum, max and min of ``X [T, F]``;
* :func:`rms_norm`: ``x * rsqrt(mean(x^2) + eps) * gamma``;
* :func:`act_chain`: a chain of scalar-engine activations (three tables), each reading the
  one before;
* :func:`pe_transpose`: ``X.T`` by the tensor engine's transpose, block by block;
* :func:`dma_copy`: a DRAM -> SBUF -> DRAM copy over every DMA queue, whole rows and column
  blocks;
* :func:`gemm_fp8`: the tiled GEMM of :func:`golden.kernels.gemm_kernel` in FP8 E4M3.

:data:`SUITE` maps each name to ``(kernel, inputs)``: ``kernel(cfg, *inputs(cfg, rng,
**sizes), dram_bytes=...)``."""

from __future__ import annotations

import numpy as np

from golden import activation as ga
from golden import vector as gv
from golden.kernel import DramTensor, Kernel
from golden.kernels.common import (ONE, KernelCase, decode_f64, encode_codes, f32_bits,
                                   gemm_reference, random_fp32)
from golden.kernels.gemm import gemm_kernel, split_queues

__all__ = ["softmax_rows", "row_reduce", "rms_norm", "act_chain", "pe_transpose", "dma_copy",
           "gemm_fp8", "SUITE"]


def _f64(codes):
    return np.asarray(codes, np.uint32).view(np.float32).astype(np.float64)


def _check_rows(cfg, name, X):
    X = np.asarray(X, np.uint32)
    if X.ndim != 2 or not 1 <= X.shape[0] <= cfg.partitions:
        raise ValueError(f"{name} X must be [T, F] with T in [1, {cfg.partitions}], not "
                         f"shape {X.shape}")
    return X


# --- softmax -----------------------------------------------------------------------------------

def softmax_rows(cfg, X, *, dram_bytes=1 << 20):
    """``Y = softmax(X)`` along the free dimension of ``X [T, F]`` (fp32 codes, rows on
    partitions): ``m = max x`` (``tensor_reduce``), ``-m`` (``tensor_scalar``), ``e = exp(x -
    m)`` (``activation`` with the per-partition bias), ``s = sum e`` (``tensor_reduce``),
    ``r = 1 / s`` (``activation``), ``y = e r`` (``tensor_scalar``), stored as fp32."""
    X = _check_rows(cfg, "softmax_rows", X)
    T, F = X.shape
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table("exp")
    x = k.sbuf_tile(T, F, "fp32", "x")
    k.load(x, k.dram_tensor("X", dtype="fp32", codes=X))
    y = k.dram_tensor("Y", (T, F), "fp32")
    col = {n: k.sbuf_tile(T, 1, "fp32", n) for n in ("m", "negm", "s", "r")}
    k.tensor_reduce(col["m"], x, "max")
    k.tensor_scalar(col["negm"], col["m"], "multiply", -1.0)
    e = k.sbuf_tile(T, F, "fp32", "e")
    k.activation(e, x, "exp", bias_tile=col["negm"])
    k.tensor_reduce(col["s"], e, "add")
    k.activation(col["r"], col["s"], "reciprocal")
    p = k.sbuf_tile(T, F, "fp32", "p")
    k.tensor_scalar(p, e, "multiply", col["r"])
    k.store(y, p)
    k.output("Y", y)
    ways = gv.reduce_ways(cfg)
    mx = gv.reduce_lanes(gv.ALU_MAX, X.T, ways)
    nm = gv.alu(gv.ALU_MUL, mx, np.uint32(f32_bits(-1.0)), 0)
    E = ga.activation(X, "exp", np.uint32(ONE), nm[:, None])
    sm = gv.reduce_lanes(gv.ALU_ADD, E.T, ways)
    rs = ga.activation(sm, "reciprocal", np.uint32(ONE), np.uint32(0))
    P = gv.alu(gv.ALU_MUL, E, rs[:, None], 0)
    # float64: exp and reciprocal a few FP32 ulps each, the sum's F roundings
    x64 = _f64(X)
    z = np.exp(x64 - x64.max(axis=1, keepdims=True))
    ref = z / z.sum(axis=1, keepdims=True)
    tol = (2.0 ** -20 + (F + 4) * 2.0 ** -24) * ref + 1e-37
    return KernelCase("softmax_rows", cfg, k.build(), {"Y": P}, {"Y": ref}, {"Y": tol},
                      {"Y": "fp32"}, info={"F": F})


# --- row reductions ----------------------------------------------------------------------------

def row_reduce(cfg, X, *, dram_bytes=1 << 20):
    """Per row of ``X [T, F]`` (fp32 codes): ``S = sum x``, ``M = max x``, ``N = min |x|``
    (``tensor_reduce`` x3, the last with the pre-operation ``max(x, -x)`` given as
    ``x * -1`` then ``max``: two reduces read the same tile), stored as ``[T, 1]`` fp32."""
    X = _check_rows(cfg, "row_reduce", X)
    T, F = X.shape
    k = Kernel(cfg, dram_bytes=dram_bytes)
    x = k.sbuf_tile(T, F, "fp32", "x")
    k.load(x, k.dram_tensor("X", dtype="fp32", codes=X))
    outs = {}
    for nm, op, pre, opd in (("S", "add", "bypass", 0.0), ("M", "max", "bypass", 0.0),
                             ("N", "min", "multiply", -1.0)):
        c = k.sbuf_tile(T, 1, "fp32", nm)
        k.tensor_reduce(c, x, op, pre_op=pre, pre_operand=opd)
        outs[nm] = k.dram_tensor(nm, (T, 1), "fp32")
        k.store(outs[nm], c)
        k.output(nm, outs[nm])
    ways = gv.reduce_ways(cfg)
    neg = gv.alu(gv.ALU_MUL, X, np.uint32(f32_bits(-1.0)), 0)
    exp = {"S": gv.reduce_lanes(gv.ALU_ADD, X.T, ways)[:, None],
           "M": gv.reduce_lanes(gv.ALU_MAX, X.T, ways)[:, None],
           "N": gv.reduce_lanes(gv.ALU_MIN, neg.T, ways)[:, None]}
    x64 = _f64(X)
    ref = {"S": x64.sum(axis=1, keepdims=True), "M": x64.max(axis=1, keepdims=True),
           "N": (-x64).min(axis=1, keepdims=True)}
    tol = {"S": F * 2.0 ** -24 * np.abs(x64).sum(axis=1, keepdims=True) + 1e-37,
           "M": np.full((T, 1), 1e-300), "N": np.full((T, 1), 1e-300)}
    return KernelCase("row_reduce", cfg, k.build(), exp, ref, tol,
                      {n: "fp32" for n in exp}, info={"F": F})


# --- RMS norm ----------------------------------------------------------------------------------

def rms_norm(cfg, X, gamma, *, eps=2.0 ** -16, dram_bytes=1 << 20):
    """``Y = x * rsqrt(mean(x^2) + eps) * gamma`` over the free dimension of ``X [T, F]``
    (fp32 codes); ``gamma [F]`` broadcast to every partition by the DMA (row pitch 0).
    ``x*x`` (``tensor_tensor``), its sum (``tensor_reduce``), ``* RNE_fp32(1/F)``
    (``tensor_scalar``), ``rsqrt(. + eps)`` (``activation``), ``x * rstd`` (``tensor_scalar``),
    ``* gamma`` (``tensor_tensor``), stored as bf16."""
    X, gamma = _check_rows(cfg, "rms_norm", X), np.asarray(gamma, np.uint32)
    T, F = X.shape
    if gamma.shape != (F,):
        raise ValueError(f"rms_norm gamma must have shape ({F},), not {gamma.shape}")
    inv = float(np.float32(1.0 / F))
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table("rsqrt")
    x = k.sbuf_tile(T, F, "fp32", "x")
    k.load(x, k.dram_tensor("X", dtype="fp32", codes=X))
    g = k.dram_tensor("gamma", dtype="fp32", codes=gamma.reshape(1, F))
    gt_ = k.sbuf_tile(T, F, "fp32", "g")
    k.load(gt_, DramTensor(g.name, g.addr, (T, F), "fp32", 0))
    y = k.dram_tensor("Y", (T, F), "bf16")
    sq = k.sbuf_tile(T, F, "fp32", "sq")
    k.tensor_tensor(sq, x, x, "multiply")
    col = {n: k.sbuf_tile(T, 1, "fp32", n) for n in ("ss", "ms", "rstd")}
    k.tensor_reduce(col["ss"], sq, "add")
    k.tensor_scalar(col["ms"], col["ss"], "multiply", inv)
    k.activation(col["rstd"], col["ms"], "rsqrt", bias=eps)
    k.tensor_scalar(sq, x, "multiply", col["rstd"])
    out = k.sbuf_tile(T, F, "bf16", "y")
    k.tensor_tensor(out, sq, gt_, "multiply")
    k.store(y, out)
    k.output("Y", y)
    ways = gv.reduce_ways(cfg)
    ss = gv.reduce_lanes(gv.ALU_ADD, gv.alu(gv.ALU_MUL, X, X, 0).T, ways)
    ms = gv.alu(gv.ALU_MUL, ss, np.uint32(f32_bits(inv)), 0)
    rstd = ga.activation(ms, "rsqrt", np.uint32(ONE), np.uint32(f32_bits(eps)))
    yb = gv.alu(gv.ALU_MUL, gv.alu(gv.ALU_MUL, X, rstd[:, None], 0), gamma[None, :], 0)
    exp = encode_codes(cfg, yb, "bf16")
    x64, g64 = _f64(X), _f64(gamma)
    ref = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * g64
    tol = (2.0 ** -8 + (F + 8) * 2.0 ** -24) * np.abs(ref) + 1e-37
    return KernelCase("rms_norm", cfg, k.build(), {"Y": exp}, {"Y": ref}, {"Y": tol},
                      {"Y": "bf16"}, info={"F": F})


# --- scalar-engine chain -----------------------------------------------------------------------

#: The chain's steps: (function, scale); each reads the step before.
CHAIN = (("silu", 1.0), ("tanh", 0.5), ("square", 2.0))


def act_chain(cfg, X, *, dram_bytes=1 << 20):
    """``Y = square(2 tanh(0.5 silu(x)))`` on the scalar engine, one ``activation`` per step
    (each reads what the one before writes: the engine's read-after-write wait), a table load
    between steps, and a second, independent ``silu`` of ``X`` (``Z``, bf16) that needs no
    wait; ``X [T, F]`` fp32 codes."""
    X = _check_rows(cfg, "act_chain", X)
    T, F = X.shape
    k = Kernel(cfg, dram_bytes=dram_bytes)
    # the tiles in the last two banks, so each table's temporary tile (larger than a bank on
    # the small preset) finds room in the first ones
    hi = [cfg.sbuf_banks - 1, max(0, cfg.sbuf_banks - 2)]
    x = k.sbuf_tile(T, F, "fp32", "x", bank=hi[0])
    k.load(x, k.dram_tensor("X", dtype="fp32", codes=X))
    a, b = (k.sbuf_tile(T, F, "fp32", n, bank=bk) for n, bk in (("a", hi[1]), ("b", hi[0])))
    zt = k.sbuf_tile(T, F, "bf16", "z", bank=hi[1])
    src = x
    for i, (fn, sc) in enumerate(CHAIN):
        dst = (a, b)[i % 2]
        k.activation(dst, src, fn, scale=sc)
        if i == 0:
            k.activation(zt, x, fn, scale=sc)
        src = dst
    y, z = k.dram_tensor("Y", (T, F), "fp32"), k.dram_tensor("Z", (T, F), "bf16")
    k.store(y, src)
    k.store(z, zt)
    k.output("Y", y)
    k.output("Z", z)
    v = X
    for i, (fn, sc) in enumerate(CHAIN):
        v = ga.activation(v, fn, np.uint32(f32_bits(sc)), np.uint32(0))
        if i == 0:
            zc = encode_codes(cfg, v, "bf16")
    r = _f64(X)
    refs = []
    for fn, sc in CHAIN:
        r = ga.reference(fn, sc * r)
        refs.append(r)
    # each step: 4 FP32 ulps of its table plus the input's error through its slope (<= 1.1
    # for silu, 0.5 for tanh(0.5 .), 4|v| for square(2 .))
    e1 = 2.0 ** -21 * np.abs(refs[0]) + 1e-37
    e2 = 0.5 * e1 + 2.0 ** -21 * np.abs(refs[1]) + 1e-37
    e3 = 4 * np.abs(refs[1]) * 2 * e2 + 2.0 ** -21 * np.abs(refs[2]) + 1e-37
    return KernelCase("act_chain", cfg, k.build(), {"Y": v, "Z": zc},
                      {"Y": refs[2], "Z": refs[0]},
                      {"Y": e3, "Z": 2.0 ** -8 * np.abs(refs[0]) + e1},
                      {"Y": "fp32", "Z": "bf16"}, info={"F": F})


# --- PE transpose ------------------------------------------------------------------------------

def pe_transpose(cfg, X, *, dram_bytes=1 << 20):
    """``Y = X.T`` for ``X [K, N]`` bf16 codes (``K <= pe_rows``, ``K <= pe_cols``), block by
    block of ``B = min(pe_cols, partitions)`` columns: the tensor engine's transpose (the block
    as stationary, the transposed raw codes zero-extended in a PSUM bank), a vector
    ``tensor_copy`` of the FP32 containers to SBUF (the code in the low 16 bits), one DMA store
    per block to ``Y [N, K]`` as fp32 words holding the bf16 codes."""
    X = np.asarray(X, np.uint32)
    K, N = X.shape
    B = min(cfg.pe_cols, cfg.partitions)
    if not 1 <= K <= min(cfg.pe_rows, B) or N % B:
        raise ValueError(f"pe_transpose X [K, N] must have K in [1, {min(cfg.pe_rows, B)}] and "
                         f"N a multiple of {B}, not {X.shape}")
    k = Kernel(cfg, dram_bytes=dram_bytes)
    x = k.sbuf_tile(K, N, "bf16", "x")
    k.load(x, k.dram_tensor("X", dtype="bf16", codes=X))
    y = k.dram_tensor("Y", (N, K), "fp32")
    q = split_queues(cfg)
    outs = [k.sbuf_tile(B, K, "fp32", f"o{i}") for i in range(2)]
    for j, n0 in enumerate(range(0, N, B)):
        ps = k.psum_tile(B, K)
        k.transpose(ps, x.view(n0, B))
        o = outs[j % 2]
        k.copy(o, ps)
        k.store(y, o, n0, 0, queue=q("rest"))
    k.output("Y", y)
    want = np.ascontiguousarray(X.T)                # the codes, zero-extended to 32 bits
    # reference: the same codes read as FP32 words; any other word is off by at least 2^-149
    ref = _f64(want)
    return KernelCase("pe_transpose", cfg, k.build(), {"Y": want}, {"Y": ref},
                      {"Y": np.full(want.shape, 2.0 ** -150)}, {"Y": "fp32"},
                      info={"F": N, "exact": True})


# --- DMA copy ----------------------------------------------------------------------------------

def dma_copy(cfg, X, *, dram_bytes=1 << 20):
    """``Y = X`` for ``X [T, F]`` bf16 codes through SBUF: loads of column blocks (a third of
    the row each, odd widths) round-robin over the first DMA engine's queues, stores of whole
    rows over the others; plus ``Z``, the first column block copied again by one descriptor
    each way."""
    X = _check_rows(cfg, "dma_copy", X)
    T, F = X.shape
    k = Kernel(cfg, dram_bytes=dram_bytes)
    xd = k.dram_tensor("X", dtype="bf16", codes=X)
    x = k.sbuf_tile(T, F, "bf16", "x")
    q = split_queues(cfg)
    w = -(-F // 3)
    for c0 in range(0, F, w):
        k.load(x.view(c0, min(w, F - c0)), xd, 0, c0, queue=q("first"))
    y = k.dram_tensor("Y", (T, F), "bf16")
    k.store(y, x, queue=q("rest"))
    z = k.dram_tensor("Z", (T, w), "bf16")
    zt = k.sbuf_tile(T, w, "bf16", "z")
    k.load(zt, xd, 0, 0, queue=q("first"))
    k.store(z, zt, queue=q("rest"))
    k.output("Y", y)
    k.output("Z", z)
    ref = {"Y": decode_f64(cfg, X, "bf16"), "Z": decode_f64(cfg, X[:, :w], "bf16")}
    return KernelCase("dma_copy", cfg, k.build(), {"Y": X.copy(), "Z": X[:, :w].copy()}, ref,
                      {n: np.full(v.shape, 1e-300) for n, v in ref.items()},
                      {"Y": "bf16", "Z": "bf16"}, info={"F": F, "exact": True})


# --- FP8 GEMM ----------------------------------------------------------------------------------

def gemm_fp8(cfg, AT, B, *, dram_bytes=1 << 20):
    """``C = A @ B`` (:func:`golden.kernels.gemm_kernel` with ``evacuate``) with ``AT [K, M]``
    and ``B [K, N]`` FP8 E4M3 codes; C fp32. Bound: one FP32 rounding per product-sum step of a
    K tile and per K-tile accumulate. The products have 8 significant bits, so sums within
    2^16 of range are exact in FP32 (``info["exact"]``: the inputs' sums are)."""
    AT, B = np.asarray(AT, np.uint32), np.asarray(B, np.uint32)
    K, M = AT.shape
    N = B.shape[1]
    kp = gemm_kernel(cfg, AT, B, dtype="fp8_e4m3", evacuate=True, dram_bytes=dram_bytes)
    a, b = decode_f64(cfg, AT, "fp8_e4m3"), decode_f64(cfg, B, "fp8_e4m3")
    steps = K + -(-K // cfg.pe_rows) + 1
    tol = steps * 2.0 ** -24 * (np.abs(a).T @ np.abs(b)) + 2.0 ** -149
    exp = gemm_reference(cfg, AT, B, "fp8_e4m3")
    return KernelCase("gemm_fp8", cfg, kp, {"C": exp}, {"C": a.T @ b}, {"C": tol},
                      {"C": "fp32"}, flops=2 * K * M * N, info={"exact": True})


# --- inputs ------------------------------------------------------------------------------------

def _fp8(cfg, rng, shape):
    return encode_codes(cfg, random_fp32(rng, shape), "fp8_e4m3")


def _bf16(cfg, rng, shape):
    return encode_codes(cfg, random_fp32(rng, shape), "bf16")


#: name -> (kernel, inputs(cfg, rng, **sizes)); sizes default to odd free sizes that fit the
#: small preset's SBUF.
SUITE = {
    "softmax_rows": (softmax_rows, lambda c, r, T=None, F=96: (
        random_fp32(r, (T or c.partitions, F), 2.0),)),
    "row_reduce": (row_reduce, lambda c, r, T=None, F=45: (
        random_fp32(r, (T or c.partitions, F), 3.0),)),
    "rms_norm": (rms_norm, lambda c, r, T=None, F=67: (
        random_fp32(r, (T or c.partitions, F), 2.0, 0.3), random_fp32(r, (F,), 0.5, 1.0))),
    "act_chain": (act_chain, lambda c, r, T=None, F=50: (
        random_fp32(r, (T or c.partitions, F), 1.5),)),
    "pe_transpose": (pe_transpose, lambda c, r, K=None, N=None: (
        _bf16(c, r, (K or min(c.pe_rows, c.pe_cols, c.partitions),
                     N or 6 * min(c.pe_cols, c.partitions))),)),
    "dma_copy": (dma_copy, lambda c, r, T=None, F=201: (
        _bf16(c, r, (T or c.partitions, F)),)),
    "gemm_fp8": (gemm_fp8, lambda c, r, K=None, M=None, N=None: (
        _fp8(c, r, (K or 4 * c.pe_rows, M or 2 * c.pe_cols)),
        _fp8(c, r, (K or 4 * c.pe_rows, N or 2 * c.psum_bank_fp32)))),
}

