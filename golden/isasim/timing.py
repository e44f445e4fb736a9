# SPDX-License-Identifier: Apache-2.0
"""The cycle model's parameters (:class:`Timing`), the shared AXI data channels
(:class:`AxiChannel`) and the bank/port sharing rule of the engines' element streams."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from golden.ap import PSUM

__all__ = ["Timing", "AxiChannel", "DmaEngineTiming", "port_sharing"]


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Parameters of the cycle estimate (``docs/kernels.md`` §4 gives the formulas).

    Parameters
    ----------
    seq_issue : int
        Cycles between two issues of one sequencer (>= 1).
    wait_latency : int
        Cycles from a semaphore value becoming visible to the waiting instruction's issue.
    post_latency : int
        Cycles from retire to the post being visible (the semaphore file's read-modify-write).
    issue_depth : int or None
        Instructions issued and not retired per sequencer (``None``: ``cfg.issue_depth``).
    fetch_cycles : int or None
        Cycles of one instruction fetch burst (``None``: ``128 / sbuf_word_bytes`` AXI beats;
        0: fetch not modelled). Up to ``fetch_depth`` instructions are fetched ahead of issue.
    fetch_depth : int or None
        ``None``: ``cfg.fetch_depth``.
    sync_cycles : int
        ``nop``, ``notify``, ``halt`` (run by the sequencer itself).
    dma_desc_cycles : int
        Fixed cost of a descriptor reaching an idle engine (queue, check, first request). A
        descriptor behind a running one is checked while that one runs and
        starts its reads ``dma_read_ahead`` cycles after the running one's last source request
        (:class:`DmaEngineTiming`).
    dma_read_ahead : int
        Cycles from a descriptor's last source request to the next descriptor's first, when
        the next one reads ahead (docs/dma.md §4.1: the source walker goes idle the cycle
        after its last AR, takes the next descriptor, and offers its first AR a cycle later).
    dram_latency : int
        AXI round trip added once per descriptor and once per ``dma_start`` fetch.
    vector_latency : int
        Pipeline latency of a hooked op without its own timing (occupancy = elements per
        partition).
    vector_overhead, vector_reduce_overhead, vector_max8_overhead, vector_scan_overhead : int
        Vector engine, cycles of one instruction beyond its elements per lane (take -> done,
        docs/vector.md §4: 20; TENSOR_REDUCE 32; MAX8 25; TENSOR_TENSOR_SCAN 12 beyond its
        9 cycles per element: 588 measured for 64).
    vector_find_index8_overhead : int
        FIND_INDEX8 beyond its data elements (docs/vector.md §4: 33 measured, MAX8's 25 plus
        the 8 values entering first; one data element per cycle whichever banks hold the
        operands, 3 cycles more with the values in the data's SBUF bank).
    act_overhead : int or None
        Scalar engine, cycles beyond the elements (``None``: the element pipeline
        ``2 + L + 12 L + 4 + 3`` plus 8 cycles of checks, 56 at ``L = mul + add stages = 3``,
        docs/scalar.md §5).
    act_table_overhead : int
        Scalar engine, ``act_table_load`` cycles beyond its words (one per cycle) once the
        pipeline has drained (the retire gap after the activation before it on the small core:
        200 cycles for the 192 words of ``reciprocal``, 236 for the 228 of ``exp``).
    act_raw_wait : int
        Scalar engine, cycles an instruction that reads what the one before it writes loses
        beyond waiting for that write and restarting the pipeline (``act_overhead``): the RTL
        releases the read when the writer acknowledges the last write, and the reader and the
        writer then start from idle (``tb/core/tb_scalar_hazard.py``: retire gap 171 cycles on
        the small core, 126 without this term).
    """
    seq_issue: int = 1
    wait_latency: int = 1
    post_latency: int = 2
    issue_depth: int | None = None
    fetch_cycles: int | None = None
    fetch_depth: int | None = None
    sync_cycles: int = 1
    dma_desc_cycles: int = 7
    dma_read_ahead: int = 2
    dram_latency: int = 4
    vector_latency: int = 8
    vector_overhead: int = 20
    vector_reduce_overhead: int = 32
    vector_max8_overhead: int = 25
    vector_scan_overhead: int = 12
    vector_bn_stats_overhead: int = 44
    vector_bn_aggr_overhead: int = 95
    vector_transpose_overhead: int = 17
    vector_find_index8_overhead: int = 33
    act_overhead: int | None = None
    act_table_overhead: int = 8
    act_raw_wait: int = 45

    def __post_init__(self):
        for k in ("seq_issue", "wait_latency", "post_latency", "sync_cycles", "dma_desc_cycles",
                  "dma_read_ahead",
                  "dram_latency", "vector_latency", "vector_overhead", "vector_reduce_overhead",
                  "vector_max8_overhead", "vector_scan_overhead", "vector_bn_stats_overhead",
                  "vector_bn_aggr_overhead", "vector_transpose_overhead",
                  "vector_find_index8_overhead", "act_table_overhead", "act_raw_wait"):
            v = getattr(self, k)
            lo = 1 if k in ("seq_issue", "post_latency", "sync_cycles") else 0
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"Timing field '{k}' must be an int, not {v!r}")
            if not lo <= v <= 1 << 20:
                raise ValueError(f"Timing field '{k}' must be in [{lo}, {1 << 20}], not {v!r}")
        for k, lo, hi in (("issue_depth", 1, 16), ("fetch_depth", 1, 16),
                          ("fetch_cycles", 0, 1 << 20), ("act_overhead", 0, 1 << 20)):
            v = getattr(self, k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)
                                  or not lo <= v <= hi):
                raise ValueError(f"Timing field '{k}' must be None or in [{lo}, {hi}], "
                                 f"not {v!r}")


class DmaEngineTiming:
    """The descriptor overlap of one DMA engine (docs/dma.md §4.1), for the cycle model.

    Up to two descriptors are in flight: a byte copy that touches DRAM (``overlap``) starts
    its reads ``dma_read_ahead`` cycles after the previous byte copy's last source request
    (after its last data arrived if the two differ in queue, i.e. AXI ID, or source space; not
    before the one before that has completed; its check ran meanwhile), its writes
    after the previous one's last write; any other descriptor starts when the engine is
    empty. Completions are in order."""

    def __init__(self, timing: Timing):
        self.timing = timing
        self.last_reads = None          # last source request of the last byte copy
        self.write_end = 0              # the last descriptor's last destination beat
        self.done = [0, 0]              # completion cycles of the last two descriptors
        self.last_key = None            # (queue, source space) of the last byte copy
        self.last_data = 0              # ... the cycle its last source data arrived

    def first_request(self, enq, start, overlap, key=None):
        """Cycle the first source request of a descriptor queued at ``enq`` and taken at
        ``start`` can go; ``key``: its (queue, source space)."""
        tm = self.timing
        if start >= self.done[1]:                       # the engine is empty
            return start + tm.dma_desc_cycles
        if overlap and self.last_reads is not None:
            last = self.last_reads if key == self.last_key else self.last_data
            return max(enq + tm.dma_desc_cycles, last + tm.dma_read_ahead, self.done[0] + 1)
        return max(enq + tm.dma_desc_cycles, self.done[1] + 2)

    def retire(self, times, done, copy, key=None):
        """Record a descriptor (``times`` from ``dma_data``; ``copy``: a byte copy); returns
        its completion (in order) and the cycle the next descriptor may be taken."""
        done = max(done, self.done[1])
        self.done = [self.done[1], done]
        self.write_end = times["writes_end"]
        self.last_reads = times["reads_issued"] if copy else None
        self.last_key, self.last_data = key, times.get("reads_done", 0)
        return done, (self.last_reads if copy else done)


class AxiChannel:
    """One shared AXI data channel (R or W of the core's one master) as a calendar of bursts:
    a burst of ``n`` beats takes the earliest ``n`` free cycles in a row at or after it is
    ready (``book``). Bursts are booked in the simulator's order, which is close to cycle
    order, so a burst booked late still fills an earlier gap.

    Instruction prefetches are booked *soft* (``who`` = ``(stream, index)``, with the cycle
    ``ready`` its address beat + ``dram_latency``): the DRAM serves reads in the order of their
    address beats (the testbench's AXI RAM takes one read at a time), so a descriptor or data
    burst passes exactly the prefetches whose address beat went out with or after its own (in a
    tie the descriptor or data read goes first: the first dma_start of a DMA-only kernel
    retires at 81 cycles on the small core, 93 modelled the other way). A hard booking ignores
    the soft bursts ready at or after its own ready cycle, and those it overlaps are booked
    again after it (their stream's ``fetch`` entry is updated)."""

    def __init__(self):
        self.st, self.en, self.who = [], [], []     # sorted by start, disjoint

    def _movable(self, k, t):
        w = self.who[k]
        return w is not None and w[2] >= t

    def _place(self, t, n, hard):
        k = bisect_right(self.en, t)
        s = t
        while k < len(self.st) and self.st[k] < s + n:
            if not (hard and self._movable(k, t)):
                s = max(s, self.en[k])
            k += 1
        return s

    def book(self, t, n, who=None, ready=None):
        """Reserve ``n`` cycles from the first gap at or after ``t``; returns the start.
        ``who``: a soft prefetch ``(stream, index)`` (its address beat at ``ready``)."""
        if n <= 0:
            return t
        hard = who is None
        s = self._place(t, n, hard)
        moved = []
        if hard:
            k = bisect_right(self.en, s)
            while k < len(self.st) and self.st[k] < s + n:
                if self._movable(k, t):
                    moved.append((self.who[k], self.en[k] - self.st[k]))
                    del self.st[k], self.en[k], self.who[k]
                else:
                    k += 1
        k = bisect_right(self.st, s)
        self.st.insert(k, s)
        self.en.insert(k, s + n)
        self.who.insert(k, None if hard else (who[0], who[1], ready))
        for (stream, i, r), m in moved:
            st = self.book(r, m, (stream, i), r)
            stream.fetch[i] = (st, st + m)
        return s


def port_sharing(cfg, aps):
    """Cycles per element of an engine's streams ``aps`` (golden APs with ``elem_bytes``):
    the most of them on one SBUF bank (a bank serves one read or write per cycle,
    docs/memory.md §5) or on the engine's one PSUM row port; at least 1. A stream is counted on
    the bank of its first byte (a broadcast operand too: it is read for every element)."""
    per = {}
    bank_bytes = cfg.sbuf_bytes_per_partition // cfg.sbuf_banks
    for ap in aps:
        if ap is None:
            continue
        if ap.memory == PSUM:
            key = "psum"
        else:
            key = ap.offset // bank_bytes
        per[key] = per.get(key, 0) + 1
    return max([1, *per.values()])

