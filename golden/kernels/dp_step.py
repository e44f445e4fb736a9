# SPDX-License-Identifier: Apache-2.0
"""A data-parallel training step on ``ranks`` cores (default 4): the backward pass's weight
gradients of two linear layers, all-reduced over the ring while the next layer's gradient is
computed, then the SGD update (docs/collectives.md §17).

Every rank ``r`` holds the same weights ``W1 [D0, D1]``, ``W2 [D1, D2]`` (FP32) and its own
batch shard: the layer inputs ``X1_r [B, D0]``, ``X2_r [B, D1]`` and the output gradients
``dY1_r [B, D1]``, ``dY2_r [B, D2]`` (BF16). Per rank, in program order:

1. ``G2_r = X2_r^T dY2_r`` on the tensor engine (K = B tiled by ``pe_rows``, accumulated in
   PSUM, FP32), copied to SBUF (vector engine);
2. ``all_reduce(S2, G2_r, "add")`` on the CC queue; meanwhile
3. ``G1_r = X1_r^T dY1_r`` (tensor engine, vector copy) and ``all_reduce(S1, G1_r)``;
4. the update ``W_l' = W_l + (-lr / ranks) * S_l`` (``tensor_scalar`` multiply, then
   ``tensor_tensor`` add; FP32) and the store of ``W1'``, ``W2'`` to DRAM.

The kernel API inserts every semaphore from the data: the all-reduce waits for the copy of its
gradient, the update waits for the all-reduce, and nothing orders the second gradient's
matmul after the first all-reduce, so it overlaps it.

The expected outputs are composed without any simulator: the K-tiled golden matmul
(:func:`golden.kernels.common.tiled_chain`), the ring all-reduce of
:func:`golden.collective.algos.all_reduce` and the vector ALU (:func:`golden.vector.alu`).
Float64 bound: ``u ((steps + n + 3) (lr / n) sum_r |X_r|^T |dY_r| + |W|) + 2**-149`` with
``u = 2**-24`` and ``steps = B + B / pe_rows + 1`` (the GEMM's roundings, the ``n - 1`` of the
ring sum, the multiply and the add).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from golden.collective import algos
from golden.kernel.multi import MultiKernel, run_multi
from golden.kernels.common import decode_f64, f32_bits, random_bf16, random_fp32, tiled_chain
from golden.vector import ALU_ADD, ALU_MUL, alu
from rtl.config import check_config

__all__ = ["MultiKernelCase", "dp_step", "dp_step_inputs", "dp_step_case", "dp_step_sizes",
           "dp_step_kernel", "run_golden_multi", "LR"]

#: The step's learning rate (``LR / ranks`` is exact in FP32 for a power-of-two ``ranks``).
LR = 0.5


@dataclass
class MultiKernelCase:
    """A multi-core kernel ready to run: ``kps`` (one built program per rank), ``expected``
    (per rank: output name -> element codes, composed independently), ``reference`` and
    ``tolerance`` (output name -> float64 values and bound, the same on every rank),
    ``dtypes`` (output name -> format), ``flops`` (of every rank together)."""
    name: str
    cfg: object
    ranks: int
    kps: list
    expected: list
    reference: dict
    tolerance: dict
    dtypes: dict
    flops: int = 0
    info: dict = field(default_factory=dict)

    def check(self, outputs):
        """``{(rank, name): (bit mismatches, worst |out - ref| / tolerance)}`` for every rank's
        outputs (``outputs[r]``: name -> codes, as :func:`run_multi` reads them)."""
        out = {}
        for r in range(self.ranks):
            for name, want in self.expected[r].items():
                got = np.asarray(outputs[r][name], np.uint32)
                bad = int(np.count_nonzero(got != want))
                v = decode_f64(self.cfg, got, self.dtypes[name])
                with np.errstate(invalid="ignore", divide="ignore"):
                    q = np.abs(v - self.reference[name]) / self.tolerance[name]
                out[(r, name)] = (bad, float(np.nanmax(np.where(np.isnan(v), np.inf, q))))
        return out


def dp_step_sizes(cfg, **sizes):
    """``{B, D0, D1, D2}``: batch shard ``2 pe_rows``, ``D0 = D1 = pe_cols`` (one PSUM tile of
    partitions), ``D2`` a quarter of a PSUM bank (at least 8), or ``sizes``."""
    out = {"B": 2 * cfg.pe_rows, "D0": cfg.pe_cols, "D1": cfg.pe_cols,
           "D2": max(8, cfg.psum_bank_fp32 // 4)}
    out.update(sizes)
    for k, lim in (("B", None), ("D0", cfg.pe_cols), ("D1", cfg.pe_cols),
                   ("D2", cfg.psum_bank_fp32)):
        v = out[k]
        hi = lim if lim is not None else 1 << 16
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"dp_step {k} must be in [1, {hi}], not {v!r}")
    if out["D1"] > cfg.psum_bank_fp32:
        raise ValueError(f"dp_step D1 must be in [1, {cfg.psum_bank_fp32}], not {out['D1']}")
    return out


def dp_step_inputs(cfg, seed=0, ranks=4, **sizes):
    """Random inputs: ``(shards, W1, W2)``, ``shards[r] = (X1, dY1, X2, dY2)`` BF16 codes,
    ``W1``, ``W2`` FP32 bits."""
    s = dp_step_sizes(cfg, **sizes)
    rng = np.random.default_rng(seed)
    B, D0, D1, D2 = s["B"], s["D0"], s["D1"], s["D2"]
    shards = [(random_bf16(rng, (B, D0)), random_bf16(rng, (B, D1), 1 / math.sqrt(B)),
               random_bf16(rng, (B, D1)), random_bf16(rng, (B, D2), 1 / math.sqrt(B)))
              for _ in range(ranks)]
    return shards, random_fp32(rng, (D0, D1), 0.1), random_fp32(rng, (D1, D2), 0.1)


def dp_step(cfg, shards, W1, W2, *, lr=LR, dram_bytes=1 << 18):
    """The :class:`MultiKernel` of the step (see the module docstring) for ``len(shards)``
    ranks; outputs ``"W1"``, ``"W2"`` (the updated weights, FP32 DRAM tensors) on every rank."""
    check_config(cfg, "dp_step")
    n = len(shards)
    if n < 1:
        raise ValueError("dp_step shards must hold one shard per rank (>= 1)")
    scale = -lr / n
    if f32_bits(scale) != np.float32(scale).view(np.uint32) or np.float32(scale) != scale:
        raise ValueError(f"dp_step -lr / ranks must be exact in FP32, not {scale!r}")
    TK = cfg.pe_rows

    def layer(k, X, dY, W, tag, stream):
        B, din = X.shape
        dout = dY.shape[1]
        x = k.dram_tensor(f"X{tag}", dtype="bf16", codes=X)
        dy = k.dram_tensor(f"dY{tag}", dtype="bf16", codes=dY)
        w = k.dram_tensor(f"W{tag}", dtype="fp32", codes=W)
        ps = k.psum_tile(din, dout, name=f"ps{tag}")
        for i, k0 in enumerate(range(0, B, TK)):
            kk = min(TK, B - k0)
            xt = k.sbuf_tile(kk, din, "bf16", f"x{tag}_{i}")
            dyt = k.sbuf_tile(kk, dout, "bf16", f"dy{tag}_{i}")
            k.load(xt, x, k0, 0)
            k.load(dyt, dy, k0, 0)
            k.matmul(ps, xt, dyt, accumulate=i > 0)
        g = k.sbuf_tile(din, dout, "fp32", f"g{tag}")
        k.copy(g, ps)
        s = k.sbuf_tile(din, dout, "fp32", f"s{tag}")
        k.all_reduce(s, g, "add", stream=stream)
        return s, w

    def update(k, s, w, tag):
        wt = k.sbuf_tile(s.parts, s.elems, "fp32", f"w{tag}")
        k.load(wt, w)
        t = k.sbuf_tile(wt.parts, wt.elems, "fp32", f"t{tag}")
        k.tensor_scalar(t, s, "multiply", scale)
        k.tensor_tensor(wt, wt, t, "add")
        k.store(w, wt)
        k.output(f"W{tag}", w)

    def body(k):
        X1, dY1, X2, dY2 = shards[k.rank]
        s2, w2 = layer(k, X2, dY2, W2, "2", 0)      # the last layer's gradient first
        s1, w1 = layer(k, X1, dY1, W1, "1", 0)      # overlaps the all-reduce of G2
        update(k, s2, w2, "2")
        update(k, s1, w1, "1")

    return MultiKernel.from_body(cfg, n, body, dram_bytes=dram_bytes)


def dp_step_kernel(cfg, ranks=4, seed=0):
    """The step as an unbuilt :class:`MultiKernel` of ``ranks`` ranks with random inputs
    (``golden/kernels/dp_step.py:dp_step_kernel``: the ``function(cfg)`` form of a kernel
    file, returning one kernel per rank)."""
    return dp_step(cfg, *dp_step_inputs(cfg, seed, ranks))


def _expected(cfg, shards, W1, W2, lr):
    """Every rank's expected ``{"W1", "W2"}`` codes: golden matmul chain, ring all-reduce,
    vector ALU; and the float64 reference and bound."""
    n = len(shards)
    scale = np.uint32(f32_bits(-lr / n))
    exp, ref, tol = [{} for _ in range(n)], {}, {}
    u = 2.0 ** -24
    for tag, xi, yi, W in (("1", 0, 1, W1), ("2", 2, 3, W2)):
        G = [tiled_chain(cfg, sh[xi], "bf16", sh[yi], "bf16") for sh in shards]
        shape = G[0].shape
        S = algos.all_reduce([g.reshape(-1) for g in G], "fp32").outputs
        for r in range(n):
            t = alu(ALU_MUL, S[r].reshape(shape), scale, 0)
            exp[r][f"W{tag}"] = alu(ALU_ADD, np.asarray(W, np.uint32), t, 0)
        x = [decode_f64(cfg, sh[xi], "bf16") for sh in shards]
        y = [decode_f64(cfg, sh[yi], "bf16") for sh in shards]
        w = decode_f64(cfg, W, "fp32")
        gsum = sum(a.T @ b for a, b in zip(x, y))
        gabs = sum(np.abs(a).T @ np.abs(b) for a, b in zip(x, y))
        B = shards[0][xi].shape[0]
        steps = B + -(-B // cfg.pe_rows) + 1
        ref[f"W{tag}"] = w - lr / n * gsum
        tol[f"W{tag}"] = u * ((steps + n + 3) * lr / n * gabs + np.abs(w)) + 2.0 ** -149
    return exp, ref, tol


def dp_step_case(cfg, seed=0, ranks=4, *, lr=LR, dram_bytes=1 << 18, **sizes):
    """The :class:`MultiKernelCase` of :func:`dp_step` with :func:`dp_step_inputs`."""
    shards, W1, W2 = dp_step_inputs(cfg, seed, ranks, **sizes)
    kps = dp_step(cfg, shards, W1, W2, lr=lr, dram_bytes=dram_bytes).build()
    exp, ref, tol = _expected(cfg, shards, W1, W2, lr)
    s = dp_step_sizes(cfg, **sizes)
    flops = 2 * ranks * s["B"] * (s["D0"] * s["D1"] + s["D1"] * s["D2"])
    return MultiKernelCase("dp_step", cfg, ranks, kps, exp, ref, tol,
                           {"W1": "fp32", "W2": "fp32"}, flops, {"sizes": s, "lr": lr})


def run_golden_multi(case, *, policies=None):
    """Run ``case`` on the multi-core golden simulator: ``{"errors", "cycles", "check",
    "collectives", "overlap", "run"}``. ``overlap``: of rank 0's tensor engine work after the
    first all-reduce starts (the next layer's gradient), the fraction that runs while that
    all-reduce is on the ring (``None`` when there is none)."""
    run = run_multi((case.cfg, case.kps), policies=policies)
    ok = not any(run.errors)
    overlap = None
    if ok and run.collectives:
        a, b = run.collectives[0]["start"], run.collectives[0]["done"]
        pe = [(e.start, e.done) for e in run.sim.cores[0].timeline if e.stream == "pe"]
        inside = sum(max(0, min(b, d) - max(a, s)) for s, d in pe)
        after = sum(max(0, d - max(a, s)) for s, d in pe)
        overlap = inside / after if after else None
    return {"errors": run.errors, "cycles": max(run.cycles), "check":
            case.check(run.outputs) if ok else None, "collectives": run.collectives,
            "overlap": overlap, "run": run}
