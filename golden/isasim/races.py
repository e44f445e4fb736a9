# SPDX-License-Identifier: Apache-2.0
"""Race detection over a finished run of the golden ISA simulator (:func:`find_races`)
and the footprints of DMA descriptors."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from golden import dma as gdma
from golden.ap import SBUF
from golden.isasim.hooks import footprints_overlap

__all__ = ["conflict", "desc_access", "desc_addrs", "find_races", "DRAM_RUNS_MAX"]


def conflict(a, b):
    """Do two footprints ``(kind, mem, parts, lo, hi)`` conflict: share a byte
    (:func:`golden.isasim.hooks.footprints_overlap`) with one of them writing?"""
    return not (a[0] == "r" and b[0] == "r") and footprints_overlap(a, b)


DRAM_RUNS_MAX = 1 << 16      # elements: a larger DRAM side's footprint is its extent


def desc_addrs(d, side):
    """The first byte of every element of one side of a descriptor (``int64``, walk order)."""
    a = np.array([d.src if side == 0 else d.dst], dtype=np.int64)
    for num, ss, ds in reversed(d.slots):
        a = (a[:, None] + (ss if side == 0 else ds) * np.arange(num, dtype=np.int64)).ravel()
    return a


def desc_access(cfg, d, side):
    """Footprints of one side of a descriptor: its DRAM byte runs (the extent beyond
    ``DRAM_RUNS_MAX`` elements), or one per SBUF partition."""
    kind = "r" if side == 0 else "w"
    space = d.src_space if side == 0 else d.dst_space
    es = gdma.ELEM_BYTES[gdma.DTYPES[d.src_dtype if side == 0 else d.dst_dtype]]
    if space == gdma.DRAM:
        if np.prod([num for num, _, _ in d.slots], dtype=np.int64) > DRAM_RUNS_MAX:
            return [(kind, "dram", None, *gdma.extent(d, side))]
        a = np.unique(desc_addrs(d, side))
        # the byte runs: a new run where an element starts past the previous one's end
        cut = np.flatnonzero(a[1:] > a[:-1] + es) + 1
        return [(kind, "dram", None, int(a[i]), int(a[j - 1]) + es - 1)
                for i, j in zip(np.r_[0, cut], np.r_[cut, len(a)])]
    a = desc_addrs(d, side)
    part, byte = np.divmod(a, cfg.sbuf_bytes_per_partition)
    lo = np.full(cfg.partitions, cfg.sbuf_bytes_per_partition, dtype=np.int64)
    hi = np.full(cfg.partitions, -1, dtype=np.int64)
    np.minimum.at(lo, part, byte)
    np.maximum.at(hi, part, byte)
    return [(kind, SBUF, (p, p), int(lo[p]), int(hi[p]) + es - 1)
            for p in np.flatnonzero(hi >= 0).tolist()]


def find_races(sim):
    """Pairs ``(event_a, event_b)`` of a finished run that touch a common byte (a descriptor's
    DRAM side by its byte runs, SBUF per partition by its first and last byte, so an
    interleaved SBUF pattern may be over-reported), one writing, from different streams, and
    not ordered by the semaphores.

    Ordering (vector clocks over :attr:`IsaSim.timeline`): program order within a stream (a DMA
    queue's descriptors included), a descriptor after the ``dma_start`` that queued it, and a
    wait ``sem >= v`` after stream ``j``'s post that brings ``j``'s own increments of ``sem`` to
    ``v - (the increments of every other source in the run)``: the posts it cannot have been
    satisfied without."""
    ev = sim.timeline
    streams = sorted({e.stream for e in ev})
    sidx = {s: k for k, s in enumerate(streams)}
    tot = {}                                         # sem -> stream -> total inc
    for e in ev:
        if e.post is not None:
            d = tot.setdefault(e.post[0], {})
            d[e.stream] = d.get(e.stream, 0) + e.post[1]
    cum = {}                                         # (sem, stream) -> [(cum inc, clock)]
    last, clocks = {}, []
    zero = [0] * len(streams)
    for e in ev:
        vc = list(last.get(e.stream, zero))
        if e.after is not None:
            vc = [max(a, b) for a, b in zip(vc, clocks[e.after])]
        if e.waits is not None:
            sem, v = e.waits
            incs = tot.get(sem, {})
            for (psem, src), lst in cum.items():
                if psem != sem:
                    continue
                need = v - (sum(incs.values()) - incs.get(src, 0))
                for c_inc, c_vc in lst if need > 0 else ():
                    if c_inc >= need:
                        vc = [max(a, b) for a, b in zip(vc, c_vc)]
                        break
        vc[sidx[e.stream]] += 1
        clocks.append(vc)
        last[e.stream] = vc
        if e.post is not None:
            lst = cum.setdefault((e.post[0], e.stream), [])
            lst.append(((lst[-1][0] if lst else 0) + e.post[1], vc))
    # candidate pairs: events sharing a 4 KiB chunk of a memory (per partition for SBUF/PSUM),
    # at least one writing, neither ordered before the other: for an event b and another
    # stream s, the events of s that b is not ordered after are those past b's clock entry
    # for s (a contiguous run of s's events in the chunk, found by bisection)
    own = [clocks[i][sidx[e.stream]] for i, e in enumerate(ev)]
    buckets = {}                                     # chunk -> (writers, readers)
    for i, e in enumerate(ev):
        for kind, mem, parts, lo, hi in e.access:
            ps = range(parts[0], parts[1] + 1) if parts is not None else (None,)
            for p in ps:
                for ch in range(lo >> 12, (hi >> 12) + 1):
                    wr = buckets.setdefault((mem, p, ch), (set(), set()))
                    wr[0 if kind == "w" else 1].add(i)
    pairs = set()
    for w, r in buckets.values():
        if not w:
            continue
        by_s = {}
        for x in sorted(w | r):
            by_s.setdefault(sidx[ev[x].stream], []).append(x)
        seqs = {k: [own[x] for x in lst] for k, lst in by_s.items()}
        for b in sorted(w | r):
            kb = sidx[ev[b].stream]
            for k, lst in by_s.items():
                if k == kb:
                    continue
                lo = bisect_right(seqs[k], clocks[b][k])
                hi = bisect_left(lst, b)
                for a in lst[lo:hi]:
                    if a in w or b in w:
                        pairs.add((a, b))
    races = []
    for i, j in sorted(pairs):
        if any(conflict(x, y) for x in ev[i].access for y in ev[j].access):
            races.append((ev[i], ev[j]))
    return races
