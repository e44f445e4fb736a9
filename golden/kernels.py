# SPDX-License-Identifier: Apache-2.0
"""The ``make sim`` kernels (issue 14, ``docs/kernels.md`` §8): each is a function
``(cfg, inputs...) -> KernelCase`` that builds the :class:`golden.kernel.KernelProgram` (per
engine programs, DRAM image, output locations) with the kernel API **and** computes the expected
output independently: the same arithmetic composed from ``golden.tensor``, ``golden.vector``,
``golden.activation`` (and ``golden.sparse``) calls directly, without the ISA simulator, plus a
float64 reference with an error bound.

Every kernel uses only opcodes the RTL decoders accept today (dense ``load_stationary`` /
``multiply_moving`` / ``transpose``, the vector opcodes 0x20-0x28, ``activation`` and
``act_table_load``, ``dma_start``). Inputs are element codes (``uint32`` arrays of the named
format); tensors the tensor engine contracts over K are given transposed (``*T``), as the
engine computes ``stationary.T @ moving`` (docs/kernels.md §5)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from golden import activation as ga
from golden import tensor as gt
from golden import vector as gv
from golden.formats import convert_rne_bits, decode_bits
from golden.ap import ELEM_BYTES
from golden.isasim import table_words
from golden.kernel import DramTensor, Kernel, KernelProgram, _sub, split_queues
from rtl.config import CoreConfig, check_config

__all__ = ["KernelCase", "gemm_reference", "mlp", "attention_head", "layer_norm", "sparse_mlp", "KERNELS",
           "decode_f64", "random_inputs", "run_golden"]

ONE = 0x3F800000


@dataclass
class KernelCase:
    """A kernel ready to run: ``kp`` (the program), ``expected`` (output name -> element
    codes, the bit-exact golden composition), ``reference`` (output name -> float64 values),
    ``tolerance`` (output name -> float64 bound of ``|output - reference|``, elementwise),
    ``dtypes`` (output name -> format), ``flops`` (useful multiply-adds x 2)."""
    name: str
    cfg: CoreConfig
    kp: KernelProgram
    expected: dict
    reference: dict
    tolerance: dict
    dtypes: dict
    flops: int = 0
    info: dict = field(default_factory=dict)

    def check(self, outputs):
        """``{name: (bit mismatches, worst |out - ref| / tolerance)}`` for the outputs of a run
        (``KernelProgram.read_outputs``)."""
        out = {}
        for name, want in self.expected.items():
            got = np.asarray(outputs[name], np.uint32)
            bad = int(np.count_nonzero(got != want))
            v = decode_f64(self.cfg, got, self.dtypes[name])
            with np.errstate(invalid="ignore", divide="ignore"):
                r = np.abs(v - self.reference[name]) / self.tolerance[name]
            out[name] = (bad, float(np.nanmax(np.where(np.isnan(v), np.inf, r))))
        return out


def decode_f64(cfg, codes, dtype):
    """float64 values of element codes of ``dtype``."""
    bits = np.asarray(codes, np.uint32)
    if dtype != "fp32":
        bits = decode_bits(bits, cfg.fmt(dtype)).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def _encode(cfg, bits, dtype):
    bits = np.asarray(bits, np.uint32)
    return bits if dtype == "fp32" else np.asarray(convert_rne_bits(bits, cfg.fmt(dtype)),
                                                   np.uint32)


def _f32(x):
    """FP32 bits of an exactly representable float."""
    return int(np.float32(x).view(np.uint32))


def _chain(cfg, S, fs, X, fx):
    """``S.T @ X`` as the tiled GEMM runs it: per K tile of ``pe_rows`` the golden matmul,
    the tiles added into PSUM (``psum_update`` accumulate), in K order."""
    acc = None
    for k0 in range(0, S.shape[0], cfg.pe_rows):
        r = gt.matmul(S[k0:k0 + cfg.pe_rows], fs, X[k0:k0 + cfg.pe_rows], fx, cfg)
        acc = r if acc is None else gt.psum_update(acc, r, True)
    return acc


def gemm_reference(cfg, AT, B, dtype="bf16"):
    """``C = AT.T @ B`` as :func:`golden.kernel.gemm_kernel` computes it: per output tile
    (``pe_cols`` x ``psum_bank_fp32``) the K-tiled chain of :func:`_chain`."""
    K, M = AT.shape
    N = B.shape[1]
    C = np.zeros((M, N), dtype=np.uint32)
    for m0 in range(0, M, cfg.pe_cols):
        for n0 in range(0, N, cfg.psum_bank_fp32):
            C[m0:m0 + cfg.pe_cols, n0:n0 + cfg.psum_bank_fp32] = _chain(
                cfg, AT[:, m0:m0 + cfg.pe_cols], dtype, B[:, n0:n0 + cfg.psum_bank_fp32], dtype)
    return C


def _ring(k, keep=2):
    """Free SBUF tiles two uses later (double buffering through the first-fit allocator)."""
    pending = []

    def done(*tiles):
        pending.append(tiles)
        while len(pending) > keep:
            for t in pending.pop(0):
                k.free(t)
    return done


# --- MLP layer ---------------------------------------------------------------------------------

def mlp(cfg, XT, W, b, *, out_dtype="bf16", func="gelu", dram_bytes=1 << 20):
    """``YT = gelu(W.T @ XT + b)``: an MLP layer ``Y = gelu(X @ W + b)`` kept transposed (the
    features on the partitions, so the bias is a per-partition operand of the activation).

    ``XT [D, T]`` and ``W [D, F]`` bf16 codes, ``b [F]`` fp32 codes. Tiles: K = ``pe_rows``
    rows of D, M = ``pe_cols`` features, N = ``psum_bank_fp32`` tokens; the K tiles accumulate in
    PSUM, then one ``activation`` per output tile reads the PSUM bank, adds the bias (AP) and
    applies ``func``, writing ``out_dtype`` to SBUF, and a DMA stores it to ``YT [F, T]``.
    The function table is loaded once, first. Loads go round-robin over the DMA queues; each
    SBUF tile is freed two uses later, so the next tile's loads overlap this tile's matmuls."""
    check_config(cfg, "mlp")
    XT, W, b = (np.asarray(a, np.uint32) for a in (XT, W, b))
    D, T = XT.shape
    if W.shape[0] != D or b.shape != (W.shape[1],):
        raise ValueError(f"mlp XT [D, T], W [D, F], b [F] must agree, not {XT.shape}, "
                         f"{W.shape}, {b.shape}")
    F = W.shape[1]
    k = Kernel(cfg, dram_bytes=dram_bytes)
    xt = k.dram_tensor("XT", dtype="bf16", data=XT)
    w = k.dram_tensor("W", dtype="bf16", data=W)
    bt = k.dram_tensor("b", dtype="fp32", data=b.reshape(F, 1))
    yt = k.dram_tensor("YT", (F, T), out_dtype)
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    kts, fts, tts = range(0, D, TK), range(0, F, TM), range(0, T, TN)
    nb = cfg.psum_banks
    # F tiles per chain group: every bank when they all fit (X read once per token tile; the
    # next token tile's first matmuls wait only for the first activation), else half of them
    # (PSUM double-buffered: the scalar engine drains one half while the PE fills the other)
    chunk = len(fts) if len(fts) <= nb else max(1, nb // 2)
    es_out = ELEM_BYTES[out_dtype]
    # SBUF: W resident (one tile [TK, F] per K tile, one descriptor each), the biases, a ring
    # of X tiles and of output tiles; the function's table first only when it would not fit
    # beside them (its temporary tile's space is then reused: later tiles wait for the load)
    w_res = k._word(F * 2) * len(kts)
    rings = 4 * k._word(TN * 2) + 4 * k._word(TN * es_out) + len(fts) * k._word(4)
    table = k._word(table_words(ga.table(func), cfg.partitions).shape[1] * 4)
    resident = w_res + rings + table <= cfg.sbuf_bytes_per_partition
    if not resident and rings + table > cfg.sbuf_bytes_per_partition:
        k.load_table(func)
    wts = [k.sbuf_tile(min(TK, D - k0), F, "bf16", f"w{k0}") for k0 in kts] if resident else None
    biases = [k.sbuf_tile(min(TM, F - f0), 1, "fp32", f"bias{f0}") for f0 in fts]
    xr = [k.sbuf_tile(TK, TN, "bf16", f"x{i}") for i in range(4)]
    yr = [k.sbuf_tile(TM, TN, out_dtype, f"y{i}") for i in range(4)]
    steps = {"y": 0, "w": 0}
    wring = None if resident else [k.sbuf_tile(TK, chunk * TM, "bf16", f"wr{i}")
                                   for i in range(2)]
    loaded = set()
    # queues: the X stream on the first DMA engine's queues, everything else on the others
    # (with one DMA engine: its queues split in two), so a table, W or store descriptor never
    # waits behind a whole X tile on its engine
    q = split_queues(cfg)

    # the stores of a group's outputs are emitted one per K step of the next group (after its
    # loads), so the sync engine's in-order stream is not held up waiting for an activation
    pending = []                   # (output tile uid, emit its store)

    def flush(n=1):
        for _ in range(min(n, len(pending))):
            pending.pop(0)[1]()

    exp = np.zeros((F, T), np.uint32)

    def evacuate(f0, t0, tn, ps):
        fn = min(TM, F - f0)
        out = _sub(yr[steps["y"] % len(yr)], fn, tn)
        steps["y"] += 1
        while any(u == out.uid for u, _ in pending):
            flush()                         # its last store first (program order)
        k.activation(out, ps, func, scale=1.0, bias_tile=biases[f0 // TM])
        qq = q("rest")
        pending.append((out.uid, lambda: k.store(yt, out, f0, t0, queue=qq)))
        acc = _chain(cfg, W[:, f0:f0 + fn], "bf16", XT[:, t0:t0 + tn], "bf16")
        y = ga.activation(acc, func, np.uint32(ONE), b[f0:f0 + fn, None])
        exp[f0:f0 + fn, t0:t0 + tn] = _encode(cfg, y, out_dtype)

    def preload():                  # after the first operands: the other W tiles (on one
        wq = q("rest")              # queue, so they arrive in K order), the biases and the
        for j, kj in enumerate(kts):    # function's table
            if resident and j not in loaded:
                k.load(wts[j], w, kj, 0, queue=wq)
                loaded.add(j)
        bq = q("rest")
        for f0, bias in zip(fts, biases):
            k.load(bias, bt, f0, 0, queue=bq)
        k.load_table(func, queue=bq)

    # every (token tile, group, K step) in order; the next group's first X tile is loaded
    # during the last K step (before this group's activations and the stores they release,
    # which the sync engine would otherwise wait for before it reaches the load)
    order = [(t0, c0, kk) for t0 in tts for c0 in range(0, len(fts), chunk)
             for kk in range(len(kts))]
    xs = {}

    def xload(i):
        if i < len(order) and i not in xs:
            t0, _c0, kk = order[i]
            xs[i] = _sub(xr[i % len(xr)], min(TK, D - kts[kk]), min(TN, T - t0))
            k.load(xs[i], xt, kts[kk], t0, queue=q("first"))

    first, gi = True, 0
    for t0 in tts:
        tn = min(TN, T - t0)
        for c0 in range(0, len(fts), chunk):
            fc = list(fts)[c0:c0 + chunk]
            ps = {f0: k.psum_tile(min(TM, F - f0), tn) for f0 in fc}
            for kk, k0 in enumerate(kts):
                kn = min(TK, D - k0)
                if resident:
                    if kk not in loaded:            # each W tile once, before its first use
                        k.load(wts[kk], w, k0, 0, queue=q("rest"))
                        loaded.add(kk)
                    wk = wts[kk]
                else:
                    wk = _sub(wring[steps["w"] % 2], kn, len(fc) * TM)
                    steps["w"] += 1
                    fw = min(F - fc[0], len(fc) * TM)
                    wk = _sub(wk, kn, fw)
                    k.load(wk, w, k0, fc[0], queue=q("rest"))
                xload(gi)
                if first:
                    preload()
                    first = False
                if kk == len(kts) - 1:
                    xload(gi + 1)
                xtile = xs.pop(gi)
                gi += 1
                if kk:
                    flush()
                for f0 in fc:
                    fn = min(TM, F - f0)
                    ws = wk.view(f0 - (0 if resident else fc[0]), fn)
                    k.matmul(ps[f0], ws, xtile, accumulate=kk > 0)
            for f0 in fc:
                evacuate(f0, t0, tn, ps[f0])
    flush(len(pending))
    k.output("YT", yt)
    # float64 reference and bound: the K-chain's rounding (<= (D + 1) 2^-24 sum|w x|, through
    # the function's slope <= 1.13 for GELU), the table (4 FP32 ulps), the output rounding
    x64, w64 = decode_f64(cfg, XT, "bf16"), decode_f64(cfg, W, "bf16")
    z = w64.T @ x64 + b.view(np.float32).astype(np.float64)[:, None]
    ref = ga.reference(func, z)
    out_rel = 2.0 ** -cfg.fmt(out_dtype).man_bits if out_dtype != "fp32" else 2.0 ** -23
    tol = (1.2 * (D + 2) * 2.0 ** -24 * (np.abs(w64).T @ np.abs(x64)
                                         + np.abs(b.view(np.float32))[:, None])
           + (out_rel + 2.0 ** -21) * np.abs(ref) + 1e-37)
    return KernelCase("mlp", cfg, k.build(), {"YT": exp}, {"YT": ref}, {"YT": tol},
                      {"YT": out_dtype}, flops=2 * D * F * T)


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
    k.load(tq, k.dram_tensor("QT", dtype="bf16", data=QT))
    k.load(tk, k.dram_tensor("KT", dtype="bf16", data=KT))
    k.load(tv, k.dram_tensor("V", dtype="bf16", data=V))
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
    nm = gv.alu(gv.ALU_MUL, mx, np.uint32(_f32(-s)), 0)
    E = ga.activation(S, "exp", np.uint32(_f32(s)), nm[:, None])
    sm = gv.reduce_lanes(gv.ALU_ADD, E.T, ways)
    rs = ga.activation(sm, "reciprocal", np.uint32(ONE), np.uint32(0))
    Pm = gv.alu(gv.ALU_MUL, E, rs[:, None], 0)
    PT = _encode(cfg, np.ascontiguousarray(Pm.T), "bf16")              # [Lk, Lq]
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
    k.load(x, k.dram_tensor("X", dtype="fp32", data=X))
    tiles = {}
    for nm, v in (("gamma", gamma), ("beta", beta)):
        t = k.dram_tensor(nm, dtype="fp32", data=v.reshape(1, D))
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
    invb = np.uint32(_f32(inv))
    mean = gv.alu(gv.ALU_MUL, s1, invb, 0)
    ex2 = gv.alu(gv.ALU_MUL, s2, invb, 0)
    var = gv.alu(gv.ALU_SUB, ex2, gv.alu(gv.ALU_MUL, mean, mean, 0), 0)
    rstd = ga.activation(var, "rsqrt", np.uint32(ONE), np.uint32(_f32(eps)))
    xn_ = gv.alu(gv.ALU_MUL, gv.alu(gv.ALU_SUB, xb, mean[:, None], 0), rstd[:, None], 0)
    yb = gv.alu(gv.ALU_ADD, gv.alu(gv.ALU_MUL, xn_, gamma[None, :], 0), beta[None, :], 0)
    exp = _encode(cfg, yb, out_dtype)
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


# --- 4:16 sparse MLP ----------------------------------------------------------------------------

def _compress_tiles(cfg, scfg, W, pattern):
    """``(values, tags)`` [D n/m, F] of the bf16 weights ``W`` [D, F] pruned N:M by
    ``golden.sparse.compress`` per tile: ``pe_cols`` columns by the logical rows of one K tile
    (``pe_rows * m / n``, whole groups of m), the tile limit of ``compress`` (``scfg``: the
    config it is given)."""
    from golden import sparse as gs
    n, m = gs.pattern_params(pattern, scfg)
    D, F = W.shape
    TM = cfg.pe_cols
    kl = (cfg.pe_rows * m // n) // m * m
    Vc = np.zeros((D * n // m, F), np.uint32)
    Tg = np.zeros((D * n // m, F), np.uint32)
    for f0 in range(0, F, TM):
        for d0 in range(0, D, kl):
            dn = min(kl, D - d0)
            v_, t_ = gs.compress(W[d0:d0 + dn, f0:f0 + TM], "bf16", pattern, scfg)
            Vc[d0 * n // m:(d0 + dn) * n // m, f0:f0 + TM] = v_
            Tg[d0 * n // m:(d0 + dn) * n // m, f0:f0 + TM] = t_
    return Vc, Tg


def sparse_mlp(cfg, XT, W, b, *, pattern="4:16", func="gelu", out_dtype="bf16",
               dram_bytes=1 << 20, hw=None):
    """:func:`mlp` with ``W [D, F]`` pruned N:M along D (``golden.sparse.compress``, by
    magnitude) and kept **compressed** in DRAM. ``D`` must be a multiple of ``m``.

    ``hw`` (default: when ``cfg.sparsity`` has ``pattern``): the tensor engine's sparse mode
    (:meth:`Kernel.sparse_matmul`). The weights stay compressed in SBUF as (value, tag) pairs
    (bf16 values, ``golden.kernel.sparse_pairs``), the moving operand is ``X`` in the widest
    format whose ``m/n`` elements share a 32-bit lane (``fp8_e4m3`` for 4:16: the host
    rounds ``XT`` to it, RNE, and packs the lanes, ``golden.sparse.moving_lanes``); DRAM
    weight traffic is ``2 n/m`` of the dense layer's, the PE work ``n/m`` of it.

    Otherwise (``hw=False``): only the kept values ``V [D n/m, F]`` (bf16) are in DRAM and the
    kernel decompresses on chip: each weight tile is cleared (``memset``) and every kept value
    is scattered into its row by a one-element DMA descriptor, the position tags compiled into
    the descriptors' addresses; then the dense tiled GEMM, bias and ``func`` of :func:`mlp`.
    The DRAM weight traffic is ``n/m`` of the dense layer's, the PE work the dense one."""
    from golden import sparse as gs
    check_config(cfg, "sparse_mlp")
    if hw is None:
        hw = pattern in cfg.sparsity
    if hw:
        return _sparse_mlp_hw(cfg, XT, W, b, pattern, func, out_dtype, dram_bytes)
    XT, W, b = (np.asarray(a, np.uint32) for a in (XT, W, b))
    D, T = XT.shape
    F = W.shape[1]
    # the host compresses (golden.sparse); the core only moves the compressed values, so the
    # pattern need not be one the tensor engine enables
    scfg = cfg if pattern in cfg.sparsity else cfg.replace(
        formats=tuple(dict.fromkeys((*cfg.formats, "fp8_e4m3"))), sparse_patterns=(pattern,))
    n, m = gs.pattern_params(pattern, scfg)
    if W.shape[0] != D or b.shape != (F,) or D % m:
        raise ValueError(f"sparse_mlp XT [D, T], W [D, F], b [F] must agree with D a multiple "
                         f"of m = {m}, not {XT.shape}, {W.shape}, {b.shape}")
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    Vc, Tg = _compress_tiles(cfg, scfg, W, pattern)
    kl = (cfg.pe_rows * m // n) // m * m          # logical rows per K tile
    Wd = np.zeros_like(W)
    for kp in range(Vc.shape[0]):
        g = kp // n
        for j in range(F):
            Wd[g * m + Tg[kp, j], j] = Vc[kp, j]
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table(func)
    xt = k.dram_tensor("XT", dtype="bf16", data=XT)
    vt = k.dram_tensor("V", dtype="bf16", data=Vc)
    bt = k.dram_tensor("b", dtype="fp32", data=b.reshape(F, 1))
    yt = k.dram_tensor("YT", (F, T), out_dtype)
    release = _ring(k, 3)
    exp = np.zeros((F, T), np.uint32)
    descs = 0
    for f0 in range(0, F, TM):
        fn = min(TM, F - f0)
        bias = k.sbuf_tile(fn, 1, "fp32", f"bias{f0}")
        k.load(bias, bt, f0, 0)
        wts = []
        for k0 in range(0, D, TK):                  # decompress the weight tiles of this block
            wt = k.sbuf_tile(min(TK, D - k0), fn, "bf16", f"w{k0}_{f0}")
            descs += k.sparse_load(wt, vt, Tg, pattern, row0=k0, col0=f0)
            wts.append(wt)
        for t0 in range(0, T, TN):
            tn = min(TN, T - t0)
            ps = k.psum_tile(fn, tn)
            for kk, k0 in enumerate(range(0, D, TK)):
                kn = min(TK, D - k0)
                xtile = k.sbuf_tile(kn, tn, "bf16", f"x{k0}_{t0}")
                k.load(xtile, xt, k0, t0)
                k.matmul(ps, wts[kk], xtile, accumulate=kk > 0)
                release(xtile)
            out = k.sbuf_tile(fn, tn, out_dtype, f"y{f0}_{t0}")
            k.activation(out, ps, func, scale=1.0, bias_tile=bias)
            k.store(yt, out, f0, t0)
            release(out)
            acc = _chain(cfg, Wd[:, f0:f0 + fn], "bf16", XT[:, t0:t0 + tn], "bf16")
            y = ga.activation(acc, func, np.uint32(ONE), b[f0:f0 + fn, None])
            exp[f0:f0 + fn, t0:t0 + tn] = _encode(cfg, y, out_dtype)
        for wt in wts:
            k.free(wt)
        release(bias)
    k.output("YT", yt)
    # the expected decompression came from the tags by hand above; golden.sparse agrees
    for f0 in range(0, F, TM):
        for d0 in range(0, D, kl):
            dn = min(kl, D - d0)
            sl = (slice(d0 * n // m, (d0 + dn) * n // m), slice(f0, f0 + TM))
            assert np.array_equal(gs.decompress(Vc[sl], Tg[sl], "bf16", pattern, scfg),
                                  Wd[d0:d0 + dn, f0:f0 + TM])
    x64, w64 = decode_f64(cfg, XT, "bf16"), decode_f64(cfg, Wd, "bf16")
    z = w64.T @ x64 + b.view(np.float32).astype(np.float64)[:, None]
    ref = ga.reference(func, z)
    out_rel = 2.0 ** -cfg.fmt(out_dtype).man_bits if out_dtype != "fp32" else 2.0 ** -23
    tol = (1.2 * (D + 2) * 2.0 ** -24 * (np.abs(w64).T @ np.abs(x64)
                                         + np.abs(b.view(np.float32))[:, None])
           + (out_rel + 2.0 ** -21) * np.abs(ref) + 1e-37)
    return KernelCase("sparse_mlp", cfg, k.build(), {"YT": exp}, {"YT": ref}, {"YT": tol},
                      {"YT": out_dtype}, flops=2 * D * F * T * n // m,
                      info={"descriptors": descs, "values": Vc, "tags": Tg})


def _bf16(rng, shape, scale=1.0):
    import ml_dtypes
    x = (rng.standard_normal(shape) * scale).astype(np.float32).astype(ml_dtypes.bfloat16)
    return x.view(np.uint16).astype(np.uint32)


def _fp32(rng, shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32).view(np.uint32)


def _sparse_mlp_hw(cfg, XT, W, b, pattern, func, out_dtype, dram_bytes):
    """:func:`sparse_mlp` on the tensor engine's sparse mode (``hw=True``)."""
    from golden import sparse as gs
    from golden.kernel import sparse_pairs
    XT, W, b = (np.asarray(a, np.uint32) for a in (XT, W, b))
    D, T = XT.shape
    F = W.shape[1]
    n, m = gs.pattern_params(pattern, cfg)
    if W.shape[0] != D or b.shape != (F,) or D % m:
        raise ValueError(f"sparse_mlp XT [D, T], W [D, F], b [F] must agree with D a multiple "
                         f"of m = {m}, not {XT.shape}, {W.shape}, {b.shape}")
    fits = gs.sparse_formats(cfg, pattern)
    xf = next((f for f in ("bf16", "fp8_e4m3") if f in fits), None)
    if xf is None or "bf16" not in cfg.formats:
        raise ValueError(f"sparse_mlp hw needs bf16 and a moving format of {pattern} "
                         f"(bf16 or fp8_e4m3) in cfg.formats {cfg.formats}")
    TM, TN = cfg.pe_cols, cfg.psum_bank_fp32
    kl = (cfg.pe_rows * m // n) // m * m          # logical rows per K tile
    # the host: compress W per tile (golden.sparse), round X to the moving format, pack lanes
    Vc, Tg = _compress_tiles(cfg, cfg, W, pattern)
    Xq = XT if xf == "bf16" else np.asarray(convert_rne_bits(XT << np.uint32(16),
                                                             cfg.fmt(xf)), np.uint32)
    lanes = gs.moving_lanes(Xq, xf, pattern, cfg)                   # [D n/m, T]
    k = Kernel(cfg, dram_bytes=dram_bytes)
    k.load_table(func)
    xt = k.dram_tensor("XL", dtype="fp32", data=lanes)
    vt = k.dram_tensor("VT", dtype="fp32", data=sparse_pairs(Vc, Tg, "bf16", cfg))
    bt = k.dram_tensor("b", dtype="fp32", data=b.reshape(F, 1))
    yt = k.dram_tensor("YT", (F, T), out_dtype)
    release = _ring(k, 3)
    exp = np.zeros((F, T), np.uint32)
    ktiles = list(range(0, D, kl))
    for f0 in range(0, F, TM):
        fn = min(TM, F - f0)
        bias = k.sbuf_tile(fn, 1, "fp32", f"bias{f0}")
        k.load(bias, bt, f0, 0)
        wts = []
        for d0 in ktiles:                         # compressed weight tiles: pairs, by DMA
            rows = min(kl, D - d0) * n // m
            wt = k.sbuf_tile(rows, fn, "fp32", f"w{d0}_{f0}")
            k.load(wt, vt, d0 * n // m, f0)
            wts.append(wt)
        for t0 in range(0, T, TN):
            tn = min(TN, T - t0)
            ps = k.psum_tile(fn, tn)
            acc = None
            for kk, d0 in enumerate(ktiles):
                rows = wts[kk].parts
                xtile = k.sbuf_tile(rows, tn, "fp32", f"x{d0}_{t0}")
                k.load(xtile, xt, d0 * n // m, t0)
                k.sparse_matmul(ps, wts[kk], xtile, pattern, "bf16", xf, accumulate=kk > 0)
                release(xtile)
                # expected: the golden.sparse chain of this K tile, accumulated as PSUM does
                p0 = d0 * n // m
                r = gs.matmul_sparse(Vc[p0:p0 + rows, f0:f0 + fn], Tg[p0:p0 + rows, f0:f0 + fn],
                                     "bf16", pattern, Xq[d0:d0 + rows * m // n, t0:t0 + tn],
                                     xf, cfg)
                acc = r if acc is None else gt.psum_update(acc, r, True)
            out = k.sbuf_tile(fn, tn, out_dtype, f"y{f0}_{t0}")
            k.activation(out, ps, func, scale=1.0, bias_tile=bias)
            k.store(yt, out, f0, t0)
            release(out)
            y = ga.activation(acc, func, np.uint32(ONE), b[f0:f0 + fn, None])
            exp[f0:f0 + fn, t0:t0 + tn] = _encode(cfg, y, out_dtype)
        for wt in wts:
            k.free(wt)
        release(bias)
    k.output("YT", yt)
    Wd = np.zeros_like(W)
    for p in range(Vc.shape[0]):
        Wd[(p // n) * m + Tg[p], np.arange(F)] = Vc[p]
    x64, w64 = decode_f64(cfg, Xq, xf), decode_f64(cfg, Wd, "bf16")
    z = w64.T @ x64 + b.view(np.float32).astype(np.float64)[:, None]
    ref = ga.reference(func, z)
    out_rel = 2.0 ** -cfg.fmt(out_dtype).man_bits if out_dtype != "fp32" else 2.0 ** -23
    tol = (1.2 * (D + 2) * 2.0 ** -24 * (np.abs(w64).T @ np.abs(x64)
                                         + np.abs(b.view(np.float32))[:, None])
           + (out_rel + 2.0 ** -21) * np.abs(ref) + 1e-37)
    return KernelCase("sparse_mlp", cfg, k.build(), {"YT": exp}, {"YT": ref}, {"YT": tol},
                      {"YT": out_dtype}, flops=2 * D * F * T * n // m,
                      info={"descriptors": 0, "values": Vc, "tags": Tg, "hw": True,
                            "moving_format": xf})


def random_inputs(cfg, name, seed=0, **sizes):
    """Inputs of kernel ``name`` (a key of :data:`KERNELS`) for ``cfg``: random normal values;
    sizes default to what fits the small preset (or ``sizes``)."""
    rng = np.random.default_rng(seed)
    P, R, C, N = cfg.partitions, cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    if name == "mlp":
        D, F, T = sizes.get("D", 2 * R), sizes.get("F", 2 * C), sizes.get("T", N + N // 2)
        return (_bf16(rng, (D, T)), _bf16(rng, (D, F), 1 / math.sqrt(D)), _fp32(rng, (F,), 0.1))
    if name == "sparse_mlp":
        D, F, T = sizes.get("D", 32), sizes.get("F", 2 * C), sizes.get("T", N)
        return (_bf16(rng, (D, T)), _bf16(rng, (D, F), 1 / math.sqrt(D)), _fp32(rng, (F,), 0.1))
    if name == "attention_head":
        d, Lq = sizes.get("d", R), sizes.get("Lq", min(R, C))
        Lk, dv = sizes.get("Lk", min(R, C)), sizes.get("dv", C)
        return (_bf16(rng, (d, Lq)), _bf16(rng, (d, Lk)), _bf16(rng, (Lk, dv)))
    if name == "layer_norm":
        T, D = sizes.get("T", P), sizes.get("D", 48)
        return (_fp32(rng, (T, D), 2.0, 0.5), _fp32(rng, (D,), 0.5, 1.0), _fp32(rng, (D,), 0.3))
    raise ValueError(f"kernel name must be one of {sorted(KERNELS)}, not {name!r}")


#: The ``make sim`` kernels by name.
KERNELS = {"mlp": mlp, "attention_head": attention_head, "layer_norm": layer_norm,
           "sparse_mlp": sparse_mlp}


def run_golden(case, *, png=None, policy="timed"):
    """Run ``case`` on the golden ISA simulator: ``{"error", "cycles", "busy", "pe_utilization",
    "check", "instructions", "sim"}`` (``check``: :meth:`KernelCase.check`, ``None`` after an
    error); ``png``: a path for the engine-activity timeline (``golden.timeline``)."""
    from golden.isasim import IsaSim
    sim = IsaSim(case.cfg, dram_bytes=case.kp.dram)
    err = sim.run(case.kp.programs, policy=policy)
    st = sim.stats()
    if png is not None:
        from golden.timeline import write_png
        write_png(sim.timeline, png, title=f"{case.name} ({case.cfg.name}), golden estimate")
    return {"error": err, "cycles": st["cycles"], "busy": st["busy"],
            "pe_utilization": st["pe_utilization"],
            "check": None if err else case.check(case.kp.read_outputs(sim)),
            "instructions": case.kp.instructions(), "sim": sim}


def _main(argv=None):
    import argparse
    from rtl.config import get_preset
    ap = argparse.ArgumentParser(prog="python -m golden.kernels",
                                 description="Run the make-sim kernels on the golden ISA "
                                             "simulator: cycles, busy fractions, bit check, "
                                             "timeline PNGs.")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--only", nargs="*", default=sorted(KERNELS), choices=sorted(KERNELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png-dir", default="build/sim/golden")
    a = ap.parse_args(argv)
    cfg = get_preset(a.preset)
    bad = 0
    for name in a.only:
        case = KERNELS[name](cfg, *random_inputs(cfg, name, a.seed))
        r = run_golden(case, png=f"{a.png_dir}/{name}_{cfg.name}.png")
        busy = " ".join(f"{k} {v:.2f}" for k, v in r["busy"].items())
        print(f"{name:15s} {r['cycles']:8d} cycles  {r['error'] or r['check']}  busy: {busy}")
        bad += bool(r["error"]) or any(b or q > 1 for b, q in r["check"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(_main())
