# SPDX-License-Identifier: Apache-2.0
"""Stimulus and expected results of the multi-core top's tests: the collective programs every
core runs and their golden reference (:class:`golden.collective.multicore.MultiCoreSim`)."""

from __future__ import annotations

import numpy as np

from golden.collective import algos
from golden.collective.multicore import MultiCoreSim
from golden.collective.schedule import chunk_bounds
from golden.dma import DRAM as SP_DRAM, SBUF as SP_SBUF, DTYPE_CODES, Descriptor
from tb.core.program import DATA_BASE, DRAM_BYTES, CoreProgram

__all__ = ["cc_program", "dst_shape", "golden_run", "random_source", "OUT_BASE"]

#: DRAM address of the first stored result of :func:`cc_program`.
OUT_BASE = DATA_BASE + 0x8000
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


def cc_program(cfg, rank, n, steps, src_codes, dtype, parts, per, *, stores=True):
    """A core program: the source (``parts`` x ``per`` codes of ``dtype``) DMA'd from DRAM into
    SBUF at 0 (posts s0), then each collective of ``steps`` (``(op, red, out dtype)``, ``red``
    the reduce op or send_recv's ``d``; a fourth element ``j`` takes step ``j``'s result as
    the source) on the CC queue in turn (each waits s0 and posts s1), and each result stored
    from SBUF to DRAM at :data:`OUT_BASE` + 0x1000 k once s1 reaches k + 1 (no stores without
    ``stores``)."""
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
    shapes = []
    for k, (op, red, odt, *frm) in enumerate(steps):
        oe = _ESZ.get(odt, 1)
        src = (0, dtype, parts, per)
        if frm:                             # step frm[0]'s result
            j = frm[0]
            src = (0x400 * (j + 1), steps[j][2], *shapes[j])
        dparts, dper = dst_shape(op, rank, n, src[2], src[3])
        shapes.append((dparts, dper))
        dst = 0x400 * (k + 1)
        extra = (f" d={red}" if op == "send_recv" else f" op={red}") if red is not None else ""
        cc.append(f"{op} ap0={_ap(dst, odt, dparts, dper)} ap1={_ap(*src)}"
                  f"{extra} stream=1 wait=s0>=1 post=s1+1")
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
