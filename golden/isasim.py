# SPDX-License-Identifier: Apache-2.0
"""Golden ISA simulator: runs the binary per-engine programs of :mod:`rtl.isa` on a DRAM window,
the SBUF, the PSUM and the semaphore file, bit-exact, and estimates the cycles of every
instruction (``docs/kernels.md`` is the user's page; ``docs/isa.md`` §6 the semantics).

State
-----
* ``mem``: a :class:`golden.dma.Memory` (DRAM window from ``dram_base`` and the flat,
  partition-major SBUF, ``partitions x sbuf_bytes_per_partition`` bytes): the DMA's view.
* ``psum``: ``np.uint8 [partitions, psum_bytes_per_partition]``; :attr:`IsaSim.psum32` views it
  as FP32 bits ``[partitions, psum_banks, psum_bank_fp32]``, so ``psum32[m, bank, n]`` is
  ``golden.tensor.PsumModel.state[bank, m, n]`` for ``m < pe_cols``.
* ``sems``: ``cfg.semaphores`` counters of ``cfg.semaphore_bits`` bits.
* one stream per engine of :data:`rtl.isa.ENGINES` (its program: 128-byte instructions), and one
  stream per DMA queue (``cfg.dma_engines x cfg.dma_queues``) fed by ``dma_start``.

Scheduling
----------
Every instruction runs atomically (reads and writes at once) when the scheduler picks its
stream. A stream may run its next instruction when its wait (``sem[w] >= value``) holds; posts
are applied when the instruction completes. Two policies:

* ``"timed"`` (default): a discrete-event schedule on the cycle model (:class:`Timing`): the
  stream whose next instruction can issue earliest runs first (ties: engines in
  :data:`rtl.isa.ENGINES` order, then DMA engines and queues in index order). A wait sees only
  the posts visible at that cycle. This gives the timeline.
* a :class:`random.Random`: any stream whose wait holds with the posts applied so far, picked at
  random (the timeline is then meaningless). Used to check that a program's result does not
  depend on the interleaving.

Sems only grow (waits do not decrement), so the set of instructions a program can run is the
same under every policy, and a **race-free** program (every pair of instructions of different
streams touching a common byte, one of them writing, ordered through semaphores) gives the same
memory under every policy. A program with a race is undefined; :func:`find_races` reports races
(conservatively, on each access's closed-form extent).

Errors (``docs/architecture.md`` §11.2-11.3)
-------------------------------------------
Checked before an instruction touches anything, in this order: ``E_OPCODE``
(:func:`rtl.isa.check_reserved`), ``E_SEM`` (a wait or post on a semaphore ``>= semaphores``),
then the engine's checks in the order of its RTL decoder and engine (``docs/kernels.md`` §3:
the tensor decoder's static checks report the queue index as ERR_INFO, everything else 0). ``dma_start``: ``E_DESC`` (address not a multiple of 64, DMA engine or
queue out of range), ``E_AXI`` (descriptors outside the DRAM window); each descriptor:
:func:`golden.dma.check`. A post that overflows ``2^semaphore_bits - 1`` is ``E_SEM`` (source
``"sem"``). When every unfinished engine stream waits on a semaphore that can no longer reach its
value, the first of them in :data:`rtl.isa.ENGINES` order fails with ``E_TIMEOUT``; with
``run(..., watchdog=W)`` (timed policy) any wait longer than ``W`` cycles does, earliest first,
like the ``WATCHDOG`` register. :meth:`IsaSim.run_queues` runs programs from DRAM rings
(``E_QUEUE``, fetch ``E_AXI``). The first error is kept (:class:`SimError`: code, source, queue
index, info, detail) and every stream stops; the failing instruction wrote nothing.

Engine hooks
------------
Each engine opcode runs through :data:`OP_HOOKS` (``name -> OpHook``, :func:`register_op`):
every opcode of ``pe``, ``dve`` (each ``golden.vector`` opcode ``rtl.isa`` names the same),
``act`` (``activation``, ``act_table_load``) and ``sp`` is registered here. A valid opcode
without a hook raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

import random as _random
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from golden import dma as gdma
from golden.ap import AP, ELEM_BYTES, PSUM, SBUF, addresses, extent
from golden.ap import check as ap_check
from golden.sparse import matmul_sparse
from golden.tensor import check_pair, matmul, psum_update, resolve_dense_format, transpose
from rtl.config import CoreConfig, check_config, parse_sparse_pattern
from rtl.isa import ENGINES, INSTR_BYTES, OPS_BY_CODE, OPS_BY_NAME, APEnc, Instr, check_reserved, decode
from rtl.isa import OPCODES as OPCODES_ALL

__all__ = [
    "E_OPCODE", "E_FORMAT", "E_AP_PART", "E_AP_RANGE", "E_SHAPE", "E_FLAGS", "E_SPARSE_TAG",
    "E_SEM", "E_TIMEOUT", "E_AXI", "E_QUEUE", "E_DESC", "E_AP_ALIGN", "E_AP_FORM",
    "ERROR_NAMES", "Fault", "SimError", "Timing", "sparse_load_dtypes", "OpHook", "OP_HOOKS", "register_op",
    "Event", "IsaSim", "pe_latency", "pe_swap_guard", "find_races", "split_program",
]

E_OPCODE, E_FORMAT, E_AP_PART, E_AP_RANGE, E_SHAPE, E_FLAGS, E_SPARSE_TAG = range(1, 8)
E_SEM, E_TIMEOUT, E_AXI, E_QUEUE, E_LINK, E_DESC, E_AP_ALIGN, E_AP_FORM = range(8, 16)
ERROR_NAMES = {1: "E_OPCODE", 2: "E_FORMAT", 3: "E_AP_PART", 4: "E_AP_RANGE", 5: "E_SHAPE",
               6: "E_FLAGS", 7: "E_SPARSE_TAG", 8: "E_SEM", 9: "E_TIMEOUT", 10: "E_AXI",
               11: "E_QUEUE", 12: "E_LINK", 13: "E_DESC", 14: "E_AP_ALIGN", 15: "E_AP_FORM"}

_SLOT_INDEX = {"ap0": 0, "ap1": 1, "ap2": 2}
#: Largest descriptor (elements) the model enumerates.
_MAX_DESC_ELEMS = 1 << 24
_ZERO_AP = APEnc(mem=0, start=0, count=0, dtype="fp32", offset=0, dims=())


class Fault(Exception):
    """An instruction rejected by its checks: ``code`` (§11.2), ``info`` (``ERR_INFO``: the AP
    slot for AP/format/shape errors, the semaphore for ``E_SEM``/``E_TIMEOUT``, the DMA detail
    word for DMA errors), ``msg``."""

    def __init__(self, code, info, msg):
        super().__init__(f"{ERROR_NAMES.get(code, code)}: {msg}")
        self.code, self.info, self.msg = code, info, msg


@dataclass(frozen=True)
class SimError:
    """The first error of a run: ``code``, ``source`` (an engine name of
    :data:`rtl.isa.ENGINES`, ``"dma<e>.q<q>"`` or ``"sem"``), ``index`` (queue index of the
    instruction, or descriptor number on its DMA queue), ``info`` and ``detail`` (text)."""
    code: int
    source: str
    index: int
    info: int
    detail: str

    @property
    def name(self):
        return ERROR_NAMES.get(self.code, hex(self.code))


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
        Fixed cost of one descriptor (check, first request; docs/dma.md measures 6.6).
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
    """
    seq_issue: int = 1
    wait_latency: int = 1
    post_latency: int = 2
    issue_depth: int | None = None
    fetch_cycles: int | None = None
    fetch_depth: int | None = None
    sync_cycles: int = 1
    dma_desc_cycles: int = 7
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

    def __post_init__(self):
        for k in ("seq_issue", "wait_latency", "post_latency", "sync_cycles", "dma_desc_cycles",
                  "dram_latency", "vector_latency", "vector_overhead", "vector_reduce_overhead",
                  "vector_max8_overhead", "vector_scan_overhead", "vector_bn_stats_overhead",
                  "vector_bn_aggr_overhead", "vector_transpose_overhead",
                  "vector_find_index8_overhead"):
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


@dataclass(frozen=True)
class OpHook:
    """How the simulator runs one engine opcode.

    ``execute(sim, ins) -> None`` checks everything first (raising :class:`Fault`), then reads
    and writes ``sim``. ``timing(sim, ins, issue) -> (start, done[, macs[, complete]])`` gives
    the cycle the engine starts it, the cycle its last write is visible, its MACs and the cycle
    it completes to its sequencer (default ``done``; the tensor engine's instructions without a
    post complete at dispatch) (``None``: :meth:`IsaSim.default_timing`).
    ``access(sim, ins) -> [(kind, mem, parts, lo, hi)]`` its footprint for :func:`find_races`
    (``None``: the APs, a ``dst``/``psum`` role written, the others read)."""
    name: str
    execute: Callable
    timing: Callable | None = None
    access: Callable | None = None


#: Engine opcodes the simulator can run: name -> :class:`OpHook`.
OP_HOOKS: dict = {}


def register_op(name, execute, timing=None, access=None):
    """Register (or replace) the hook of engine opcode ``name`` (a :data:`rtl.isa.OPS_BY_NAME`
    name of an engine's own range); returns the :class:`OpHook`."""
    op = OPS_BY_NAME.get(name)
    if op is None or op.engine is None:
        raise ValueError(f"register_op name must be an engine opcode of rtl.isa, not {name!r}")
    hook = OpHook(name, execute, timing, access)
    OP_HOOKS[name] = hook
    return hook


@dataclass
class Event:
    """One timeline entry: ``stream``, ``index``, ``op``, and the cycles ``issue`` (the
    sequencer hands it over / the DMA takes it), ``start`` (the engine starts), ``done`` (last
    write visible), ``retire`` (in order; the post is visible ``post_latency`` later)."""
    stream: str
    index: int
    op: str
    issue: int
    start: int
    done: int
    retire: int
    access: list = field(default_factory=list, repr=False)
    waits: tuple | None = None
    post: tuple | None = None
    after: int | None = None
    work: int = 0


def pe_latency(cfg):
    """``TensorEngine.latency`` (docs/tensor-engine.md, cycle formula): cycles from a matmul's
    last moving beat to its last PSUM write."""
    La, Lm, R, C = cfg.add_stages, cfg.mul_stages, cfg.pe_rows, cfg.pe_cols
    # input register, row skew, PE (registered buses + multiplier + adder), de-skew (every
    # column through at least one register), PSUM read/add/write
    return 1 + (R - 1) * La + (1 + Lm + La) + C + (1 + La)


def pe_swap_guard(cfg):
    """``TensorEngine.swap_guard`` (docs/tensor-engine.md, stationary loading): cycles, counted
    from the cycle after a weight swap's first beat issues, before the next load may start. The
    weight-load bus is skewed like the moving data, so the swap stays ahead of a load that
    starts right behind it, whatever the number of rows: one cycle."""
    return 1


def split_program(raw):
    """``raw`` (bytes, a list of 128-byte instructions, or of :class:`rtl.isa.Instr`) as a list
    of 128-byte ``bytes``."""
    from rtl.isa import encode
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
        if len(raw) % INSTR_BYTES:
            raise ValueError(f"program length must be a multiple of {INSTR_BYTES}, "
                             f"not {len(raw)}")
        return [raw[i:i + INSTR_BYTES] for i in range(0, len(raw), INSTR_BYTES)]
    out = []
    for x in raw:
        out.append(encode(x) if isinstance(x, Instr) else bytes(x))
        if len(out[-1]) != INSTR_BYTES:
            raise ValueError(f"an instruction must be {INSTR_BYTES} bytes, not {len(out[-1])}")
    return out


class _Channel:
    """One shared AXI data channel (R or W of the core's one master) as a calendar of bursts:
    a burst of ``n`` beats takes the earliest ``n`` free cycles in a row at or after it is
    ready (``book``). Bursts are booked in the simulator's order, which is close to cycle
    order, so a burst booked late still fills an earlier gap.

    Instruction prefetches are booked *soft* (``who`` = ``(stream, index)``): the
    interconnect is round-robin, so a descriptor or data burst asked for later does not wait
    behind every prefetch queued before it. A hard booking ignores the soft bursts that have
    not started by its ready cycle and whose instruction has not issued, and those it overlaps
    are booked again after it (their stream's ``fetch`` entry is updated)."""

    def __init__(self):
        self.st, self.en, self.who = [], [], []     # sorted by start, disjoint

    def _movable(self, k, t):
        w = self.who[k]
        return w is not None and self.st[k] >= t and w[1] >= w[0].pos

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


class _Stream:
    def __init__(self, name, kind, prog=None):
        self.name, self.kind = name, kind
        self.prog = prog or []          # engine: raw instructions; dma: [(desc, enqueue)]
        self.pos = 0
        self.done = False
        self.last_issue = None
        self.retires = []               # engine: retire cycles of the instructions run
        self.pre = {}                   # pos -> ((code, reason, info) or None, Instr or None)
        self.head, self.qsize = 0, None  # ring position of prog[0] (run_queues)
        self.timed_out = False          # set by IsaSim._candidate
        self.issues = []                # issue cycle of each instruction run
        self.fetch = {}                 # pos -> (fetch start, fetch done)

    def pc(self, pos):
        """Queue index (ERR_PC) of program position ``pos``."""
        return pos if not self.qsize else (self.head + pos) % self.qsize

    def finished(self):
        return self.done or self.pos >= len(self.prog)


class IsaSim:
    """The golden ISA simulator (see the module docstring).

    Parameters
    ----------
    cfg : CoreConfig
    dram_bytes : int or bytes
        Size of the DRAM window, or its initial contents.
    dram_base : int
        Address of its first byte.
    timing : Timing or None

    Members
    -------
    mem : golden.dma.Memory
        DRAM window and SBUF.
    psum : np.ndarray of uint8, [partitions, psum_bytes_per_partition]
    sems : list of int
    error : SimError or None
        The first error of :meth:`run`.
    timeline : list of Event
        Every instruction and descriptor run, in the order they ran.
    notifies : list of (engine, index, code)
        ``notify`` instructions and ``irq_on_done`` completions (code -1).
    """

    def __init__(self, cfg: CoreConfig, *, dram_bytes=1 << 16, dram_base=0, timing=None):
        check_config(cfg, "IsaSim")
        self.cfg = cfg
        if isinstance(dram_bytes, (bytes, bytearray)):
            self.mem = gdma.Memory(cfg, dram_base=dram_base, dram=dram_bytes)
        else:
            self.mem = gdma.Memory(cfg, dram_base=dram_base, dram_bytes=dram_bytes)
        self.psum = np.zeros((cfg.partitions, cfg.psum_bytes_per_partition), dtype=np.uint8)
        self.sems = [0] * cfg.semaphores
        self.timing = timing or Timing()
        if not isinstance(self.timing, Timing):
            raise TypeError(f"IsaSim timing must be a Timing, not {self.timing!r}")
        self.error = None
        self.timeline = []
        self.notifies = []
        self.pe_weights = None          # (codes [K, M] uint32, dtype name) of the last load
        self.pe_sparse = None           # (pattern name, tags [K, M]) of a sparse last load
        self._reset_engines()
        self._watchdog = None
        self.engine_state = {}          # hooks' timing state: name -> dict

    def soft_reset(self):
        """The host's ``CTRL.soft_reset``: semaphores to 0, the error and the tensor engine's
        weights cleared; DRAM, SBUF and PSUM kept. (Each :meth:`run` starts its timeline at
        cycle 0 and keeps the semaphores, so a second program after a clean one sees the
        first one's posts unless the host resets.)"""
        self.sems = [0] * self.cfg.semaphores
        self.error = None
        self.pe_weights = None
        self.pe_sparse = None
        self._reset_engines()

    def _reset_engines(self):
        """Engine state a reset (power-on or soft) sets: the vector and scalar engines' SR
        generators (``XorWowLanes(cfg.sr_seed, partitions)``, lane = partition, as their
        ``ConvertFromFP32`` units), the scalar engine's P accumulators (+0) and its loaded
        table (none)."""
        from golden.prng import XorWowLanes
        P = self.cfg.partitions
        self.vec_prng = XorWowLanes(self.cfg.sr_seed, P)
        self.act_prng = XorWowLanes(self.cfg.sr_seed, P)
        self.act_acc = np.zeros(P, np.uint32)
        self.act_loaded = None          # name of the function whose table is loaded

    # --- memory views, for hooks -----------------------------------------------------------
    @property
    def sbuf(self):
        """The SBUF as ``np.uint8 [partitions, sbuf_bytes_per_partition]`` (a writable view)."""
        return np.frombuffer(self.mem.sbuf, dtype=np.uint8).reshape(
            self.cfg.partitions, self.cfg.sbuf_bytes_per_partition)

    @property
    def psum32(self):
        """PSUM as FP32 bits ``[partitions, psum_banks, psum_bank_fp32]`` (a view)."""
        c = self.cfg
        return self.psum.view("<u4").reshape(c.partitions, c.psum_banks, c.psum_bank_fp32)

    def _buf(self, mem):
        return self.sbuf if mem == SBUF else self.psum

    def check_format(self, enc, slot, formats=None):
        """``E_FORMAT`` :class:`Fault` unless ``enc``'s dtype is addressable (an element of
        1, 2 or 4 bytes) and, when ``formats`` is given, one of them."""
        if enc.dtype not in ELEM_BYTES or (formats is not None and enc.dtype not in formats):
            raise Fault(E_FORMAT, _SLOT_INDEX[slot], f"{slot} dtype {enc.dtype} is not enabled "
                                                     f"here")

    def check_ap(self, enc, slot):
        """:class:`golden.ap.AP` of ``enc`` (the AP in ``slot``), or :class:`Fault` with the
        :func:`golden.ap.check` code (``E_FORMAT`` for a dtype no AP can address)."""
        self.check_format(enc, slot)
        ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
                offset=enc.offset, elem_bytes=ELEM_BYTES[enc.dtype], dims=enc.dims)
        r = ap_check(self.cfg, ap)
        if r is not None:
            raise Fault(r[0], _SLOT_INDEX[slot], f"{slot}: {r[2]}")
        return ap

    def read_ap(self, ap):
        """Element codes ``np.uint32 [num_partitions, elements]`` of a checked AP."""
        rows = self._buf(ap.memory)[ap.start_partition:ap.start_partition + ap.num_partitions]
        a = addresses(ap)
        b = rows[:, a[:, None] + np.arange(ap.elem_bytes)].astype(np.uint32)
        return np.bitwise_or.reduce(b << (8 * np.arange(ap.elem_bytes, dtype=np.uint32)), axis=2)

    def write_ap(self, ap, codes):
        """Write element codes ``[num_partitions, elements]`` through a checked AP (a byte
        written twice: the later element wins)."""
        codes = np.asarray(codes).astype(np.uint32)
        a = addresses(ap)
        if codes.shape != (ap.num_partitions, a.size):
            raise ValueError(f"write_ap codes must have shape {(ap.num_partitions, a.size)}, "
                             f"not {codes.shape}")
        buf = self._buf(ap.memory)
        by = ((codes[..., None] >> (8 * np.arange(ap.elem_bytes, dtype=np.uint32)))
              & 0xFF).astype(np.uint8)
        p0 = ap.start_partition
        for j in range(ap.elem_bytes):
            buf[p0:p0 + ap.num_partitions, a + j] = by[..., j]

    @staticmethod
    def footprint(kind, ap):
        """``(kind, mem, (p_lo, p_hi), lo, hi)`` of a checked AP (closed-form extent)."""
        lo, hi = extent(ap)
        return (kind, ap.memory, (ap.start_partition, ap.start_partition + ap.num_partitions - 1),
                lo, hi)

    def default_timing(self, engine, ins, issue):
        """``(start, done)`` of a hooked op without its own timing: it starts when its engine
        is free, occupies it one cycle per element of its widest AP, and completes
        ``vector_latency`` cycles later."""
        st = self.engine_state.setdefault(engine, {"free": 0})
        n = max([_elems(a) for a in ins.aps.values()] or [1])
        start = max(issue, st["free"])
        st["free"] = start + n
        return start, start + n + self.timing.vector_latency

    def stats(self):
        """Figures of the last timed run: ``cycles`` (the last completion), ``busy`` (stream ->
        fraction of ``cycles`` covered by its instructions' ``[start, done)``), ``macs`` (useful
        multiply-adds of the tensor engine) and ``pe_utilization`` = ``macs / (pe_rows x
        pe_cols x cycles)``."""
        cycles = max((e.done for e in self.timeline), default=0)
        busy = {}
        for name in dict.fromkeys(e.stream for e in self.timeline):
            iv = sorted((e.start, e.done) for e in self.timeline if e.stream == name)
            tot, cur = 0, None
            for a, b in iv:
                if cur is None or a > cur[1]:
                    tot += 0 if cur is None else cur[1] - cur[0]
                    cur = [a, b]
                else:
                    cur[1] = max(cur[1], b)
            tot += 0 if cur is None else cur[1] - cur[0]
            busy[name] = tot / cycles if cycles else 0.0
        macs = sum(e.work for e in self.timeline if e.op == "multiply_moving")
        return {"cycles": cycles, "busy": busy, "macs": macs,
                "pe_utilization": macs / (self.cfg.macs * cycles) if cycles else 0.0}

    # --- running -------------------------------------------------------------------------
    def run(self, programs, *, policy="timed", watchdog=None, max_steps=1 << 22):
        """Run ``programs`` (engine name -> program, see :func:`split_program`; a list/tuple
        is in :data:`rtl.isa.ENGINES` order) to the end of every stream, a deadlock or the
        first error. ``policy``: ``"timed"`` or a :class:`random.Random`. ``watchdog``: with
        the timed policy, a wait still unsatisfied that many cycles after the instruction could
        have issued fails with ``E_TIMEOUT`` then (the ``WATCHDOG`` register; ``None``/0: only
        a deadlock does). Returns :attr:`error` (``None`` when the run was clean)."""
        if isinstance(programs, (list, tuple)):
            programs = dict(zip(ENGINES, programs))
        bad = set(programs) - set(ENGINES)
        if bad:
            raise ValueError(f"programs keys must be engines of {ENGINES}, not {sorted(bad)}")
        return self._run({e: split_program(programs.get(e, b"")) for e in ENGINES}, {},
                         policy, watchdog, max_steps)

    def run_queues(self, queues, *, policy="timed", watchdog=None, max_steps=1 << 22):
        """Run the programs the host placed in DRAM queues (docs/core.md §1): ``queues`` maps
        an engine to ``(q_base, q_size, q_tail)`` or ``(q_base, q_size, q_head, q_tail)``
        (``q_head`` 0 after reset). Instructions ``q_head .. q_tail - 1`` (modulo ``q_size``) are
        read from DRAM when the run starts (a program that rewrites its own queue is not
        modelled). A bad queue (``q_size`` 0 or not a power of two, ``q_tail >= q_size``,
        ``q_base`` not a multiple of 128) with work in it is ``E_QUEUE`` at ``q_head``; an
        instruction outside the DRAM window is ``E_AXI`` (info 0) at its queue index. The
        errors' and the timeline's ``index`` is the queue index."""
        bad = set(queues) - set(ENGINES)
        if bad:
            raise ValueError(f"queues keys must be engines of {ENGINES}, not {sorted(bad)}")
        progs, rings = {e: [] for e in ENGINES}, {}
        lo, hi = self.mem.dram_base, self.mem.dram_limit
        for e, q in queues.items():
            if len(q) == 3:
                base, size, tail = q
                head = 0
            else:
                base, size, head, tail = q
            rings[e] = (head, size)
            if head == tail:
                continue
            if size <= 0 or size & (size - 1) or tail >= size or head >= size or base % 128:
                progs[e] = [Fault(E_QUEUE, 0, f"bad queue: base {base:#x}, size {size}, "
                                              f"head {head}, tail {tail}")]
                continue
            for k in range((tail - head) % size):
                a = base + INSTR_BYTES * ((head + k) % size)
                if a < lo or a + INSTR_BYTES > hi:
                    progs[e].append(Fault(E_AXI, 0, f"instruction fetch at {a:#x} outside the "
                                                    f"DRAM window [{lo:#x}, {hi:#x})"))
                    break
                progs[e].append(bytes(self.mem.dram[a - lo:a - lo + INSTR_BYTES]))
        return self._run(progs, rings, policy, watchdog, max_steps)

    def _run(self, progs, rings, policy, watchdog, max_steps):
        if watchdog is not None and (isinstance(watchdog, bool) or not isinstance(watchdog, int)
                                     or not 0 <= watchdog < 1 << 32):
            raise ValueError(f"watchdog must be None or in [0, 2**32 - 1], not {watchdog!r}")
        self._watchdog = watchdog
        if policy != "timed" and not isinstance(policy, _random.Random):
            raise TypeError(f"policy must be 'timed' or a random.Random, not {policy!r}")
        c = self.cfg
        self.error = None
        self.timeline, self.notifies, self.engine_state = [], [], {}
        self._streams = [_Stream(e, "eng", progs[e]) for e in ENGINES]
        for st in self._streams:
            if st.name in rings:
                st.head, st.qsize = rings[st.name]
        self._dma = {}
        for e in range(c.dma_engines):
            for q in range(c.dma_queues):
                s = _Stream(f"dma{e}.q{q}", "dma")
                s.dma = (e, q)
                self._dma[(e, q)] = s
                self._streams.append(s)
        self._dma_free = [0] * c.dma_engines
        # the AXI data channels of the core's one master: instruction fetches, dma_start's
        # descriptor reads and the DMA engines' DRAM reads share R; the DMA's writes use W
        self._axi = {"r": _Channel(), "w": _Channel()}
        self._posts = {}                # sem -> [(visible cycle, inc)]
        self._depth = self.timing.issue_depth or c.issue_depth
        fc = self.timing.fetch_cycles
        self._fetch_cycles = INSTR_BYTES // c.sbuf_word_bytes if fc is None else fc
        self._fetch_depth = self.timing.fetch_depth or c.fetch_depth
        # each sequencer asks for its first fetch_depth instructions at once; the interconnect
        # takes one address beat per manager in turn (round-robin)
        eng = [s for s in self._streams if s.kind == "eng"]
        for i in range(self._fetch_depth):
            for st in eng:
                self._book_fetch(st, i, 0)
        for _ in range(max_steps):
            if self.error is not None:
                break
            pick = self._pick(policy)
            if pick is None:
                self._deadlock()
                break
            s, t = pick
            if s.kind == "eng":
                self._step_engine(s, t)
            else:
                self._step_dma(s, t)
        else:
            raise RuntimeError(f"IsaSim.run: more than max_steps = {max_steps} steps")
        return self.error

    # sems visible at cycle t (timed) or now (random)
    def _sem_ready(self, sem, val, base, timed):
        """Earliest cycle >= base at which sem >= val, or None."""
        if val <= 0:
            return base
        posts = sorted(self._posts.get(sem, []))
        acc = 0
        for tv, inc in posts:
            acc += inc
            if acc >= val:
                return max(base, tv + self.timing.wait_latency) if timed else base
        return None

    def _pre(self, s):
        if s.pos not in s.pre:
            raw = s.prog[s.pos]
            if isinstance(raw, Fault):          # a fetch or queue error (run_queues)
                s.pre[s.pos] = ((raw.code, raw.msg, raw.info), None)
            else:
                err = check_reserved(raw, s.name)
                s.pre[s.pos] = (err + (0,) if err else None, None if err else decode(raw))
        return s.pre[s.pos]

    def _candidate(self, s, timed):
        if s.finished():
            return None
        if s.kind == "dma":
            desc, enq, _after = s.prog[s.pos]
            return max(enq, self._dma_free[s.dma[0]])
        err, ins = self._pre(s)
        t = 0 if s.last_issue is None else s.last_issue + self.timing.seq_issue
        i = s.pos
        if len(s.retires) >= self._depth:
            t = max(t, s.retires[i - self._depth])
        t = max(t, self._fetched(s, i))
        s.timed_out = False
        if err is None and ins.wait is not None and self._sem_ok(ins):
            r = self._sem_ready(ins.wait[0], ins.wait[1], t, timed)
            wd = self._watchdog
            if timed and wd and (r is None or r > t + wd):
                s.timed_out = True              # the watchdog fires first
                return t + wd
            return r
        return t

    def _book_fetch(self, s, i, ready):
        """Book the fetch burst of instruction ``i`` of engine stream ``s``, its address beat
        sent at ``ready`` (and after the burst before it): ``fetch_cycles`` beats on the shared
        R channel, then ``dram_latency``."""
        if not self._fetch_cycles or i in s.fetch or i >= len(s.prog):
            return
        if i:
            ready = max(ready, self._fetched(s, i - 1, start=True) + 1)
        t = ready + self.timing.dram_latency
        st = self._axi["r"].book(t, self._fetch_cycles, (s, i), t)
        s.fetch[i] = (st, st + self._fetch_cycles)

    def _fetched(self, s, i, start=False):
        """Cycle instruction ``i`` of engine stream ``s`` has arrived (``start``: its burst's
        first beat). Its address beat goes out when a slot of the sequencer's ``fetch_depth``
        buffer frees (instruction ``i - fetch_depth`` issued)."""
        if not self._fetch_cycles:
            return 0
        if i not in s.fetch:
            slot = s.issues[i - self._fetch_depth] if i >= self._fetch_depth else 0
            self._book_fetch(s, i, slot)
        return s.fetch[i][0 if start else 1]

    def _sem_ok(self, ins):
        n = self.cfg.semaphores
        return all(x is None or x[0] < n for x in (ins.wait, ins.post))

    def _pick(self, policy):
        timed = policy == "timed"
        cands = []
        for k, s in enumerate(self._streams):
            t = self._candidate(s, timed)
            if t is not None:
                cands.append((t, k, s))
        if not cands:
            return None
        if timed:
            t, _, s = min(cands, key=lambda x: (x[0], x[1]))
        else:
            t, _, s = policy.choice(cands)
        return s, t

    def _deadlock(self):
        for s in self._streams:
            if s.kind == "eng" and not s.finished():
                _, ins = self._pre(s)
                sem, val = ins.wait
                self._fail(E_TIMEOUT, s.name, s.pc(s.pos), sem,
                           f"waits for sem {sem} >= {val}, which stays at {self.sems[sem]} "
                           f"(every stream blocked)")
                return

    def _dma_data(self, t0, desc):
        return _dma_data_impl(self, t0, desc)

    def _fail(self, code, source, index, info, detail):
        if self.error is None:
            self.error = SimError(code, source, index, info, detail)

    def _post(self, sem, inc, visible, source, index):
        mx = (1 << self.cfg.semaphore_bits) - 1
        if self.sems[sem] + inc > mx:
            self._fail(E_SEM, "sem", index, sem, f"post of {inc} by {source}[{index}] overflows "
                                                 f"sem {sem} = {self.sems[sem]}")
            return
        self.sems[sem] += inc
        self._posts.setdefault(sem, []).append((visible, inc))

    def _step_engine(self, s, issue):
        err, ins = self._pre(s)
        i = s.pc(s.pos)
        tm = self.timing
        if err is not None:
            self._fail(err[0], s.name, i, err[2], err[1])
            return
        for what, x in (("wait", ins.wait), ("post", ins.post)):
            if x is not None and x[0] >= self.cfg.semaphores:
                self._fail(E_SEM, s.name, i, x[0], f"{what} on sem {x[0]} >= semaphores = "
                                                   f"{self.cfg.semaphores}")
                return
        if s.timed_out:
            sem, val = ins.wait
            self._fail(E_TIMEOUT, s.name, i, sem, f"waited {self._watchdog} cycles (watchdog) "
                                                  f"for sem {sem} >= {val}, at {self.sems[sem]}")
            return
        s.last_issue = issue
        s.issues.append(issue)
        self._book_fetch(s, s.pos + self._fetch_depth, issue + 1)   # a buffer slot frees
        access, work = [], 0
        if ins.op in ("nop", "notify", "halt"):
            start, done = issue, issue + tm.sync_cycles
            complete = done
            if ins.op == "notify":
                self.notifies.append((s.name, i, ins.imm.get("code", 0)))
        else:
            hook = OP_HOOKS.get(ins.op)
            if hook is None:
                op = OPS_BY_NAME[ins.op]
                raise NotImplementedError(
                    f"golden ISA simulator: opcode {ins.op} (0x{op.code:02x}, engine "
                    f"{op.engine}) has no hook yet; register one with "
                    f"golden.isasim.register_op({ins.op!r}, ...)")
            self.cur_index = i
            try:
                hook.execute(self, ins)
            except Fault as f:
                self._fail(f.code, s.name, i, f.info, f.msg)
                return
            access = (hook.access or _ap_access)(self, ins)
            t = (hook.timing(self, ins, issue) if hook.timing
                 else self.default_timing(s.name, ins, issue))
            start, done = t[0], t[1]
            work = t[2] if len(t) > 2 else 0
            complete = t[3] if len(t) > 3 else done
        retire = max(complete, s.retires[-1] if s.retires else 0)
        s.retires.append(retire)
        self.timeline.append(Event(s.name, i, ins.op, issue, start, done, retire, access,
                                   ins.wait, ins.post, None, work))
        if ins.irq:
            self.notifies.append((s.name, i, -1))
        if ins.post is not None:
            self._post(ins.post[0], ins.post[1], retire + tm.post_latency, s.name, i)
        s.pos += 1
        if ins.op == "halt":
            s.done = True

    def _step_dma(self, s, start):
        desc, _enq, after = s.prog[s.pos]
        n = s.pos
        if desc.count > _MAX_DESC_ELEMS:
            raise NotImplementedError(
                f"golden ISA simulator: descriptor {n} of {s.name} moves {desc.count} elements, "
                f"more than the model simulates ({_MAX_DESC_ELEMS}); the hardware would run it")
        code, info = gdma.run(self.cfg, desc, self.mem, element_ops=False)
        if code:
            _c, _i, msg = gdma.check(self.cfg, desc, dram_base=self.mem.dram_base,
                                     dram_limit=self.mem.dram_limit)
            self._fail(code, s.name, n, info, f"descriptor {n}: {msg}")
            return
        # the DMA engines share the core's one AXI master with the fetches: a descriptor's
        # DRAM reads are bursts (one per contiguous run) on the R channel, its DRAM writes
        # bursts on W; after its check (dma_desc_cycles) the address beats go out back to back
        tm_ = self.timing
        done = self._dma_data(start + tm_.dma_desc_cycles, desc)
        self._dma_free[s.dma[0]] = done
        tm = self.timing
        acc = _desc_access(self.cfg, desc, 0) + _desc_access(self.cfg, desc, 1)
        self.timeline.append(Event(s.name, n, "descriptor", start, start, done, done, acc, None,
                                   (desc.sem, desc.inc) if desc.post else None, after))
        if desc.post:
            self._post(desc.sem, desc.inc, done + tm.post_latency, s.name, n)
        s.pos += 1


def _dma_data_impl(sim, t0, desc):
    """Cycle the data of ``desc`` is all moved when its first address beat can go at ``t0``."""
    lat = sim.timing.dram_latency
    rd = _desc_bursts(sim.cfg, desc, 0) if desc.src_space == gdma.DRAM else None
    wr = _desc_bursts(sim.cfg, desc, 1) if desc.dst_space == gdma.DRAM else None
    ready = []                                  # per row: the cycle its data is in the FIFO
    if rd is not None:
        t = t0
        for n in rd:
            st = sim._axi["r"].book(t + lat, n)
            ready.append(st + n)
            t += 1
    else:                                       # SBUF side: one word per cycle
        side = _desc_bursts(sim.cfg, desc, 0)
        t = t0 + 2
        for n in side:
            t += n
            ready.append(t)
    if wr is None:
        # SBUF destination: written as the words arrive (one per cycle)
        return max(ready[-1] if ready else t0, t0 + sum(_desc_bursts(sim.cfg, desc, 1))) + 1
    end = t0
    for k, n in enumerate(wr):
        r = ready[min(k, len(ready) - 1)] if ready else t0
        st = sim._axi["w"].book(max(r, end), n)
        end = st + n
    return end + lat


def _desc_bursts(cfg, d, side):
    """AXI beats (words) of each contiguous run of side ``side`` (0 source, 1 destination)."""
    W = cfg.sbuf_word_bytes
    rows = d.count // d.slots[0][0]
    es = gdma.ELEM_BYTES[gdma.DTYPES[d.src_dtype if side == 0 else d.dst_dtype]]
    base = d.src if side == 0 else d.dst
    run = d.slots[0][0] * es
    return [-(-((base % W) + run) // W)] * rows


def _elems(a):
    """Elements per partition of an encoded AP (the product of its active ``num``)."""
    n = 1
    for _s, k in a.dims:
        if k == 0:
            break
        n *= k
    return n


def _ap_access(sim, ins, slots=None, elem_bytes=None):
    op = OPS_BY_NAME[ins.op]
    out = []
    for slot, role in op.aps.items():
        enc = ins.aps.get(slot)
        if enc is None or (slots is not None and slot not in slots):
            continue
        eb = (elem_bytes or {}).get(slot, ELEM_BYTES[enc.dtype])
        ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
                offset=enc.offset, elem_bytes=eb, dims=enc.dims)
        out.append(IsaSim.footprint("w" if role in ("dst", "psum") else "r", ap))
    return out


# --- tensor engine hooks: what rtl/core/tensor_decode.py and the SBUF-fed engine do -----------
#
# The TensorDecoder checks the fields first (static errors; their ERR_INFO is the instruction's
# queue index, as the decoder sends it): E_FLAGS, E_FORMAT (the source dtype), E_AP_FORM (a
# dimension beyond cfg.ap_dims), E_SHAPE (the SBUF operand and the PSUM AP: its fields only,
# no PSUM AP is walked). Then the source AP goes to its reader (E_AP_*, ERR_INFO 0) and the
# command to the engine (E_SHAPE / E_FORMAT, e.g. a wide/narrow pair, ERR_INFO 0). ap2 of
# multiply_moving and ap1 of transpose are not read.

def _rtl_elems(enc, nd):
    """The decoder's element count: the product of ``num`` over the ``ap_dims`` slots, a 0
    counting as 1, saturated at ``2**16``."""
    n = 1
    for _s, k in tuple(enc.dims[:nd]):
        n = min(n * (k or 1), 1 << 16)
    return n


#: Detail prefix of the tensor decoder's static faults (before anything is issued).
STATIC_DETAIL = "decoder: "


def _static(sim, code, msg):
    # the tensor decoder's static checks report ERR_INFO 0, like every engine status
    return Fault(code, 0, STATIC_DETAIL + msg)


def _pe_flags(sim, ins, allowed):
    """The decoder's flag and pattern checks: ``allowed`` flags (plus ``sparse`` when the
    config has any pattern) [E_FLAGS]; with ``sparse``, ``sp_n:sp_m`` must be an enabled
    pattern [E_SPARSE_TAG]. Returns the pattern name, or None for a dense instruction."""
    c = sim.cfg
    ok = set(allowed) | ({"sparse"} if c.sparsity else set())
    if ins.flags - ok:
        raise _static(sim, E_FLAGS, f"{ins.op}: flags {sorted(ins.flags - ok)} are not "
                                    f"supported on SBUF-fed instructions")
    if "sparse" not in ins.flags:
        return None
    key = (ins.imm.get("sp_n", 0), ins.imm.get("sp_m", 0))
    for p in c.sparsity:
        if parse_sparse_pattern(p) == key:
            return p
    raise _static(sim, E_SPARSE_TAG, f"{ins.op}: sp_n:sp_m = {key[0]}:{key[1]} is not an "
                                     f"enabled pattern {c.sparsity}")


def sparse_load_dtypes(cfg):
    """The dtypes a sparse ``load_stationary`` takes: the dense formats of 8 or 16 bits (its
    elements are (value, tag) pairs of twice the format's size, docs/isa.md §6)."""
    return tuple(f for f in cfg.formats if cfg.fmt(f).width in (8, 16))


def _tag_bits(cfg):
    """Bits of a position tag in the engine: ``ceil(log2 m)`` of the largest enabled m."""
    return max(((parse_sparse_pattern(p)[1] - 1).bit_length() for p in cfg.sparsity), default=0)


def _pe_src(sim, ins, sparse_load=False):
    """The decoder's checks of the source AP ``ap1`` common to both ops: ``(enc, elements)``."""
    c = sim.cfg
    enc = ins.aps.get("ap1", _ZERO_AP)
    if enc.dtype not in ELEM_BYTES or enc.dtype == "fp4_e2m1" or \
            enc.dtype not in (*c.formats, *(f.name for f in c.mx_element_formats.values())):
        raise _static(sim, E_FORMAT, f"{ins.op}: ap1 dtype {enc.dtype} is not a tensor format")
    if sparse_load and enc.dtype not in sparse_load_dtypes(c):
        raise _static(sim, E_FORMAT, f"sparse load_stationary: ap1 dtype {enc.dtype} must be "
                                     f"one of {sparse_load_dtypes(c)}")
    if any(k for _s, k in enc.dims[c.ap_dims:]):
        raise _static(sim, E_AP_FORM, f"{ins.op}: ap1 uses a dimension beyond ap_dims")
    return enc, _rtl_elems(enc, c.ap_dims)


def _src_ok(sim, enc):
    return enc.mem == SBUF and enc.start == 0 and 1 <= enc.count <= sim.cfg.pe_rows


def _psum_ok(sim, enc, n, last_m):
    """The decoder's PSUM AP check (fields only): PSUM fp32 from partition 0 with ``count`` the
    last load's M, at entry 0 of an existing bank, one dimension ``(1, n)``."""
    c = sim.cfg
    d = tuple(enc.dims) + ((0, 0),) * (4 - len(enc.dims))
    return (enc.mem == PSUM and enc.start == 0 and enc.dtype == "fp32"
            and enc.offset % c.psum_bank_bytes == 0 and enc.offset // c.psum_bank_bytes < c.psum_banks
            and d[0][0] == 1 and d[0][1] == n and not any(k for _s, k in d[1:])
            and enc.count == last_m)


def _last(sim):
    """``(K, M)`` of the last load (0, 0 before any, like the decoder after reset)."""
    return sim.pe_weights[0].shape if sim.pe_weights is not None else (0, 0)


def _src_bytes(ins):
    """The source AP's element bytes: the dtype's; a sparse load's (value, tag) pair twice
    that; a sparse matmul's packed 32-bit lane 4."""
    enc = ins.aps.get("ap1", _ZERO_AP)
    if "sparse" not in ins.flags or enc.dtype not in ELEM_BYTES:
        return ELEM_BYTES.get(enc.dtype, 1)
    return 2 * ELEM_BYTES[enc.dtype] if ins.op == "load_stationary" else 4


def _read_src(sim, enc, elem_bytes=None):
    """The reader's check of an accepted source AP (E_AP_*, ERR_INFO 0) and its elements."""
    ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
            offset=enc.offset, elem_bytes=elem_bytes or ELEM_BYTES[enc.dtype],
            dims=enc.dims[:sim.cfg.ap_dims])
    r = ap_check(sim.cfg, ap)
    if r is not None:
        raise Fault(r[0], 0, f"ap1: {r[2]}")
    return ap


def _dense(sim, dtype, what):
    if dtype not in sim.cfg.formats:
        raise Fault(E_FORMAT, 0, f"{what} dtype {dtype} is an MX element format, not dense")


def _operand(sim, codes, dtype):
    """A tensor operand's codes: the element's low ``width`` bits (the AP reader zero-extends
    an element into the 32-bit lane and the engine takes the format's code; a TF32 element is
    4 bytes holding its 19-bit code, the upper 13 bits are ignored)."""
    return codes & np.uint32((1 << sim.cfg.fmt(dtype).width) - 1)


def _load_stationary(sim, ins):
    pattern = _pe_flags(sim, ins, ())
    enc, m = _pe_src(sim, ins, sparse_load=pattern is not None)
    if not _src_ok(sim, enc) or not 1 <= m <= sim.cfg.pe_cols:
        raise _static(sim, E_SHAPE, f"ap1 must be SBUF from partition 0 with K <= "
                                    f"{sim.cfg.pe_rows} partitions and M <= {sim.cfg.pe_cols} "
                                    f"elements, not {enc}")
    ap = _read_src(sim, enc, _src_bytes(ins))
    _dense(sim, enc.dtype, "ap1")
    if pattern is None:
        sim.pe_weights = (_operand(sim, sim.read_ap(ap), enc.dtype), enc.dtype)
        sim.pe_sparse = None
        return
    # the engine: K whole groups of n rows [E_SHAPE], then each beat's tags of rows < K: every
    # tag < m, the n tags of a group distinct [E_SPARSE_TAG]
    n, mm = parse_sparse_pattern(pattern)
    K = enc.count
    if K % n or not n <= K <= sim.cfg.pe_rows:
        raise Fault(E_SHAPE, 0, f"sparse load_stationary K = {K} must be a multiple of n = {n}")
    pairs = sim.read_ap(ap)
    half = 8 * ELEM_BYTES[enc.dtype]
    vals = pairs & np.uint32((1 << half) - 1)
    tags = (pairs >> np.uint32(half)) & np.uint32((1 << _tag_bits(sim.cfg)) - 1)
    for g in range(K // n):
        t = tags[g * n:(g + 1) * n]
        bad = (t >= mm).any(axis=0) | np.array(
            [len(set(t[:, j].tolist())) < n for j in range(t.shape[1])])
        if bad.any():
            j = int(np.argmax(bad))
            sim.pe_weights = sim.pe_sparse = None
            raise Fault(E_SPARSE_TAG, 0, f"sparse load_stationary: group {g} (rows "
                                         f"{g * n}..{g * n + n - 1}) of column {j}: tags "
                                         f"{t[:, j].tolist()} must be distinct and < {mm}")
    sim.pe_weights = (vals, enc.dtype)
    sim.pe_sparse = (pattern, tags)


def _multiply_moving(sim, ins):
    c = sim.cfg
    pattern = _pe_flags(sim, ins, ("acc",))
    X, n = _pe_src(sim, ins)
    P = ins.aps.get("ap0", _ZERO_AP)
    K, M = _last(sim)
    if (not _src_ok(sim, X) or not 1 <= n <= c.psum_bank_fp32 or not _psum_ok(sim, P, n, M)
            or X.count > K):
        raise _static(sim, E_SHAPE, f"multiply_moving: ap1 SBUF from partition 0 with <= K = "
                                    f"{K} partitions and N <= {c.psum_bank_fp32}, ap0 PSUM fp32 "
                                    f"[0:{M}] at a bank's entry 0 with the one dimension (1, N); "
                                    f"not ap1 {X}, ap0 {P}")
    xap = _read_src(sim, X, _src_bytes(ins))
    w, fs = sim.pe_weights
    loaded = sim.pe_sparse[0] if sim.pe_sparse is not None else None
    if pattern != loaded:
        raise Fault(E_SPARSE_TAG, 0, f"multiply_moving: pattern {pattern} on weights loaded "
                                     f"with pattern {loaded}")
    if pattern is not None:
        _sparse_matmul(sim, ins, X, xap, n, P, pattern)
        return
    _dense(sim, X.dtype, "ap1")
    try:
        check_pair(resolve_dense_format(fs, c), resolve_dense_format(X.dtype, c))
    except ValueError as e:
        raise Fault(E_FORMAT, 0, str(e)) from None
    bank = P.offset // c.psum_bank_bytes
    k = X.count                         # the engine uses the first k rows of the weights
    r = matmul(w[:k], fs, _operand(sim, sim.read_ap(xap), X.dtype), X.dtype, c)
    view = sim.psum32[:M, bank, :n]
    sim.psum32[:M, bank, :n] = psum_update(view, r, "acc" in ins.flags)


def _sparse_matmul(sim, ins, X, xap, n, P, pattern):
    """The engine's sparse matmul (after the decoder's and the reader's checks): k whole
    groups of the load's rows [E_SHAPE], a moving format whose m/n elements share a 32-bit
    lane and dense weights [E_FORMAT], a wide/narrow pair [E_FORMAT]; each lane unpacked into
    its CR logical elements, the chain of ``golden.sparse.matmul_sparse``."""
    c = sim.cfg
    w, fs = sim.pe_weights
    tags = sim.pe_sparse[1]
    sn, sm = parse_sparse_pattern(pattern)
    k = X.count
    if k % sn or k < sn:
        raise Fault(E_SHAPE, 0, f"sparse multiply_moving K = {k} must be a multiple of n = {sn}")
    fx = c.fmt(X.dtype) if X.dtype in c.formats else None
    if fx is None or fx.width * sm > 32 * sn:
        raise Fault(E_FORMAT, 0, f"sparse multiply_moving: {X.dtype} elements do not pack "
                                 f"{sm // sn} to a 32-bit lane")
    try:
        check_pair(resolve_dense_format(fs, c), fx)
    except ValueError as e:
        raise Fault(E_FORMAT, 0, str(e)) from None
    lanes = sim.read_ap(xap)                            # [k, n] 32-bit lanes
    cr, wd = sm // sn, fx.width
    x = np.zeros((k * cr, n), np.uint32)
    for i in range(cr):
        x[i::cr] = (lanes >> np.uint32(i * wd)) & np.uint32((1 << wd) - 1)
    r = matmul_sparse(w[:k], tags[:k], fs, pattern, x, X.dtype, c)
    bank = P.offset // c.psum_bank_bytes
    M = w.shape[1]
    view = sim.psum32[:M, bank, :n]
    sim.psum32[:M, bank, :n] = psum_update(view, r, "acc" in ins.flags)


def _transpose(sim, ins):
    c = sim.cfg
    P = ins.aps.get("ap0", _ZERO_AP)
    K, M = _last(sim)
    if not _psum_ok(sim, P, K, M) or K == 0:
        raise _static(sim, E_SHAPE, f"transpose: ap0 must be PSUM fp32 [0:{M}] at a bank's "
                                    f"entry 0 with the one dimension (1, K = {K}), not {P}")
    if K > c.psum_bank_fp32:
        raise Fault(E_SHAPE, 0, f"transpose K = {K} must be <= psum_bank_fp32 = "
                                f"{c.psum_bank_fp32}")
    w, fs = sim.pe_weights
    bank = P.offset // c.psum_bank_bytes
    sim.psum32[:M, bank, :K] = transpose(w, fs, c)


def _pe_state(sim):
    return sim.engine_state.setdefault("pe", {"free": 0, "dispatch": 0, "load_ready": None,
                                              "swap": None})


def _passes(sim, *dtypes):
    """Issues per column: ``cfg.fp32_passes`` with an FP32 operand (docs/tensor-engine.md)."""
    return sim.cfg.fp32_passes if "fp32" in dtypes else 1


def _t_load(sim, ins, issue):
    st = _pe_state(sim)
    M = _elems(ins.aps["ap1"]) * _passes(sim, ins.aps["ap1"].dtype)
    start = max(issue, st["dispatch"])
    if st["swap"] is not None:
        # the matmul that swapped the last weights in is dispatched at ``swap``, issues its
        # first beat a cycle later, and the guard counts from the cycle after that: so a tile
        # shorter than the load and the guard is load-bound (docs/tensor-engine.md)
        start = max(start, st["swap"] + pe_swap_guard(sim.cfg) + 2)
    st["load_ready"] = start + M
    return start, start + M, 0, _pe_complete(sim, ins, start, start + M)


def _pe_complete(sim, ins, dispatch, done):
    """When a tensor instruction completes to its sequencer (docs/core.md §4): at the dispatch
    of its command, unless it posts or raises an interrupt or is a sparse load (its tags are
    checked beat by beat); then only when the engine has drained (its ``done``), and the next
    matmul dispatches after that drain."""
    drains = ins.post is not None or ins.irq or (
        ins.op == "load_stationary" and "sparse" in ins.flags)
    if not drains:
        return dispatch
    st = _pe_state(sim)
    st["free"] = max(st["free"], done)
    return done


def _t_mm(sim, ins, issue):
    st = _pe_state(sim)
    if ins.op == "multiply_moving":
        n = _elems(ins.aps["ap1"])
        cols = n * _passes(sim, ins.aps["ap1"].dtype, sim.pe_weights[1])
    else:
        n = cols = sim.pe_weights[0].shape[0]
    start = max(issue, st["free"])
    if st["load_ready"] is not None:
        start = max(start, st["load_ready"] + 1)
        st["load_ready"] = None
        st["swap"] = start
    st["dispatch"] = start
    st["free"] = start + cols
    K, M = sim.pe_weights[0].shape
    if ins.op == "multiply_moving":
        K = ins.aps["ap1"].count
    done = start + cols + pe_latency(sim.cfg)
    return (start, done, K * M * n if ins.op == "multiply_moving" else 0,
            _pe_complete(sim, ins, start, done))


def _pe_access(sim, ins):
    """The source AP read (not ap2 of a matmul, not ap1 of a transpose), the PSUM AP
    written."""
    return _ap_access(sim, ins, {"load_stationary": ("ap1",), "multiply_moving": ("ap0", "ap1"),
                                 "transpose": ("ap0",)}[ins.op],
                      {"ap1": _src_bytes(ins)} if "sparse" in ins.flags else None)


register_op("load_stationary", _load_stationary, _t_load, _pe_access)
register_op("multiply_moving", _multiply_moving, _t_mm, _pe_access)
register_op("transpose", _transpose, _t_mm, _pe_access)


# --- sync engine: dma_start -------------------------------------------------------------------

def _dma_start(sim, ins):
    c = sim.cfg
    e, q = ins.imm.get("engine", 0), ins.imm.get("queue", 0)
    n, addr = ins.imm.get("count", 0), ins.imm.get("desc_addr", 0)
    if addr % gdma.DESC_BYTES:
        raise Fault(E_DESC, 0, f"desc_addr {addr:#x} must be a multiple of {gdma.DESC_BYTES}")
    if e >= c.dma_engines or q >= c.dma_queues:
        raise Fault(E_DESC, 0, f"DMA engine {e} / queue {q} must be < {c.dma_engines} / "
                               f"{c.dma_queues}")
    lo, hi = addr, addr + n * gdma.DESC_BYTES
    if n and (lo < sim.mem.dram_base or hi > sim.mem.dram_limit):
        raise Fault(E_AXI, 0, f"descriptors [{lo:#x}, {hi:#x}) outside the DRAM window "
                              f"[{sim.mem.dram_base:#x}, {sim.mem.dram_limit:#x})")
    raw = bytes(sim.mem.dram[lo - sim.mem.dram_base:hi - sim.mem.dram_base])
    sim._pending_descs = [gdma.Descriptor.unpack(raw[k * 64:(k + 1) * 64]) for k in range(n)]


def _t_dma_start(sim, ins, issue):
    # one 64-byte burst per descriptor on the shared R channel, read and queued one at a time
    n = ins.imm.get("count", 0)
    beats = -(-gdma.DESC_BYTES // sim.cfg.sbuf_word_bytes)
    done = issue + 1
    for _ in range(n):
        done = sim._axi["r"].book(done + sim.timing.dram_latency, beats) + beats + 1
    s = sim._dma[(ins.imm.get("engine", 0), ins.imm.get("queue", 0))]
    # the dma_start's own Event is the next one on the timeline
    s.prog.extend((d, done, len(sim.timeline)) for d in sim._pending_descs)
    sim._pending_descs = []
    return issue, done


def _dma_start_access(sim, ins):
    addr, n = ins.imm.get("desc_addr", 0), ins.imm.get("count", 0)
    return [("r", "dram", None, addr, addr + n * gdma.DESC_BYTES - 1)] if n else []


register_op("dma_start", _dma_start, _t_dma_start, _dma_start_access)


# --- vector and scalar engines (docs/vector.md, docs/scalar.md; the decoders of
# --- rtl/core/engine_decode.py) ------------------------------------------------------------------
#
# Both decoders map the 128-byte instruction field for field onto the engines' decoded
# instructions, and report an AP with a dimension beyond ``cfg.ap_dims`` (any of the three
# slots) as E_AP_FORM before the engine sees the instruction. They do not drive the completion's
# ``info``, so ERR_INFO is 0 for every vector and scalar error.

def decoder_form(sim, ins, slots=("ap0", "ap1", "ap2")):
    """The decoders' own check: E_AP_FORM (info 0) for an AP of ``slots`` (the ones the
    instruction uses) using a dimension slot ``>= cfg.ap_dims``."""
    nd = sim.cfg.ap_dims
    for slot in slots:
        enc = ins.aps.get(slot)
        if enc is not None and any(n for _s, n in enc.dims[nd:]):
            raise Fault(E_AP_FORM, 0, f"{slot} uses a dimension beyond ap_dims = {nd}")


def _gap(sim, enc, elem_bytes=4):
    """:class:`golden.ap.AP` of an encoded AP as the decoder drives the AP generator: the
    ``cfg.ap_dims`` first dimensions (``elem_bytes``: a placeholder when the engine sets it
    from the dtype)."""
    enc = enc or _ZERO_AP
    return AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
              offset=enc.offset, elem_bytes=elem_bytes, dims=enc.dims[:sim.cfg.ap_dims])


def _dcode(enc):
    from rtl.isa import dtype_code
    return dtype_code((enc or _ZERO_AP).dtype)


def vec_instr(sim, ins):
    """The :class:`golden.vector.VecInstr` the VectorDecoder gives for ``ins``: ``ap0`` /
    ``ap1`` / ``ap2`` -> ``dst`` / ``src0`` / ``src1`` (an all-zero slot: memory code 0), the
    opcode, flag ``sr``, ``op0``/``op1`` (their low 4 bits), ``ctl`` bits 0-3 (rev0, rev1, sel0,
    sel1), ``imm0``/``imm1`` (FP32 bits)."""
    from golden.vector import VecInstr
    g = ins.aps.get
    imm = ins.imm
    ctl = imm.get("ctl", 0)

    def bits(v):
        return int(v) if isinstance(v, int) else int(np.float32(v).view(np.uint32))
    return VecInstr(opcode=OPS_BY_NAME[ins.op].code, dst=_gap(sim, g("ap0")),
                    src0=_gap(sim, g("ap1")), src1=_gap(sim, g("ap2")),
                    dst_dtype=_dcode(g("ap0")), src0_dtype=_dcode(g("ap1")),
                    src1_dtype=_dcode(g("ap2")), sr=int("sr" in ins.flags),
                    op0=imm.get("op0", 0) & 15, op1=imm.get("op1", 0) & 15,
                    rev0=ctl & 1, rev1=ctl >> 1 & 1, sel0=ctl >> 2 & 1, sel1=ctl >> 3 & 1,
                    imm0=bits(imm.get("imm0", 0)), imm1=bits(imm.get("imm1", 0)))


def _vec_used(vi):
    """``[(role, AP with its dtype's element size, dtype)]`` of the APs the engine touches."""
    from golden import vector as gv
    used = [("w", vi.dst, vi.dst_dtype)]
    if gv._uses_src0(vi):
        used.append(("r", vi.src0, vi.src0_dtype))
    if gv._uses_src1(vi):
        used.append(("r", vi.src1, vi.src1_dtype))
    return used


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


def _vec_execute(sim, ins):
    from golden import vector as gv
    decoder_form(sim, ins)
    vi = vec_instr(sim, ins)
    code = gv.check(sim.cfg, vi)
    if code:
        raise Fault(code, 0, f"{ins.op}: vector engine status {ERROR_NAMES.get(code, code)} "
                             f"({vi})")
    mem = gv.VecMemory.__new__(gv.VecMemory)       # the simulator's arrays, no copy
    mem._cfg, mem.sbuf, mem.psum = sim.cfg, sim.sbuf, sim.psum
    code = gv.run(sim.cfg, vi, mem, sim.vec_prng)
    assert code == 0, code


def _vec_elems(vi):
    """Elements per lane the engine streams (the source pattern; MEMSET/IOTA: the
    destination's)."""
    from golden import vector as gv
    ap = vi.src0 if gv._uses_src0(vi) else vi.dst
    return ap.count


#: Vector opcode -> ``(timing, cycles per element)``: extra cycles beyond the elements per lane
#: (a :class:`Timing` field name) and the element rate (``None``: 1, or the most streams on
#: one SBUF bank or on the PSUM port; an int: that rate, the operands never streaming
#: together). A new golden.vector opcode with the usual timing needs no entry.
VEC_TIMING = {
    "tensor_reduce": ("vector_reduce_overhead", None),
    "max8": ("vector_max8_overhead", None),
    "tensor_tensor_scan": ("vector_scan_overhead", "scan"),
    "bn_stats": ("vector_bn_stats_overhead", None),
    "bn_aggr": ("vector_bn_aggr_overhead", None),
    "block_transpose": ("vector_transpose_overhead", None),
    "find_index8": ("vector_find_index8_overhead", 1),   # the 8 values first, then the data
}


def _vec_timing(sim, ins, issue):
    vi = vec_instr(sim, ins)
    over, rate = VEC_TIMING.get(ins.op, ("vector_overhead", None))
    c = sim.cfg
    if rate == "scan":                      # each result feeds the next element (serial)
        rate = 2 + 2 * (c.mul_stages + c.add_stages) + 1
    elif rate is None:
        rate = port_sharing(c, [ap for _k, ap, _d in _vec_used(vi)])
    st = sim.engine_state.setdefault("dve", {"free": 0})
    start = max(issue, st["free"])
    done = start + getattr(sim.timing, over) + rate * _vec_elems(vi)
    st["free"] = done                       # one instruction at a time (docs/vector.md)
    return start, done


def _vec_access(sim, ins):
    from golden.vector import elem_bytes_of
    import dataclasses
    vi = vec_instr(sim, ins)
    return [IsaSim.footprint(k, dataclasses.replace(ap, elem_bytes=elem_bytes_of(sim.cfg, dt)))
            for k, ap, dt in _vec_used(vi)]


def register_vector_ops():
    """Register the vector hooks for every opcode of ``golden.vector.OPCODES`` that
    :mod:`rtl.isa` gives to ``dve`` (so a new vector opcode in both tables plugs in here)."""
    from golden import vector as gv
    for code, name in gv.OPCODES.items():
        op = OPS_BY_CODE.get(code)
        if op is not None and op.engine == "dve" and op.name == name:
            register_op(name, _vec_execute, _vec_timing, _vec_access)


# scalar (activation) engine

def act_instr(sim, ins):
    """The :class:`golden.activation.ActInstr` the ScalarDecoder gives for ``ins``: ``ap0`` /
    ``ap1`` -> ``dst`` / ``src``; ``ap2`` -> the bias AP when immediate ``bias_ap`` bit 0 is
    set and the scale AP when ``scale_ap`` bit 0 is (both: the same AP for both), ``func``,
    ``reduce_cmd`` (its low 2 bits), ``scale``/``bias`` (FP32 bits), flag ``sr``."""
    from golden import activation as ga
    g = ins.aps.get
    imm = ins.imm

    def bits(v, default):
        if v is None:
            return 0 if default is None else default
        return int(v) if isinstance(v, int) else int(np.float32(v).view(np.uint32))

    def eb(enc):
        return ELEM_BYTES.get((enc or _ZERO_AP).dtype, 4)
    a2 = _gap(sim, g("ap2"), eb(g("ap2")))
    return ga.ActInstr(opcode=OPS_BY_NAME[ins.op].code, func=imm.get("func", 0),
                       dst=_gap(sim, g("ap0"), eb(g("ap0"))),
                       src=_gap(sim, g("ap1"), eb(g("ap1"))),
                       dst_dtype=_dcode(g("ap0")), src_dtype=_dcode(g("ap1")),
                       scale=bits(imm.get("scale"), None), bias=bits(imm.get("bias"), None),
                       scale_ap=a2 if imm.get("scale_ap", 0) & 1 else None,
                       bias_ap=a2 if imm.get("bias_ap", 0) & 1 else None,
                       scale_dtype=_dcode(g("ap2")), bias_dtype=_dcode(g("ap2")),
                       reduce_cmd=imm.get("reduce_cmd", 0) & 3, sr="sr" in ins.flags)


def act_slots(ins):
    """The AP slots the ScalarDecoder checks: ``act_table_load`` ap1; ``activation`` ap0, ap1
    and ap2 when it is the bias or scale AP (bit 0 of ``bias_ap`` / ``scale_ap``)."""
    if ins.op == "act_table_load":
        return ("ap1",)
    per = (int(ins.imm.get("bias_ap", 0)) | int(ins.imm.get("scale_ap", 0))) & 1
    return ("ap0", "ap1", "ap2") if per else ("ap0", "ap1")


def _act_execute(sim, ins):
    from golden import activation as ga
    from golden.ap import E_OK
    decoder_form(sim, ins, act_slots(ins))
    ai = act_instr(sim, ins)
    loaded = sim.act_loaded
    if ai.opcode == ga.OP_ACTIVATION and loaded is None:
        raise Fault(E_OPCODE, 0, f"{ins.op}: no table loaded (act_table_load first)")
    code = ga.check_instr(sim.cfg, ai, loaded)
    if code != E_OK:
        raise Fault(code, 0, f"{ins.op}: scalar engine status {ERROR_NAMES.get(code, code)} "
                             f"(loaded table: {loaded})")
    rand = ga.sr_words(ai, sim.act_prng)
    code = ga.execute(sim.cfg, ai, {SBUF: sim.sbuf, PSUM: sim.psum}, sim.act_acc, rand=rand,
                      loaded=loaded)
    assert code == E_OK, code


def table_words(tab, parts=1):
    """What ``act_table_load`` reads through its fp32 AP ``ap1`` over ``parts`` partitions, as
    ``[parts, cols]`` words (element ``j`` of partition ``p`` is stream word ``j * parts + p``):
    ``golden.activation.table_words`` (the 10 header words, the 128 binade-map words, 9 words
    per segment), padded with zero segments to fill whole columns (the engine takes whole
    segments only; the map never selects the padding). A ``[1, n]`` array for one partition."""
    from golden.activation import NCOEF, table_words as stream
    from rtl.config import ACT_BINADES
    w = stream(tab)
    head, seg = 10 + 2 * ACT_BINADES, NCOEF + 2
    cols = -(-len(w) // parts)
    while (parts * cols - head) % seg:
        cols += 1
    img = np.zeros(parts * cols, np.uint32)
    img[:len(w)] = w
    return img.reshape(cols, parts).T


def _act_table_load(sim, ins):
    """``act_table_load`` as the engine runs it (``golden.activation.table_load``: the word
    stream over the AP's partitions, the image checks); a bad image leaves no function."""
    from golden import activation as ga
    decoder_form(sim, ins, act_slots(ins))
    ai = act_instr(sim, ins)
    status, image = ga.table_load(sim.cfg, ai, {SBUF: sim.sbuf, PSUM: sim.psum})
    if image is not None:
        sim.act_loaded = ga.FUNCTIONS[ai.func] if status == ga.E_OK else ""
    if status != ga.E_OK:
        raise Fault(status, 0, f"act_table_load: scalar engine status "
                               f"{ERROR_NAMES.get(status, status)}")


def _act_pipe(cfg):
    L = cfg.mul_stages + cfg.add_stages
    return 2 + L + 12 * L + 4 + 3


def _act_timing(sim, ins, issue):
    # the engine overlaps instructions (docs/scalar.md §5): the next one's elements follow the
    # previous one's into the pipeline, unless it reads what the previous one writes (then it
    # waits for that write) or it is a table load (the pipeline drains first)
    st = sim.engine_state.setdefault("act", {"free": 0, "done": 0, "dst": None})
    over = sim.timing.act_overhead
    over = _act_pipe(sim.cfg) + 14 if over is None else over
    if ins.op == "act_table_load":          # drain the pipeline, then one word per cycle
        start = max(issue, st["done"])
        n = _elems(ins.aps["ap1"])
        done = start + _act_pipe(sim.cfg) + n * ins.aps["ap1"].count
        st.update(free=done, done=done, dst=None)
        return start, done
    ai = act_instr(sim, ins)
    start = max(issue, st["free"])
    reads = [ai.src] + [a for a in (ai.scale_ap, ai.bias_ap) if a is not None]
    if st["dst"] is not None and any(_overlap(st["dst"], IsaSim.footprint("r", a))
                                     for a in reads):
        start = max(start, st["done"])
    n = ai.src.count
    rate = port_sharing(sim.cfg, [ai.dst, *reads])
    st["free"] = start + rate * n
    done = start + over + rate * n
    st["done"] = max(st["done"], done)
    st["dst"] = IsaSim.footprint("w", ai.dst)
    return start, done


def _overlap(a, b):
    """Two footprints ``(kind, mem, parts, lo, hi)`` share a byte range of one memory."""
    return a[1] == b[1] and a[3] <= b[4] and b[3] <= a[4]


def _act_access(sim, ins):
    if ins.op == "act_table_load":
        return [IsaSim.footprint("r", _gap(sim, ins.aps["ap1"], 4))]
    ai = act_instr(sim, ins)
    out = [IsaSim.footprint("w", ai.dst), IsaSim.footprint("r", ai.src)]
    for ap in {id(a): a for a in (ai.scale_ap, ai.bias_ap) if a is not None}.values():
        out.append(IsaSim.footprint("r", ap))
    return out


def register_scalar_ops():
    """Register ``act_table_load`` and the scalar opcodes ``golden.activation.execute`` runs
    (ACTIVATION, and COPY once :mod:`rtl.isa` gives it a row)."""
    from golden import activation as ga
    for op in OPCODES_ALL:
        if op.engine != "act":
            continue
        if op.code == ga.OP_ACT_TABLE_LOAD:
            register_op(op.name, _act_table_load, _act_timing, _act_access)
        elif op.code in (ga.OP_ACTIVATION, ga.OP_COPY):
            register_op(op.name, _act_execute, _act_timing, _act_access)


register_vector_ops()
register_scalar_ops()


# --- races ------------------------------------------------------------------------------------

def _overlap(a, b):
    """Do two footprints ``(kind, mem, parts, lo, hi)`` meet, one writing? ``parts`` is a
    partition range with ``lo``/``hi`` bytes in each partition, or ``None`` for DRAM."""
    if a[1] != b[1] or (a[0] == "r" and b[0] == "r"):
        return False
    if a[2] is not None and (a[2][1] < b[2][0] or b[2][1] < a[2][0]):
        return False
    return not (a[4] < b[3] or b[4] < a[3])


_DRAM_RUNS_MAX = 1 << 16      # elements: a larger DRAM side's footprint is its extent


def _desc_addrs(d, side):
    """The first byte of every element of one side of a descriptor (``int64``, walk order)."""
    a = np.array([d.src if side == 0 else d.dst], dtype=np.int64)
    for num, ss, ds in reversed(d.slots):
        a = (a[:, None] + (ss if side == 0 else ds) * np.arange(num, dtype=np.int64)).ravel()
    return a


def _desc_access(cfg, d, side):
    """Footprints of one side of a descriptor: its DRAM byte runs (the extent beyond
    ``_DRAM_RUNS_MAX`` elements), or one per SBUF partition."""
    kind = "r" if side == 0 else "w"
    space = d.src_space if side == 0 else d.dst_space
    es = gdma.ELEM_BYTES[gdma.DTYPES[d.src_dtype if side == 0 else d.dst_dtype]]
    if space == gdma.DRAM:
        if np.prod([num for num, _, _ in d.slots], dtype=np.int64) > _DRAM_RUNS_MAX:
            return [(kind, "dram", None, *gdma.extent(d, side))]
        a = np.unique(_desc_addrs(d, side))
        # the byte runs: a new run where an element starts past the previous one's end
        cut = np.flatnonzero(a[1:] > a[:-1] + es) + 1
        return [(kind, "dram", None, int(a[i]), int(a[j - 1]) + es - 1)
                for i, j in zip(np.r_[0, cut], np.r_[cut, len(a)])]
    a = _desc_addrs(d, side)
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
        if any(_overlap(x, y) for x in ev[i].access for y in ev[j].access):
            races.append((ev[i], ev[j]))
    return races
