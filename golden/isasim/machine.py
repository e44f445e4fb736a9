# SPDX-License-Identifier: Apache-2.0
"""The golden ISA simulator's machine: the streams, the scheduler and the state
(:class:`IsaSim`; the package docstring describes it)."""

from __future__ import annotations

import random as _random
from dataclasses import dataclass, field

import numpy as np

from golden import dma as gdma
from golden.ap import AP, ELEM_BYTES, SBUF, addresses
from golden.ap import check as ap_check
from golden.isasim.errors import E_AXI, E_FORMAT, E_QUEUE, E_SEM, E_TIMEOUT, Fault, SimError
from golden.isasim.hooks import OP_HOOKS, SLOT_INDEX, ap_access, elems_per_partition, footprint
from golden.isasim.races import desc_access
from golden.isasim.sync_engine import dma_data
from golden.isasim.timing import AxiChannel, DmaEngineTiming, Timing
from rtl.config import CoreConfig, check_config
from rtl.isa import ENGINES, INSTR_BYTES, OPS_BY_NAME, Instr, check_reserved, decode

__all__ = ["Event", "IsaSim", "Stream", "split_program", "MAX_DESC_ELEMS"]

#: Largest descriptor (elements) the model enumerates.
MAX_DESC_ELEMS = 1 << 24


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


class Stream:
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
        self.ring, self.rank = None, 0  # the collective ring (golden.collective.multicore)

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
        table (none), each DMA engine's SR stream (:func:`golden.dma.sr_stream`)."""
        from golden.prng import XorWowLanes
        P = self.cfg.partitions
        self.vec_prng = XorWowLanes(self.cfg.sr_seed, P)
        self.act_prng = XorWowLanes(self.cfg.sr_seed, P)
        self.act_acc = np.zeros(P, np.uint32)
        self.act_loaded = None          # name of the function whose table is loaded
        self.dma_prng = [gdma.sr_stream(self.cfg, e) for e in range(self.cfg.dma_engines)]

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
            raise Fault(E_FORMAT, SLOT_INDEX[slot], f"{slot} dtype {enc.dtype} is not enabled "
                                                     f"here")

    def check_ap(self, enc, slot):
        """:class:`golden.ap.AP` of ``enc`` (the AP in ``slot``), or :class:`Fault` with the
        :func:`golden.ap.check` code (``E_FORMAT`` for a dtype no AP can address)."""
        self.check_format(enc, slot)
        ap = AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
                offset=enc.offset, elem_bytes=ELEM_BYTES[enc.dtype], dims=enc.dims)
        r = ap_check(self.cfg, ap)
        if r is not None:
            raise Fault(r[0], SLOT_INDEX[slot], f"{slot}: {r[2]}")
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

    #: ``footprint(kind, ap)``: :func:`golden.isasim.hooks.footprint`.
    footprint = staticmethod(footprint)

    def default_timing(self, engine, ins, issue):
        """``(start, done)`` of a hooked op without its own timing: it starts when its engine
        is free, occupies it one cycle per element of its widest AP, and completes
        ``vector_latency`` cycles later."""
        st = self.engine_state.setdefault(engine, {"free": 0})
        n = max([elems_per_partition(a) for a in ins.aps.values()] or [1])
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
        self._streams = [Stream(e, "eng", progs[e]) for e in ENGINES]
        for st in self._streams:
            if st.name in rings:
                st.head, st.qsize = rings[st.name]
        self.dma_streams = {}
        for e in range(c.dma_engines):
            for q in range(c.dma_queues):
                s = Stream(f"dma{e}.q{q}", "dma")
                s.dma = (e, q)
                self.dma_streams[(e, q)] = s
                self._streams.append(s)
        self._dma_free = [0] * c.dma_engines
        self._dma_timing = [DmaEngineTiming(self.timing) for _ in range(c.dma_engines)]
        # the AXI data channels of the core's one master: instruction fetches, dma_start's
        # descriptor reads and the DMA engines' DRAM reads share R; the DMA's writes use W
        self.axi = {"r": AxiChannel(), "w": AxiChannel()}
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
        sent at ``ready``: ``fetch_cycles`` beats on the shared R channel, after
        ``dram_latency`` (the sequencer keeps up to ``fetch_depth`` reads in flight, so it
        does not wait for the burst before)."""
        if not self._fetch_cycles or i in s.fetch or i >= len(s.prog):
            return
        t = ready + self.timing.dram_latency
        st = self.axi["r"].book(t, self._fetch_cycles, (s, i), t)
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
            self.cur_issue = issue      # the collective engine's arrival cycle
            try:
                hook.execute(self, ins)
            except Fault as f:
                self._fail(f.code, s.name, i, f.info, f.msg)
                return
            access = (hook.access or ap_access)(self, ins)
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
        desc, enq, after = s.prog[s.pos]
        n = s.pos
        if desc.count > MAX_DESC_ELEMS:
            raise NotImplementedError(
                f"golden ISA simulator: descriptor {n} of {s.name} moves {desc.count} elements, "
                f"more than the model simulates ({MAX_DESC_ELEMS}); the hardware would run it")
        # the DMA engines have the element path (casts, add/max/min, stochastic rounding from
        # each engine's own stream) exactly when the core builds it: cfg.dma_element_ops
        eo = self.cfg.dma_element_ops
        code, info = gdma.run(self.cfg, desc, self.mem, element_ops=eo,
                              rand=self.dma_prng[s.dma[0]])
        if code:
            _c, _i, msg = gdma.check(self.cfg, desc, dram_base=self.mem.dram_base,
                                     dram_limit=self.mem.dram_limit, element_ops=eo)
            self._fail(code, s.name, n, info, f"descriptor {n}: {msg}")
            return
        # the DMA engines share the core's one AXI master with the fetches: a descriptor's
        # DRAM reads are bursts (one per contiguous run) on the R channel, its DRAM writes
        # bursts on W; after its check (dma_desc_cycles) the address beats go out back to back
        # (descriptors overlap: DmaEngineTiming, docs/dma.md §4.1)
        et = self._dma_timing[s.dma[0]]
        copy = not gdma.elementwise(desc)
        overlap = copy and gdma.DRAM in (desc.src_space, desc.dst_space)
        key = (s.dma[1], desc.src_space)
        t0 = et.first_request(enq, start, overlap, key)
        times = {}
        done = dma_data(self, t0, desc, write_free=et.write_end, times=times)
        done, self._dma_free[s.dma[0]] = et.retire(times, done, copy, key)
        tm = self.timing
        acc = desc_access(self.cfg, desc, 0) + desc_access(self.cfg, desc, 1)
        self.timeline.append(Event(s.name, n, "descriptor", start, start, done, done, acc, None,
                                   (desc.sem, desc.inc) if desc.post else None, after))
        if desc.post:
            self._post(desc.sem, desc.inc, done + tm.post_latency, s.name, n)
        s.pos += 1

