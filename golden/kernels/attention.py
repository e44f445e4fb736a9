# SPDX-License-Identifier: Apache-2.0
"""The attention-head and layer-norm kernels."""

from __future__ import annotations

import math

import numpy as np

from golden import activation as ga
from golden import tensor as gt
from golden import vector as gv
from golden.kernel import DramTensor, Kernel
from golden.kernels.common import ONE, KernelCase, decode_f64, encode_codes, f32_bits
from rtl.config import check_config

__all__ = ["attention_head", "layer_norm"]


# --- attention head ----------------------------------------------------------------------------

def attention_head(cfg, QT, KT, V, *, dram_bytes=1 << 20):
    """``OT = (softmax(Q K^T / sqrt(d)) V)^T`` for one head in one tile: ``QT [d, Lq]``,
    ``KT [d, Lk]``, ``V [Lk, dv]`` bf16 codes; ``d, Lq, Lk <= pe_rows``, ``Lq, Lk, dv <=
    pe_cols``.

    ``S = QT.T @ KT`` (PSUM, queries on partitions); ``m = max_j S`` (``tensor_reduce``);
    ``-m s`` (``tensor_scalar``, ``s = RNE_fp32(1 / sqrt(d))``); ``E = exp(S s - m s)``
    (``activation`` with the scale immediate and the per-partition bias AP, fp32 to SBUF);
    ``sum_j E`` (``tensor_reduce``); ``r = reciprocal(sum)`` (``activation``); ``P = E r``
    (``tensor_scalar`` with the per-partition operand, fp32); ``P^T`` cast to bf16: by the vector
    engine's ``block_transpose`` when ``Lq = Lk = min(32, P)``, else by the PE transpose (fp32,
    bit-exact) and a ``tensor_copy``; ``OT = V.T @ P^T``
    (PSUM), copied to SBUF fp32 and stored to ``OT [dv, Lq]``."""
    check_config(cfg, "attention_head")
    QT, KT, V = (np.asarray(a, np.uint32) for a in (QT, KT, V))
    d, Lq = QT.shape
    Lk, dv = V.shape
    if KT.shape != (d, Lk) or not (d <= cfg.pe_rows and Lq <= min(cfg.pe_rows, cfg.pe_cols)
                                   and Lk <= min(cfg.pe_rows, cfg.pe_cols)
                                   and dv <= cfg.pe_cols):
        raise ValueError(f"attention_head QT [d, Lq], KT [d, Lk], V [Lk, dv] must agree with "
                         f"d, Lq, Lk <= pe_rows = {cfg.pe_rows} and Lq, Lk, dv <= pe_cols = "
                         f"{cfg.pe_cols}, not {QT.shape}, {KT.shape}, {V.shape}")
    s = float(np.float32(1.0 / math.sqrt(d)))
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table("exp")
    tq = k.sbuf_tile(d, Lq, "bf16", "qt")
    tk = k.sbuf_tile(d, Lk, "bf16", "kt")
    tv = k.sbuf_tile(Lk, dv, "bf16", "v")
    k.load(tq, k.dram_tensor("QT", dtype="bf16", codes=QT))
    k.load(tk, k.dram_tensor("KT", dtype="bf16", codes=KT))
    k.load(tv, k.dram_tensor("V", dtype="bf16", codes=V))
    ot = k.dram_tensor("OT", (dv, Lq), "fp32")
    ps_s = k.psum_tile(Lq, Lk)
    k.matmul(ps_s, tq, tk)
    m = k.sbuf_tile(Lq, 1, "fp32", "max")
    k.tensor_reduce(m, ps_s, "max")
    negm = k.sbuf_tile(Lq, 1, "fp32", "negmax")
    k.tensor_scalar(negm, m, "multiply", -s)
    e = k.sbuf_tile(Lq, Lk, "fp32", "e")
    k.activation(e, ps_s, "exp", scale=s, bias_tile=negm)
    ssum = k.sbuf_tile(Lq, 1, "fp32", "sum")
    k.tensor_reduce(ssum, e, "add")
    r = k.sbuf_tile(Lq, 1, "fp32", "rsum")
    k.activation(r, ssum, "reciprocal", scale=1.0)
    p = k.sbuf_tile(Lq, Lk, "fp32", "p")
    k.tensor_scalar(p, e, "multiply", r)
    pt = k.sbuf_tile(Lk, Lq, "bf16", "pt")
    if Lq == Lk == min(32, cfg.partitions):
        k.block_transpose(pt, p)        # the vector engine's B x B transpose, bf16 on write
    else:
        ps_t = k.psum_tile(Lk, Lq)
        k.transpose(ps_t, p)            # the PE's transpose (raw bits: needs fp32 enabled)
        k.copy(pt, ps_t)
    ps_o = k.psum_tile(dv, Lq)
    k.matmul(ps_o, tv, pt)
    o = k.sbuf_tile(dv, Lq, "fp32", "o")
    k.copy(o, ps_o)
    k.store(ot, o)
    k.output("OT", ot)
    # the golden composition, step by step
    ways = gv.reduce_ways(cfg)
    S = gt.matmul(QT, "bf16", KT, "bf16", cfg)                          # [Lq, Lk]
    mx = gv.reduce_lanes(gv.ALU_MAX, S.T, ways)
    nm = gv.alu(gv.ALU_MUL, mx, np.uint32(f32_bits(-s)), 0)
    E = ga.activation(S, "exp", np.uint32(f32_bits(s)), nm[:, None])
    sm = gv.reduce_lanes(gv.ALU_ADD, E.T, ways)
    rs = ga.activation(sm, "reciprocal", np.uint32(ONE), np.uint32(0))
    Pm = gv.alu(gv.ALU_MUL, E, rs[:, None], 0)
    PT = encode_codes(cfg, np.ascontiguousarray(Pm.T), "bf16")              # [Lk, Lq]
    O = gt.matmul(V, "bf16", PT, "bf16", cfg)                           # [dv, Lq]
    # float64: softmax in float64; the bound covers P's bf16 rounding (2^-8 relative per
    # element), exp/reciprocal (a few FP32 ulps) and the chains
    q64, k64, v64 = (decode_f64(cfg, a, "bf16") for a in (QT, KT, V))
    z = (q64.T @ k64) * s
    pe = np.exp(z - z.max(axis=1, keepdims=True))
    P64 = pe / pe.sum(axis=1, keepdims=True)
    ref = (P64 @ v64).T
    tol = (2.0 ** -8 + 2.0 ** -18 * (d + Lk)) * (np.abs(v64).T @ P64.T) + 1e-30
    return KernelCase("attention_head", cfg, k.build(), {"OT": O}, {"OT": ref}, {"OT": tol},
                      {"OT": "fp32"}, flops=2 * Lq * Lk * (d + dv))


# --- layer norm --------------------------------------------------------------------------------

def layer_norm(cfg, X, gamma, beta, *, eps=2.0 ** -16, out_dtype="fp32", dram_bytes=1 << 20):
    """``Y = (X - mean) * rsqrt(var + eps) * gamma + beta`` over the free dimension of
    ``X [T, D]`` (fp32 codes, tokens on partitions, ``T <= partitions``); ``gamma``, ``beta``
    ``[D]`` fp32 codes, broadcast to every partition by the DMA (a row pitch of 0).

    ``s1 = sum x``, ``s2 = sum x*x`` (``tensor_tensor`` multiply, then ``tensor_reduce``),
    ``mean = s1 / D``, ``E[x^2] = s2 / D`` (``tensor_scalar``, ``1/D`` exact only for a power
    of two: it is ``RNE_fp32(1/D)``), ``var = E[x^2] - mean^2`` (``tensor_tensor`` x2),
    ``rstd = rsqrt(var + eps)`` (``activation``), ``(x - mean) * rstd`` (two
    ``tensor_scalar``: one per-partition operand each), ``* gamma + beta`` (``tensor_tensor``
    x2, the last one encoding ``out_dtype``)."""
    check_config(cfg, "layer_norm")
    X, gamma, beta = (np.asarray(a, np.uint32) for a in (X, gamma, beta))
    T, D = X.shape
    if T > cfg.partitions or gamma.shape != (D,) or beta.shape != (D,):
        raise ValueError(f"layer_norm X [T <= {cfg.partitions}, D], gamma [D], beta [D], not "
                         f"{X.shape}, {gamma.shape}, {beta.shape}")
    inv = float(np.float32(1.0 / D))
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table("rsqrt")
    x = k.sbuf_tile(T, D, "fp32", "x")
    k.load(x, k.dram_tensor("X", dtype="fp32", codes=X))
    tiles = {}
    for nm, v in (("gamma", gamma), ("beta", beta)):
        t = k.dram_tensor(nm, dtype="fp32", codes=v.reshape(1, D))
        bt = DramTensor(t.name, t.addr, (T, D), "fp32", 0)     # every row is row 0
        tiles[nm] = k.sbuf_tile(T, D, "fp32", nm)
        k.load(tiles[nm], bt)
    y = k.dram_tensor("Y", (T, D), out_dtype)
    col = {n: k.sbuf_tile(T, 1, "fp32", n) for n in ("s1", "s2", "mean", "ex2", "msq", "var",
                                                      "rstd")}
    k.tensor_reduce(col["s1"], x, "add")
    xc = k.sbuf_tile(T, D, "fp32", "xc")
    k.tensor_tensor(xc, x, x, "multiply")     # rtl.isa gives tensor_reduce no src1 slot
    k.tensor_reduce(col["s2"], xc, "add")
    k.tensor_scalar(col["mean"], col["s1"], "multiply", inv)
    k.tensor_scalar(col["ex2"], col["s2"], "multiply", inv)
    k.tensor_tensor(col["msq"], col["mean"], col["mean"], "multiply")
    k.tensor_tensor(col["var"], col["ex2"], col["msq"], "subtract")
    k.activation(col["rstd"], col["var"], "rsqrt", scale=1.0, bias=eps)
    k.tensor_scalar(xc, x, "subtract", col["mean"])
    xn = k.sbuf_tile(T, D, "fp32", "xn")
    k.tensor_scalar(xn, xc, "multiply", col["rstd"])
    k.tensor_tensor(xc, xn, tiles["gamma"], "multiply")
    out = k.sbuf_tile(T, D, out_dtype, "y")
    k.tensor_tensor(out, xc, tiles["beta"], "add")
    k.store(y, out)
    k.output("Y", y)
    # the golden composition
    ways = gv.reduce_ways(cfg)
    xb = X
    s1 = gv.reduce_lanes(gv.ALU_ADD, xb.T, ways)
    s2 = gv.reduce_lanes(gv.ALU_ADD, gv.alu(gv.ALU_MUL, xb, xb, 0).T, ways)
    invb = np.uint32(f32_bits(inv))
    mean = gv.alu(gv.ALU_MUL, s1, invb, 0)
    ex2 = gv.alu(gv.ALU_MUL, s2, invb, 0)
    var = gv.alu(gv.ALU_SUB, ex2, gv.alu(gv.ALU_MUL, mean, mean, 0), 0)
    rstd = ga.activation(var, "rsqrt", np.uint32(ONE), np.uint32(f32_bits(eps)))
    xn_ = gv.alu(gv.ALU_MUL, gv.alu(gv.ALU_SUB, xb, mean[:, None], 0), rstd[:, None], 0)
    yb = gv.alu(gv.ALU_ADD, gv.alu(gv.ALU_MUL, xn_, gamma[None, :], 0), beta[None, :], 0)
    exp = encode_codes(cfg, yb, out_dtype)
    # float64 reference; the bound: E[x^2] - mean^2 cancels (relative error of var about
    # 2^-22 D E[x^2] / var), halved by the rsqrt, then the products and the output rounding
    x64 = X.view(np.float32).astype(np.float64)
    g64, b64 = gamma.view(np.float32).astype(np.float64), beta.view(np.float32).astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    v = x64.var(axis=1, keepdims=True)
    xn64 = (x64 - mu) / np.sqrt(v + eps)
    ref = xn64 * g64 + b64
    ex2_64 = (x64 * x64).mean(axis=1, keepdims=True)
    rel = 2.0 ** -22 * (D + 8) * ex2_64 / (v + eps) + 2.0 ** -20
    out_rel = 2.0 ** -cfg.fmt(out_dtype).man_bits if out_dtype != "fp32" else 2.0 ** -23
    tol = rel * np.abs(xn64 * g64) + 2.0 ** -22 * np.abs(b64) + out_rel * np.abs(ref) + 1e-30
    return KernelCase("layer_norm", cfg, k.build(), {"Y": exp}, {"Y": ref}, {"Y": tol},
                      {"Y": out_dtype}, flops=0)


