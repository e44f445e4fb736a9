# SPDX-License-Identifier: Apache-2.0
"""Stimulus and expected results of the multi-core top's tests: the collective programs every
core runs and their golden reference (:class:`golden.collective.multicore.MultiCoreSim`); and
the engine ring's cases (:func:`engine_ring_case`, :func:`engine_ring_golden`)."""

from __future__ import annotations

import numpy as np

from golden.asm import assemble
from golden.collective import algos
from golden.collective.multicore import MultiCoreSim
from golden.collective.schedule import chunk_bounds
from golden.dma import DRAM as SP_DRAM, SBUF as SP_SBUF, DTYPE_CODES, Descriptor
from tb.core.program import DATA_BASE, DRAM_BYTES, CoreProgram

__all__ = ["cc_program", "dst_shape", "engine_ring_case", "engine_ring_golden", "golden_run", "overlap_inputs", "overlap_kernel",
           "random_source",
           "sbuf_fill_program",
           "sbuf_dump_program", "OUT_BASE", "DUMP_BASE"]

#: DRAM address of the first stored result of :func:`cc_program`.
OUT_BASE = DATA_BASE + 0x8000
#: DRAM address where :func:`sbuf_dump_program` writes the SBUF bytes it reads.
DUMP_BASE = DATA_BASE + 0x20000
_ESZ = {"fp32": 4, "bf16": 2, "fp16": 2}


def dst_shape(op, rank, n, parts, per):
    """``(partitions, elements per partition)`` of rank ``rank``'s destination of ``op`` on
    ``n`` ranks, for a source of ``parts`` x ``per`` elements: all-gather ``n`` times the source
    in each partition; reduce-scatter the rank's chunk
    (:func:`golden.collective.schedule.chunk_bounds`) in one partition; otherwise the whole
    source in one partition."""
    if op == "all_gather":
        return parts, per * n
    if op == "reduce_scatter":
        lo, hi = chunk_bounds(parts * per, n)[rank]
        return 1, hi - lo
    return 1, parts * per


def _ap(off, dtype, parts, per):
    return f"sbuf.{dtype}[0:{parts}]@{off:#x}{{1x{per}}}"


def cc_program(cfg, rank, n, steps, src_codes, dtype, parts, per, *, stores=True,
               chain=False, same_dst=False, streams=None):
    """A core program: the source (``parts`` x ``per`` codes of ``dtype``) DMA'd from DRAM into
    SBUF at 0 (posts s0), then each collective of ``steps`` (``(op, red, out dtype)``, ``red``
    the reduce op or send_recv's ``d``; a fourth element ``j`` takes step ``j``'s result as
    the source) on the CC queue in turn (each waits s0 and posts s1), and each result stored
    from SBUF to DRAM at :data:`OUT_BASE` + 0x1000 k once s1 reaches k + 1 (no stores without
    ``stores``).

    Parameters
    ----------
    chain : bool
        Step k > 0 reads step k - 1's destination (its shape and dtype) instead of the
        source, and waits s1 >= k: e.g. reduce-scatter, then all-gather of its chunk, then
        all-reduce of that.
    same_dst : bool
        Every step writes the same destination (SBUF 0x400); step k > 0 waits for the store
        of step k - 1 (s2 >= k; s1 >= k without ``stores``) so that no store reads a
        destination the next collective is writing.
    streams : sequence of int, optional
        The ``stream`` immediate of each step (default 1 for every step).
    """
    SBP = cfg.sbuf_bytes_per_partition
    e = _ESZ.get(dtype, 1)
    prog = CoreProgram()
    codes = np.asarray(src_codes, np.uint32).reshape(parts, per)
    by = ((codes[..., None] >> (8 * np.arange(e, dtype=np.uint32))) & 0xFF).astype(np.uint8)
    prog.data[DATA_BASE] = by.tobytes()
    code = DTYPE_CODES[dtype]
    prog.add_descriptor(Descriptor(src=DATA_BASE, dst=0, src_space=SP_DRAM, dst_space=SP_SBUF,
                                   dims=((per, e, e), (parts, per * e, SBP)),
                                   src_dtype=code, dst_dtype=code, post=True, sem=0, inc=1))
    cc, sp = [], [f"dma_start engine=0 queue=0 count=1 desc_addr={prog.desc_addr(0)}"]
    src = (0, dtype, parts, per)
    shapes = []
    for k, (op, red, odt, *frm) in enumerate(steps):
        oe = _ESZ.get(odt, 1)
        if frm:                             # step frm[0]'s result
            j = frm[0]
            src = (0x400 * (j + 1), steps[j][2], *shapes[j])
        dparts, dper = dst_shape(op, rank, n, *src[2:])
        shapes.append((dparts, dper))
        dst = 0x400 if same_dst else 0x400 * (k + 1)
        extra = (f" d={red}" if op == "send_recv" else f" op={red}") if red is not None else ""
        wait = "s0>=1"
        if k and same_dst:
            wait = f"s2>={k}" if stores else f"s1>={k}"
        elif k and chain:
            wait = f"s1>={k}"
        st = 1 if streams is None else streams[k]
        cc.append(f"{op} ap0={_ap(dst, odt, dparts, dper)} ap1={_ap(*src)}"
                  f"{extra} stream={st} wait={wait} post=s1+1")
        if chain:
            src = (dst, odt, dparts, dper)
        elif frm:
            src = (0, dtype, parts, per)
        prog.add_descriptor(Descriptor(src=dst, dst=OUT_BASE + 0x1000 * k, src_space=SP_SBUF,
                                       dst_space=SP_DRAM,
                                       dims=((dper, oe, oe), (dparts, SBP, dper * oe)),
                                       src_dtype=DTYPE_CODES[odt], dst_dtype=DTYPE_CODES[odt],
                                       post=True, sem=2, inc=1))
        if stores:
            sp.append(f"dma_start engine=0 queue=0 count=1 desc_addr={prog.desc_addr(k + 1)} "
                      f"wait=s1>={k + 1}")
    prog.queues["cc"] = "\n".join(cc) + "\n"
    prog.queues["sp"] = "\n".join(sp) + "\n"
    return prog


def random_source(rng, dtype, size):
    """Random codes of ``dtype`` (normal values, a few zeros)."""
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    x[rng.integers(0, size, max(1, size // 16))] = 0.0
    return algos.encode(x, dtype)


def golden_run(cfg, progs, *, watchdog=None):
    """The programs on :class:`MultiCoreSim`: ``(DRAM images, first errors)``."""
    n = len(progs)
    images = [bytearray(p.image()[0]) for p in progs]
    m = MultiCoreSim(cfg, n, dram_bytes=[bytearray(i) + bytearray(DRAM_BYTES - len(i))
                                         for i in images])
    errs = m.run([p.encoded() for p in progs], watchdog=watchdog)
    return [bytes(c.mem.dram[:DRAM_BYTES]) for c in m.cores], errs


def _copy_program(cfg, parts, nbytes, to_sbuf):
    if nbytes % 4 or not 0 < nbytes <= cfg.sbuf_bytes_per_partition:
        raise ValueError(f"nbytes must be a multiple of 4 in (0, "
                         f"{cfg.sbuf_bytes_per_partition}], not {nbytes!r}")
    if not 0 < parts <= cfg.partitions:
        raise ValueError(f"parts must be in [1, {cfg.partitions}], not {parts!r}")
    SBP, code = cfg.sbuf_bytes_per_partition, DTYPE_CODES["fp32"]
    prog = CoreProgram()
    if to_sbuf:
        d = Descriptor(src=DATA_BASE, dst=0, src_space=SP_DRAM, dst_space=SP_SBUF,
                       dims=((nbytes // 4, 4, 4), (parts, nbytes, SBP)),
                       src_dtype=code, dst_dtype=code, post=True, sem=0, inc=1)
    else:
        d = Descriptor(src=0, dst=DUMP_BASE, src_space=SP_SBUF, dst_space=SP_DRAM,
                       dims=((nbytes // 4, 4, 4), (parts, SBP, nbytes)),
                       src_dtype=code, dst_dtype=code, post=True, sem=0, inc=1)
    prog.add_descriptor(d)
    prog.queues["sp"] = f"dma_start engine=0 queue=0 count=1 desc_addr={prog.desc_addr(0)}\n"
    return prog


def sbuf_fill_program(cfg, parts, nbytes, data):
    """A core program that DMAs ``data`` (``parts`` x ``nbytes`` bytes, FP32 codes: copied
    unchanged) from DRAM into SBUF partitions ``0 .. parts - 1``, bytes ``0 .. nbytes - 1``: a
    guard pattern around a collective's source and destination."""
    prog = _copy_program(cfg, parts, nbytes, True)
    if len(data) != parts * nbytes:
        raise ValueError(f"data must hold parts x nbytes = {parts * nbytes} bytes, not "
                         f"{len(data)}")
    prog.data[DATA_BASE] = bytes(data)
    return prog


def sbuf_dump_program(cfg, parts, nbytes):
    """A core program that DMAs SBUF partitions ``0 .. parts - 1``, bytes ``0 .. nbytes - 1``,
    to DRAM at :data:`DUMP_BASE` (partition after partition)."""
    return _copy_program(cfg, parts, nbytes, False)


def overlap_kernel(cfg, n, *, gemm=True, allreduce=True, seed=0, K=16, N=128, ar_bytes=2048,
                   preload=False, late_store=False, own_banks=False):
    """The compute/collective overlap kernel (docs/collectives.md §19): on every rank, an FP32
    all-reduce (add) of ``ar_bytes`` per core, ``x`` [partitions, ...] loaded from DRAM into
    SBUF and the result stored to ``y``, and independently a GEMM from DRAM, ``C = A @ B``
    with ``AT`` [K, pe_cols] and ``B`` [K, N] BF16 loaded per K tile (``pe_rows``), the K tiles
    accumulated in PSUM (``psum_bank_fp32`` columns a tile), copied to SBUF as FP32 by the
    vector engine and stored to ``C``. No semaphore orders one after the other, so the tensor
    engine and its DMA run while the all-reduce is on the ring; ``y``'s store is the sync
    engine's last instruction (its in-order queue would otherwise hold the GEMM's loads behind
    the all-reduce). ``C``'s stores go on the last DMA queue, alone (its completions time the
    GEMM). ``gemm`` / ``allreduce`` False: that half left out. Returns the
    :class:`golden.kernel.multi.MultiKernel`.

    Parameters
    ----------
    preload : bool
        ``x`` is loaded first, on the last DMA queue (before ``C``'s stores), in every run (the
        GEMM alone too), and the sync engine waits for it (a ``nop``) before it issues anything
        else: both halves start with the all-reduce's source already in SBUF (the data-parallel
        case, a gradient produced by compute), and the GEMM's time runs from that load's
        completion (:func:`tb.multicore.run_kernel.overlap_spans`).
    late_store : bool
        ``y``'s store waits (a ``nop`` of the sync engine) for the GEMM's last store of ``C``
        to complete: the all-reduce's result leaves SBUF after the GEMM, outside its time.
    own_banks : bool
        ``x``'s tile in SBUF bank 0 and the all-reduce's result in bank 1, the GEMM's tiles in
        the other banks (``AT``'s, ``B``'s and the output's each taking them in turn), so the
        DMA's writes of the GEMM's operands never wait for the collective engine's SBUF ports
        or make them wait (needs ``sbuf_banks >= 4``). Otherwise every tile takes the next
        bank with room (:meth:`golden.kernel.Kernel.sbuf_tile`).
    """
    from golden.kernel.multi import MultiKernel
    from rtl.isa import Instr
    if not (gemm or allreduce):
        raise ValueError("overlap_kernel needs gemm or allreduce")
    P, TK, M, TN = cfg.partitions, cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    if K % TK or N % TN:
        raise ValueError(f"overlap_kernel K must be a multiple of pe_rows {TK} and N of "
                         f"psum_bank_fp32 {TN}, not {K} and {N}")
    cols = ar_bytes // 4 // P
    xs, ats, bs = overlap_inputs(cfg, n, seed=seed, K=K, N=N, ar_bytes=ar_bytes)
    if own_banks and cfg.sbuf_banks < 4:
        raise ValueError(f"overlap_kernel own_banks needs sbuf_banks >= 4, not "
                         f"{cfg.sbuf_banks}")
    c_queue = cfg.dma_engines * cfg.dma_queues - 1
    others = list(range(c_queue)) or [0]
    gemm_banks = tuple(range(2, cfg.sbuf_banks))

    def body(k):
        r, q = k.rank, iter(others * 64)
        turn = {}

        def tile(parts, elems, dtype, name, bank=None):
            if not own_banks:
                return k.sbuf_tile(parts, elems, dtype, name)
            if bank is not None:
                return k.sbuf_tile(parts, elems, dtype, name, bank=bank)
            # each kind (AT, B, output) takes the GEMM's banks in turn, from its own start, so
            # a K step's AT and B tiles sit in different banks
            j = turn[name[0]] = turn.get(name[0], "abo".index(name[0])) + 1
            j %= len(gemm_banks)
            return k.sbuf_tile(parts, elems, dtype, name,
                               prefer=gemm_banks[j:] + gemm_banks[:j])
        if allreduce or preload:
            x = k.dram_tensor("x", dtype="fp32", data=xs[r])
            t = tile(P, cols, "fp32", "t", 0)
            k.load(t, x, queue=c_queue if preload else next(q))
            if preload:
                k.instr(Instr(op="nop"), reads=[t], engine="sp")
        if allreduce:
            s = tile(P, cols, "fp32", "s", 1)
            k.all_reduce(s, t, "add")
        if gemm:
            at = k.dram_tensor("AT", dtype="bf16", codes=ats[r])
            b = k.dram_tensor("B", dtype="bf16", codes=bs[r])
            c = k.dram_tensor("C", (M, N), "fp32")
            for n0 in range(0, N, TN):
                ps = k.psum_tile(M, TN)
                for k0 in range(0, K, TK):
                    ta = tile(TK, M, "bf16", f"a{n0}_{k0}")
                    tb = tile(TK, TN, "bf16", f"b{n0}_{k0}")
                    k.load(ta, at, k0, 0, queue=next(q))
                    k.load(tb, b, k0, n0, queue=next(q))
                    k.matmul(ps, ta, tb, accumulate=k0 > 0)
                o = tile(M, TN, "fp32", f"o{n0}")
                k.copy(o, ps)
                k.store(c, o, 0, n0, queue=c_queue)
            k.output("C", c)
        if allreduce:
            y = k.dram_tensor("y", (P, cols), "fp32")
            if late_store and gemm:
                k.instr(Instr(op="nop"), reads=[c], engine="sp")
            k.store(y, s, queue=next(q))
            k.output("y", y)
    return MultiKernel.from_body(cfg, n, body, dram_bytes=1 << 16)


def overlap_inputs(cfg, n, *, seed=0, K=16, N=128, ar_bytes=2048):
    """The inputs of :func:`overlap_kernel` (same arguments): per rank ``x`` (FP32 values,
    [partitions, ar_bytes / 4 / partitions]), ``AT`` [K, pe_cols] and ``B`` [K, N] (BF16
    codes); ``(xs, ats, bs)``."""
    P, M = cfg.partitions, cfg.pe_cols
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal((P, ar_bytes // 4 // P)) * 3).astype(np.float32)
          for _ in range(n)]
    ats = [algos.encode(rng.standard_normal((K, M)).astype(np.float32), "bf16")
           for _ in range(n)]
    bs = [algos.encode(rng.standard_normal((K, N)).astype(np.float32), "bf16")
          for _ in range(n)]
    return xs, ats, bs


# ---- the collective-engine ring (tb/multicore/harness.py) ------------------------------------

#: The operations of :func:`engine_ring_case`.
RING_OPS = ("all_reduce", "reduce_scatter", "all_gather")
#: Where :func:`engine_ring_case` puts the destination: ``"packed"`` right after the source,
#: ``"split"`` at the middle of the partition (the source in the lower half of the SBUF's
#: banks, the destination in the upper half: no bank shared by the two).
RING_LAYOUTS = ("packed", "split")


def engine_ring_case(cfg, op, size, seed=0, *, layout="packed"):
    """``(instruction text, SBUF images)`` of one FP32 ``op`` of NCCL size ``size`` bytes per
    core on ``cfg.ring_size`` ranks of ``cfg``: the source at byte 0 of random data
    (``seed``), the destination placed by ``layout`` (:data:`RING_LAYOUTS`), both of the same
    free size, so that a flit's K slots land in one row write (docs/collectives.md, "K elements
    per flit"): all-reduce ``partitions`` rows to as many, reduce-scatter ``partitions`` rows
    to ``partitions / n`` (the rank's chunk), all-gather ``partitions / n`` rows to
    ``partitions``; the same instruction on every rank."""
    if op not in RING_OPS:
        raise ValueError(f"op must be one of {RING_OPS}, not {op!r}")
    if layout not in RING_LAYOUTS:
        raise ValueError(f"layout must be one of {RING_LAYOUTS}, not {layout!r}")
    n, P, SB = cfg.ring_size, cfg.partitions, cfg.sbuf_bytes_per_partition
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0 or size % (4 * P * n):
        raise ValueError(f"size must be a positive multiple of 4 * partitions * ring_size = "
                         f"{4 * P * n} bytes, not {size!r}")
    if op == "all_gather":               # n times the rows: the source has P / n of them
        sparts, dparts = P // n, P
    else:
        sparts, dparts = P, (P // n if op == "reduce_scatter" else P)
    per = size // 4 // P                 # source and destination free size (elements)
    need = 2 * per * 4                   # bytes a partition, either layout
    if need > SB:
        raise ValueError(f"size {size} B of {op}: source and destination need {need} bytes "
                         f"per partition, more than sbuf_bytes_per_partition = {SB}")
    dst = per * 4 if layout == "packed" else SB // 2
    text = (f"{op} ap0=sbuf.fp32[0:{dparts}]@{dst:#x}{{1x{per}}} "
            f"ap1=sbuf.fp32[0:{sparts}]@0x0{{1x{per}}}" + ("" if op == "all_gather" else " op=1"))
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(n):
        img = np.zeros((P, SB), np.uint8)
        x = (rng.standard_normal((sparts, per)) * 3).astype(np.float32)
        img[:sparts, :per * 4] = x.view(np.uint8).reshape(sparts, per * 4)
        images.append(img)
    return text, images


def engine_ring_golden(cfg, text, images):
    """``(errors, SBUF images after)`` of ``text`` run on every rank of
    :class:`MultiCoreSim` from ``images``."""
    n = len(images)
    g = MultiCoreSim(cfg, n, dram_bytes=4096)
    for r in range(n):
        g.cores[r].sbuf[...] = images[r]
    errs = g.run([{"cc": assemble(text)} for _ in range(n)])
    return errs, [np.array(c.sbuf) for c in g.cores]
