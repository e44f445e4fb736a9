# SPDX-License-Identifier: Apache-2.0
"""One engine's instruction sequencer (docs/architecture.md §8.1, §11.3; docs/core.md).

It fetches the engine's queue from DRAM over an AXI4 read channel, rejects malformed
instructions (``E_OPCODE``, the rule of :func:`rtl.isa.check_reserved`, built from the same
tables), waits on semaphores with a watchdog, issues instructions in order to the engine and
retires them in order, posting their semaphores at completion.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.config import CoreConfig, check_config
from rtl.dma.axi import AXI4Signature, BURST_INCR, RESP_OKAY
from rtl.isa import E_AXI, E_OPCODE, E_QUEUE, E_SEM, E_TIMEOUT, ERROR_BITS

__all__ = ["Sequencer", "E_OPCODE", "E_SEM", "E_TIMEOUT", "E_AXI", "E_QUEUE",
           "QUEUE_INDEX_BITS"]

#: Width of queue indices (``Q_SIZE`` up to 2**15 instructions, ``Q_HEAD``, ``Q_TAIL``).
QUEUE_INDEX_BITS = 16
_INSTR_BITS = 8 * isa.INSTR_BYTES


def opcode_check(m, raw, engine):
    """``(ok, local)``: ``ok`` high when ``raw`` (an ``INSTR_BYTES * 8``-bit value) is a
    well-formed instruction for ``engine`` (:func:`rtl.isa.check_reserved` in gates, from the
    same tables); ``local`` high for the opcodes every engine runs itself (``nop``, ``notify``,
    ``halt``)."""
    ok, local = Signal(name="op_ok"), Signal(name="op_local")
    opcode, flags = isa.header_bits(raw, "opcode"), isa.header_bits(raw, "flags")
    ctl = isa.header_bits(raw, "ctl")
    ctl_mask = sum(1 << b for b in isa.CTL_BITS.values())
    header_ok = (isa.header_bits(raw, "reserved") == 0) & ((ctl & ~ctl_mask & 0xFF) == 0)
    ap_res = next(f for f in isa.AP_FIELDS if f.name == "reserved")
    imm = raw[8 * isa.IMM_BYTE:]
    with m.Switch(opcode):
        for op in isa.OPCODES:
            if op.engine not in (None, engine):
                continue
            with m.Case(op.code):
                flag_mask = sum(1 << isa.FLAG_BITS[f] for f in op.flags)
                imm_mask = sum(((1 << f.width) - 1) << f.lsb for f in op.imm)
                conds = [header_ok, (flags & ~flag_mask & 0xFF) == 0,
                         (imm & Const(~imm_mask & ((1 << len(imm)) - 1), len(imm))) == 0]
                for slot, byte in isa.AP_SLOTS.items():
                    ap = raw[8 * byte:8 * (byte + isa.AP_BYTES)]
                    if slot in op.aps:
                        conds.append(ap_res.of(ap) == 0)
                    else:
                        conds.append(ap == 0)
                m.d.comb += [ok.eq(Cat(*conds).all()), local.eq(op.engine is None)]
    return ok, local


class Sequencer(wiring.Component):
    """Fetches, checks, waits, issues and retires one engine's instruction stream.

    **Queue** (architecture §8.1, §11.1). The queue is a ring of ``q_size`` 128-byte
    instructions at ``q_base`` in DRAM (``q_base`` a multiple of 128, ``q_size`` a power of two;
    ``q_tail`` is the host's doorbell: the index after the last instruction written). While
    ``run`` is high and ``q_head != q_tail`` the sequencer fetches the instruction at ``q_head``
    (one INCR burst of ``128 / (axi_data_bits / 8)`` beats, which cannot cross 4 KiB) and
    advances ``q_head`` modulo ``q_size``: slots before ``q_head`` are free for the host. Up to
    ``cfg.fetch_depth`` instructions are fetched ahead. A bad queue (``q_size`` 0 or not a power
    of two, ``q_tail >= q_size``, ``q_base`` not a multiple of 128) is ``E_QUEUE``.

    **Per instruction, in order**: a read error (RRESP not OKAY) is ``E_AXI`` (``err_info`` =
    the response); a malformed instruction is ``E_OPCODE``; a ``wait_sem`` or ``post_sem`` (of an
    enabled wait or post) ``>= cfg.semaphores`` is ``E_SEM`` (``err_info`` = it); with ``ctl.wait_en`` the
    sequencer reads ``sem[wait_sem]`` until it is ``>= wait_val`` (one read per cycle; the
    ``watchdog`` input bounds the wait: ``E_TIMEOUT`` after that many cycles, 0 = unbounded;
    ``err_info`` = the semaphore). Then an engine instruction is issued on ``issue`` (the raw
    bits and its queue index) and ``nop``/``notify``/``halt`` are run locally. Up to
    ``cfg.issue_depth`` instructions are issued and not retired.

    **Retire, in order**: an engine instruction retires with its ``done`` transfer (one per
    issued instruction, in issue order); a status other than 0 is an error with that code and
    ``done.info`` as ``err_info``, and it posts nothing. Otherwise, with ``ctl.post_en``, the
    sequencer sends ``{post_sem, post_inc}`` on ``post`` (the semaphore file's increment
    stream), then ``irq_done`` pulses for ``ctl.irq_on_done``, ``notify`` pulses for a
    ``notify`` (``notify_code`` = its code). ``halt`` stops issue after it: the sequencer stays
    halted (``halted``) until ``run`` falls.

    **Errors** (§11.3): an instruction's own error (E_AXI, E_OPCODE, E_SEM, E_TIMEOUT, and
    E_QUEUE for the queue) is raised once every instruction before it retired, so the error kept
    is the first in program order. The first is kept (``err``, ``err_code``, ``err_pc`` = queue index,
    ``err_info``) until reset (the core's soft reset). After an error, and while ``stop`` is
    high (another engine's error), nothing more is issued or fetched; issued instructions
    retire (their ``done`` is consumed, an error of theirs is not kept, they post nothing and
    raise no interrupt), read responses in
    flight are accepted and dropped: nothing hangs.

    Parameters
    ----------
    cfg : CoreConfig
        ``axi_data_bits``, ``axi_addr_bits``, ``semaphores``, ``semaphore_bits``,
        ``fetch_depth``, ``issue_depth``.
    engine : str
        One of :data:`rtl.isa.ENGINES`: which opcodes are its own.

    Members
    -------
    axi : Out(AXI4Signature(cfg))
        Reads only (the write channels stay idle); ID 0.
    q_base : In(axi_addr_bits); q_size, q_tail : In(QUEUE_INDEX_BITS)
    q_head : Out(QUEUE_INDEX_BITS)
    run, stop : In(1)
    watchdog : In(32)
    sem_rd : Out(8); sem_data : In(semaphore_bits)
        A read port of the semaphore file (data one cycle after the address).
    post : Out(stream.Signature({sem: 8, inc: 16}))
    issue : Out(stream.Signature({raw: 1024, index: QUEUE_INDEX_BITS}))
    done : In(stream.Signature({status: ERROR_BITS, info: 32}))
    busy, halted : Out(1)
        ``busy``: work queued, fetched, waiting or in flight (queued or fetched work does not
        count while halted, stopped or after an error).
    err : Out(1); err_code : Out(ERROR_BITS); err_pc : Out(QUEUE_INDEX_BITS); err_info : Out(32)
    notify, irq_done : Out(1); notify_code : Out(16)
    retired : Out(1)
        Toggles at every retire (trace: one edge per instruction, also when back to back).
    issued : Out(1)
        Toggles when an instruction leaves the sequencer (handed to the engine, or a local
        ``nop``/``notify``/``halt`` taken): the trace's start of its execution.
    waiting : Out(1)
        The next instruction waits on its semaphore (read, and below ``wait_val``): the trace
        tells a stalled engine from a busy one.
    """

    class Signature(wiring.Signature):
        """Members of a :class:`Sequencer`; attributes ``issue_layout``, ``done_layout``,
        ``post_layout``, ``beats`` (AXI beats per instruction)."""

        def __init__(self, cfg: CoreConfig, engine: str):
            check_config(cfg, "Sequencer")
            if engine not in isa.ENGINES:
                raise ValueError(f"Sequencer engine must be one of {list(isa.ENGINES)}, "
                                 f"not {engine!r}")
            if cfg.axi_data_bits > _INSTR_BITS:
                raise ValueError(f"Sequencer needs axi_data_bits <= {_INSTR_BITS}, "
                                 f"not {cfg.axi_data_bits!r}")
            self.beats = _INSTR_BITS // cfg.axi_data_bits
            Q = QUEUE_INDEX_BITS
            self.issue_layout = data.StructLayout({"raw": _INSTR_BITS, "index": Q})
            self.done_layout = data.StructLayout({"status": ERROR_BITS, "info": 32})
            self.post_layout = data.StructLayout({"sem": 8, "inc": 16})
            super().__init__({
                "axi": Out(AXI4Signature(cfg)),
                "q_base": In(cfg.axi_addr_bits), "q_size": In(Q), "q_tail": In(Q),
                "q_head": Out(Q), "run": In(1), "stop": In(1), "watchdog": In(32),
                "sem_rd": Out(8), "sem_data": In(cfg.semaphore_bits),
                "post": Out(stream.Signature(self.post_layout)),
                "issue": Out(stream.Signature(self.issue_layout)),
                "done": In(stream.Signature(self.done_layout)),
                "busy": Out(1), "halted": Out(1),
                "err": Out(1), "err_code": Out(ERROR_BITS), "err_pc": Out(Q), "err_info": Out(32),
                "notify": Out(1), "notify_code": Out(16), "irq_done": Out(1),
                "retired": Out(1), "issued": Out(1), "waiting": Out(1),
            })

    def __init__(self, cfg: CoreConfig, engine: str):
        super().__init__(self.Signature(cfg, engine))
        self.cfg = cfg
        self.engine = engine

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        Q = QUEUE_INDEX_BITS
        beat_bytes = cfg.axi_data_bits // 8
        axi = self.axi

        err = Signal()
        halt_state = Signal()       # a halt retired: no issue until run falls
        halt_issued = Signal()      # a halt issued: nothing after it
        blocked = err | self.stop | halt_issued | halt_state
        m.d.comb += [self.err.eq(err), self.halted.eq(halt_state)]
        with m.If(~self.run):
            m.d.sync += halt_state.eq(0)

        def raise_error(code, pc, info):
            with m.If(~err):
                m.d.sync += [err.eq(1), self.err_code.eq(code), self.err_pc.eq(pc),
                             self.err_info.eq(info)]

        # ---- fetch -------------------------------------------------------------------------
        head = Signal(Q)
        m.d.comb += self.q_head.eq(head)
        size_m1 = Signal(Q)
        m.d.comb += size_m1.eq(self.q_size - 1)
        queue_bad = ((self.q_size == 0) | ((self.q_size & size_m1) != 0)
                     | (self.q_tail >= self.q_size) | (self.q_base[:7] != 0))
        # fetched instructions: the buffer holds raw bits, queue index and read error
        ibuf = m.submodules.ibuf = fifo.SyncFIFOBuffered(
            width=_INSTR_BITS + Q + 1, depth=cfg.fetch_depth)
        pending = Signal(range(cfg.fetch_depth + 1))     # ARs issued, last beat not yet seen
        room = (pending + ibuf.level) < cfg.fetch_depth
        want = self.run & ~blocked & (head != self.q_tail) & room
        ar_busy = Signal()
        drained = Signal()          # nothing issued and not retired (set below)
        with m.If(self.run & ~blocked & (head != self.q_tail) & queue_bad & drained
                  & ~ibuf.r_rdy & (pending == 0)):
            raise_error(E_QUEUE, head, 0)
        m.d.comb += [
            axi.araddr.eq(self.q_base + (head << 7)),
            axi.arlen.eq(sig.beats - 1), axi.arsize.eq(beat_bytes.bit_length() - 1),
            axi.arburst.eq(BURST_INCR), axi.arid.eq(0), axi.arvalid.eq(ar_busy),
            axi.bready.eq(1),
        ]
        ar_fire = axi.arvalid & axi.arready
        with m.If(~ar_busy & want & ~queue_bad):
            m.d.sync += ar_busy.eq(1)
        with m.If(ar_fire):
            m.d.sync += [ar_busy.eq(0), head.eq((head + 1) & size_m1)]
        # read data: beats shift in from the top (beat 0 = bytes 0..beat_bytes-1)
        shreg = Signal(_INSTR_BITS)
        r_err = Signal()
        r_index = Signal(Q)
        r_fire = axi.rvalid & axi.rready
        m.d.comb += axi.rready.eq(ibuf.w_rdy | err)
        new = Cat(shreg[cfg.axi_data_bits:], axi.rdata) if sig.beats > 1 else axi.rdata
        bad_resp = axi.rresp != RESP_OKAY
        with m.If(r_fire):
            m.d.sync += shreg.eq(new)
            with m.If(bad_resp):
                m.d.sync += r_err.eq(1)
            with m.If(axi.rlast):
                m.d.sync += [r_err.eq(0), r_index.eq((r_index + 1) & size_m1)]
                m.d.comb += [ibuf.w_data.eq(Cat(new, r_index, r_err | bad_resp)),
                             ibuf.w_en.eq(~err)]
        m.d.sync += pending.eq(pending + ar_fire - (r_fire & axi.rlast))

        # ---- check, wait, issue ------------------------------------------------------------
        raw = ibuf.r_data[:_INSTR_BITS]
        idx = ibuf.r_data[_INSTR_BITS:_INSTR_BITS + Q]
        rerr = ibuf.r_data[-1]
        ok, local = opcode_check(m, raw, self.engine)
        opcode = isa.header_bits(raw, "opcode")
        ctl = isa.header_bits(raw, "ctl")
        wait_en = ctl[isa.CTL_BITS["wait_en"]]
        post_en = ctl[isa.CTL_BITS["post_en"]]
        wait_sem = isa.header_bits(raw, "wait_sem")
        wait_val = isa.header_bits(raw, "wait_val")
        m.d.comb += self.sem_rd.eq(wait_sem)
        primed = Signal()           # sem_data belongs to this instruction's wait_sem
        waited = Signal(32)
        sem_ok = ~wait_en | (primed & (self.sem_data >= wait_val))
        timeout = wait_en & (self.watchdog != 0) & (waited >= self.watchdog)
        # in-flight record: post fields, irq, notify, halt, local, index
        rec = data.StructLayout({"post_en": 1, "sem": 8, "inc": 16, "irq": 1, "notify": 1,
                                 "code": 16, "local": 1, "index": Q})
        infl = m.submodules.infl = fifo.SyncFIFOBuffered(width=rec.size, depth=cfg.issue_depth)
        entry = Signal(rec)
        notify_op = isa.OPS_BY_NAME["notify"]
        m.d.comb += [
            entry.post_en.eq(post_en),
            entry.sem.eq(isa.header_bits(raw, "post_sem")), entry.inc.eq(isa.header_bits(raw, "post_inc")),
            entry.irq.eq(ctl[isa.CTL_BITS["irq"]]), entry.local.eq(local),
            entry.notify.eq(opcode == notify_op.code),
            entry.code.eq(isa.imm_bits(raw, "notify", "code")), entry.index.eq(idx),
            infl.w_data.eq(entry),
            self.issue.payload.raw.eq(raw), self.issue.payload.index.eq(idx),
        ]
        sem_bad = ((wait_en & (wait_sem >= cfg.semaphores))
                   | (post_en & (entry.sem >= cfg.semaphores)))
        ok_all = ok & ~sem_bad
        have = ibuf.r_rdy & ~blocked
        with m.If(have & ~rerr & ok_all & wait_en & ~sem_ok):
            m.d.sync += [primed.eq(1), waited.eq(waited + 1)]
            m.d.comb += self.waiting.eq(primed)
            with m.If(timeout & drained):
                raise_error(E_TIMEOUT, idx, wait_sem)
        go = have & ~rerr & ok_all & sem_ok & infl.w_rdy
        # an instruction's own error is raised once everything before it retired: the error
        # kept is always the first in program order
        with m.If(have & rerr & drained):
            raise_error(E_AXI, idx, 0)
        with m.Elif(have & ~rerr & ~ok & drained):
            raise_error(E_OPCODE, idx, 0)
        with m.Elif(have & ~rerr & ok & sem_bad & drained):
            raise_error(E_SEM, idx, Mux(wait_en & (wait_sem >= cfg.semaphores), wait_sem,
                                        entry.sem))
        with m.Elif(go & local):
            m.d.comb += [infl.w_en.eq(1), ibuf.r_en.eq(1)]
        with m.Elif(go):
            m.d.comb += self.issue.valid.eq(1)
            with m.If(self.issue.ready):
                m.d.comb += [infl.w_en.eq(1), ibuf.r_en.eq(1)]
        with m.If(infl.w_en):
            m.d.sync += self.issued.eq(~self.issued)
        with m.If(ibuf.r_en):
            m.d.sync += [primed.eq(0), waited.eq(0)]
            with m.If(opcode == isa.OPS_BY_NAME["halt"].code):
                m.d.sync += halt_issued.eq(1)
        # after an error the fetched instructions are dropped
        with m.If(err & ibuf.r_rdy):
            m.d.comb += ibuf.r_en.eq(1)

        # ---- retire ------------------------------------------------------------------------
        head_rec = data.View(rec, infl.r_data)
        posting = Signal()          # the head's work is done; its post is being sent
        m.d.comb += [self.post.payload.sem.eq(head_rec.sem),
                     self.post.payload.inc.eq(head_rec.inc)]
        finish = Signal()
        m.d.comb += drained.eq(~infl.r_rdy & ~posting)
        with m.If(infl.r_rdy & ~posting):
            with m.If(head_rec.local):
                m.d.sync += posting.eq(1)
            with m.Else():
                m.d.comb += self.done.ready.eq(1)
                with m.If(self.done.valid):
                    with m.If(self.done.payload.status != 0):
                        raise_error(self.done.payload.status, head_rec.index,
                                    self.done.payload.info)
                        m.d.comb += [infl.r_en.eq(1)]
                    with m.Else():
                        m.d.sync += posting.eq(1)
        with m.If(posting):
            with m.If(head_rec.post_en & ~err):
                m.d.comb += self.post.valid.eq(1)
                with m.If(self.post.ready):
                    m.d.comb += finish.eq(1)
            with m.Else():
                m.d.comb += finish.eq(1)
        with m.If(finish):
            m.d.sync += posting.eq(0)
            m.d.comb += infl.r_en.eq(1)
            m.d.sync += [self.retired.eq(~self.retired),
                         self.irq_done.eq(head_rec.irq & ~err),
                         self.notify.eq(head_rec.notify & ~err),
                         self.notify_code.eq(head_rec.code)]
        with m.Else():
            m.d.sync += [self.irq_done.eq(0), self.notify.eq(0)]
        # halt: once everything before it retired, the sequencer is halted
        with m.If(halt_issued & ~infl.r_rdy & ~posting):
            m.d.sync += [halt_issued.eq(0), halt_state.eq(1)]

        # halted (or stopped) with instructions still queued or fetched is not busy
        # FIFO levels, not r_rdy: an entry crossing a buffered FIFO's output register must
        # not look like an empty sequencer for that cycle (a false idle edge)
        m.d.comb += self.busy.eq(((head != self.q_tail) & self.run | (ibuf.level != 0))
                                 & ~blocked | ar_busy | (pending != 0) | (infl.level != 0)
                                 | posting)
        return m
