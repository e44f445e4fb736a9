# SPDX-License-Identifier: Apache-2.0
"""The tiled GEMM kernel from DRAM (:func:`gemm_kernel`) and its queue and tail-span helpers."""

from __future__ import annotations

import numpy as np

from golden.ap import ELEM_BYTES
from golden.kernel import Kernel, sub_tile

__all__ = ["gemm_kernel", "split_queues", "tail_spans"]


def gemm_kernel(cfg, AT, B, *, dtype="bf16", evacuate=False, dram_bytes=1 << 20):
    """``C = A @ B`` from ``AT [K, M]`` (A transposed) and ``B [K, N]`` (element codes of
    ``dtype``), tiled over K (``pe_rows``), M (``pe_cols``) and N (``psum_bank_fp32``), the K
    tiles accumulated in PSUM (FP32).

    Loop order: M chunks (as many M tiles as PSUM banks allow) > N tiles > K tiles > M tiles of
    the chunk. Each B tile ``[K tile, N tile]`` is loaded once per chunk, into one of two SBUF
    buffers (double buffering), and serves every M tile of the chunk. The ``AT`` tiles are
    loaded once when they all fit in SBUF (half of it), otherwise per use into two buffers.
    Loads go over the first DMA engine's queues, stores over the second's. With ``evacuate``,
    the last chunk's last N tile runs as two spans (3/4, then 1/4) so that little is left to
    store after the last matmul (:func:`tail_spans`).

    ``evacuate=False``: the result stays in PSUM, output ``"C"`` = ``{(m0, n0): Tile}``
    (needs ``ceil(M / pe_cols) * ceil(N / psum_bank_fp32) <= psum_banks``). ``True``: each
    PSUM tile is copied (``tensor_copy``, vector engine) to an FP32 SBUF tile and stored to the
    DRAM tensor ``"C"`` [M, N] fp32 (chunks of half the banks, so a chunk's matmuls overlap the
    previous chunk's copies).
    """
    k = Kernel(cfg, dram_bytes=dram_bytes)
    AT, B = np.asarray(AT), np.asarray(B)
    K, M = AT.shape
    K2, N = B.shape
    if K2 != K:
        raise ValueError(f"gemm_kernel AT [K, M] and B [K, N] must share K, not {K} and {K2}")
    at = k.dram_tensor("AT", dtype=dtype, codes=AT)
    b = k.dram_tensor("B", dtype=dtype, codes=B)
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    mts, nts, kts = list(range(0, M, TM)), list(range(0, N, TN)), list(range(0, K, TK))
    if not evacuate and len(mts) * len(nts) > cfg.psum_banks:
        raise ValueError(f"gemm_kernel without evacuate keeps C in PSUM: {len(mts) * len(nts)} "
                         f"output tiles > psum_banks = {cfg.psum_banks}")
    chunk = max(1, cfg.psum_banks // 2) if evacuate else len(mts)
    es = ELEM_BYTES[dtype]
    a_all = len(kts) * k._word(M * es) <= cfg.sbuf_bytes_per_partition // 2
    sb = [k.sbuf_tile(TK, TN, dtype, f"b{i}") for i in range(2)]
    # SBUF banks (one access per cycle each; the PE's reads win them): the B buffers in two
    # banks, the evacuation tiles away from them (the copies into them and the stores out of
    # them would wait on the PE's moving reads, and a slow store holds up the sync engine's
    # next B loads), A(k) in B(k)'s bank (the two DMA engines then share that bank while they
    # load both, but never the bank the PE streams). Each where there is room, else the default
    # placement. Default preset, K 256, M 128, N 1024 on the RTL: 169,154 cycles with the
    # round-robin placement; 163,210 with the A tiles in the other two banks (the evacuation
    # tiles then do not all fit there); 155,791 with this one (golden: 144,580).
    b_banks = [k.sbuf_bank(t) for t in sb]
    others = [b for b in range(cfg.sbuf_banks) if b not in b_banks]
    so = ([k.sbuf_tile(TM, TN, "fp32", f"o{i}", prefer=others) for i in range(4)] if evacuate
          else None)
    c = k.dram_tensor("C", (M, N), "fp32") if evacuate else None
    # AT resident: one tile [K tile, M] per K tile (one descriptor), loaded before its first use
    a_k = ([k.sbuf_tile(min(TK, K - k0), M, dtype, f"a{k0}", prefer=[b_banks[i % 2]] + others)
            for i, k0 in enumerate(kts)] if a_all else None)
    if not a_all:
        sa = [k.sbuf_tile(TK, TM, dtype, f"a{i}", prefer=[b_banks[i % 2]] + others)
              for i in range(2)]
    # a group's stores are emitted one per K step of the next group, after its loads, so the
    # sync engine's in-order stream does not stall the next B loads behind the evacuation
    pending = []                                        # (SBUF tile uid, emit its store)
    # queues: every load (A and B) on the first DMA engine, every store on the others. A(k)
    # and B(k) share a bank; on one engine they are written one descriptor after the other
    # instead of two engines contending for the bank (and for the shared R channel: an engine
    # that lost the bank holds up the other's read beats). Loads read DRAM, stores write it:
    # the two engines use AXI's two directions. One DMA engine: loads and stores on
    # alternate queues (:func:`split_queues`). Default preset, K 256, M 128, N 1024 on the RTL: 155,791 cycles with
    # round-robin queues, 148,483 with these (golden: 143,984; the RTL's first group had
    # lost ~520 cycles per K step to the two engines' writes into one bank).
    q = split_queues(cfg)

    def flush(n=1):
        for _ in range(min(n, len(pending))):
            pending.pop(0)[1]()

    tiles, bstep, astep, ostep, a_loaded = {}, 0, 0, 0, set()
    for c0 in range(0, len(mts), chunk):
        mc = mts[c0:c0 + chunk]
        spans = [(n0, min(TN, N - n0)) for n0 in nts]
        if evacuate and c0 + chunk >= len(mts):
            spans = spans[:-1] + tail_spans(cfg, *spans[-1], es,
                                             sum(min(TM, M - m0) for m0 in mc), len(kts))
        for n0, nn in spans:
            ps = {m0: k.psum_tile(min(TM, M - m0), nn) for m0 in mc}
            for kk, k0 in enumerate(kts):
                kn = min(TK, K - k0)
                if a_all and kk not in a_loaded:
                    k.load(a_k[kk], at, k0, 0, queue=q("first"))
                    a_loaded.add(kk)
                tb = sub_tile(sb[bstep % 2], kn, nn)
                bstep += 1
                k.load(tb, b, k0, n0, queue=q("first"))
                if kk:
                    flush()
                for m0 in mc:
                    if a_all:
                        ta = a_k[kk].view(m0, min(TM, M - m0))
                    else:
                        ta = sub_tile(sa[astep % 2], kn, min(TM, M - m0))
                        astep += 1
                        k.load(ta, at, k0, m0, queue=q("first"))
                    k.matmul(ps[m0], ta, tb, accumulate=kk > 0)
            for m0 in mc:
                if evacuate:
                    to = sub_tile(so[ostep % len(so)], ps[m0].parts, nn)
                    ostep += 1
                    while any(u == to.uid for u, _ in pending):
                        flush()                     # its last store first (program order)
                    k.copy(to, ps[m0])
                    qs_ = q("rest")
                    pending.append((to.uid, lambda t=to, m=m0, n=n0, qq=qs_:
                                    k.store(c, t, m, n, queue=qq)))
                else:
                    tiles[(m0, n0)] = ps[m0]
    flush(len(pending))
    k.output("C", c if evacuate else tiles)
    return k.build()


def split_queues(cfg):
    """A round-robin queue picker for kernels that keep two DMA streams apart:
    ``q("first")`` cycles over the first DMA engine's queues, ``q("rest")`` over every other
    engine's (one engine: its even queues and its odd ones; one queue in all: both 0). Returns
    global queue indices (``engine * dma_queues + queue``, as :meth:`Kernel.load` takes)."""
    nq, nd = cfg.dma_queues, cfg.dma_engines
    lists = dict(zip(("first", "rest"), ([0], [0]) if nq * nd == 1 else (
        (list(range(nq)), list(range(nq, nq * nd))) if nd > 1
        else (list(range(0, nq, 2)), list(range(1, nq, 2))))))
    taken = {"first": 0, "rest": 0}

    def q(side):
        lst = lists[side]
        taken[side] += 1
        return lst[(taken[side] - 1) % len(lst)]
    return q


def tail_spans(cfg, n0, nn, es, rows, k_steps):
    """The last N tile of the last chunk cut in two spans, three quarters then a quarter, so
    what is left to copy and store after the last matmul is a quarter tile's outputs; the
    earlier span's stores overlap the last span's matmuls (default preset, K 256, M 128,
    N 1024: golden 143,937 -> 139,165 cycles, RTL 148,483 -> 144,224; in golden, 7/8 + 1/8
    gives 141,210, 1/2 + 1/4 + 1/4 140,153). The cut is a whole number of SBUF words of both
    the operand and the FP32 output.

    Only when it pays: the store cycles it takes off the tail (3/4 of ``rows`` FP32 rows of
    ``nn``, over the AXI width) must be at least 4 x ``k_steps`` array latencies. The extra
    span's K steps each add descriptor and issue overheads and a refill of the array; on small
    (K 16, M 8, N 128), which is DMA-bound, a 48 + 16 cut took the RTL from 2,282 to 2,460
    cycles for 144 store cycles saved (when a posting matmul still drained the array; golden
    still estimates 2,159 -> 2,297 without the drain), so it is not cut there."""
    from golden.isasim import pe_latency
    step = cfg.sbuf_word_bytes // min(es, 4)
    q = nn // 4 // step * step
    saved = (nn - q) * rows * 4 // (cfg.axi_data_bits // 8)
    if not q or saved < 4 * k_steps * pe_latency(cfg):
        return [(n0, nn)]
    return [(n0, nn - q), (n0 + nn - q, q)]


