# SPDX-License-Identifier: Apache-2.0
"""The semaphore file (architecture §8.1): ``semaphores`` counters of ``semaphore_bits``,
incremented by completions (a DMA descriptor's ``post``), read and set by the host.

Sequencers read it for their waits (``wait_sem``/``wait_data`` ports); the host reads, sets,
increments and decrements it (docs/core.md §2).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.isa import E_SEM, ERROR_BITS
from rtl.mem.arbiter import rr_pick

__all__ = ["SemaphoreFile", "E_SEM"]

# E_SEM (rtl.isa): an increment past ``2**semaphore_bits - 1`` (architecture §11.2).


class SemaphoreFile(wiring.Component):
    """``semaphores`` x ``semaphore_bits`` counters in one memory.

    Increments arrive on ``sources`` streams ``inc[k]`` (``{sem, inc}``) and host additions on
    ``add`` (``{sem, value, dec}``: ``dec`` subtracts), served round-robin (``add`` is the
    last source), one every 2 cycles (read, then add and write): a source waits at most
    ``2 * (sources + 1)`` cycles. An increment that would pass ``2**semaphore_bits - 1``, or a
    decrement below 0, leaves the counter unchanged, sets ``err`` (sticky until ``err_clear``),
    ``err_code`` = E_SEM and ``err_sem`` = its index. ``readers`` read ports ``wait_sem[r]`` /
    ``wait_data[r]`` (one per sequencer) behave like the host's ``rd_sem`` / ``rd_data``.

    After a reset (the core's soft reset included) the file clears its ``semaphores`` counters,
    one per cycle; meanwhile nothing is taken (``ready`` low) and every read returns 0. The host reads with ``rd_sem`` (``rd_data`` the next cycle,
    ``rd_latency`` = 1; it sees every write completed before the cycle ``rd_sem`` was
    presented) and sets with ``set`` (``{sem, value}``; ``set.ready`` is low only in the write
    cycle of an increment). A set and an increment of the same semaphore taken in the same
    cycle: the set first, then the increment.

    Parameters
    ----------
    cfg : CoreConfig
        ``semaphores``, ``semaphore_bits``.
    sources : int
        Increment streams (e.g. one per DMA engine and one per sequencer).
    readers : int
        Read ports for sequencer waits, 0..16.

    Members
    -------
    inc : In(stream.Signature(inc_layout)).array(sources)
    add : In(stream.Signature(add_layout))
    set : In(stream.Signature(set_layout))
    wait_sem : In(8).array(readers); wait_data : Out(semaphore_bits).array(readers)
    rd_sem : In(8)
    rd_data : Out(semaphore_bits)
    err, err_clear : Out(1), In(1)
    err_code, err_sem : Out(ERROR_BITS), Out(8)
    """

    class Signature(wiring.Signature):
        """Members and ``inc_layout``, ``set_layout``, ``rd_latency`` of a
        :class:`SemaphoreFile`."""

        def __init__(self, cfg: CoreConfig, *, sources=1, readers=0):
            check_config(cfg, "SemaphoreFile")
            if isinstance(sources, bool) or not isinstance(sources, int) or not 1 <= sources <= 64:
                raise ValueError(f"SemaphoreFile sources must be in [1, 64], not {sources!r}")
            if isinstance(readers, bool) or not isinstance(readers, int) or not 0 <= readers <= 16:
                raise ValueError(f"SemaphoreFile readers must be in [0, 16], not {readers!r}")
            self.sources, self.readers = sources, readers
            self.add_layout = data.StructLayout({"sem": 8, "value": cfg.semaphore_bits, "dec": 1})
            self.inc_layout = data.StructLayout({"sem": 8, "inc": 16})
            self.set_layout = data.StructLayout({"sem": 8, "value": cfg.semaphore_bits})
            self.rd_latency = 1
            super().__init__({
                "inc": In(stream.Signature(self.inc_layout)).array(sources),
                "add": In(stream.Signature(self.add_layout)),
                "set": In(stream.Signature(self.set_layout)),
                **({"wait_sem": In(8).array(readers),
                    "wait_data": Out(cfg.semaphore_bits).array(readers)} if readers else {}),
                "rd_sem": In(8), "rd_data": Out(cfg.semaphore_bits),
                "err": Out(1), "err_clear": In(1), "err_code": Out(ERROR_BITS), "err_sem": Out(8),
            })

    def __init__(self, cfg: CoreConfig, *, sources=1, readers=0):
        super().__init__(self.Signature(cfg, sources=sources, readers=readers))
        self.cfg = cfg
        self.sources, self.readers = sources, readers

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        N, B = cfg.semaphores, cfg.semaphore_bits
        srcs = list(self.inc) + [self.add]
        S = len(srcs)
        ib = max(1, (N - 1).bit_length())
        mem = m.submodules.mem = memory.Memory(shape=B, depth=N, init=[])
        wp = mem.write_port()
        rmw = mem.read_port(transparent_for=(wp,))
        host = mem.read_port(transparent_for=(wp,))
        # after every reset (the core's soft reset too) the counters are cleared, one per
        # cycle: no increment, add or set is taken and every read returns 0 meanwhile
        clr = Signal(range(N + 1))
        clearing = Signal()
        clearing_q = Signal(init=1)
        m.d.comb += clearing.eq(clr != N)
        m.d.sync += clearing_q.eq(clearing)
        m.d.comb += [host.addr.eq(self.rd_sem[:ib]),
                     self.rd_data.eq(Mux(clearing_q, 0, host.data))]
        for r in range(self.readers):
            rp = mem.read_port(transparent_for=(wp,))
            m.d.comb += [rp.addr.eq(self.wait_sem[r][:ib]),
                         self.wait_data[r].eq(Mux(clearing_q, 0, rp.data))]

        # stage A: pick a source (round-robin) and read its semaphore
        last = Signal(range(max(2, S)), init=S - 1)     # the source served last
        stage_b = Signal()
        b_sem = Signal(8)
        b_inc = Signal(B)
        b_dec = Signal()
        found, pick = rr_pick(m, Cat(i.valid for i in srcs), last, S, "rr")
        take = found & ~stage_b & ~clearing
        for k, src in enumerate(srcs):
            with m.If(take & (pick == k)):
                p = src.payload
                m.d.comb += [src.ready.eq(1), rmw.addr.eq(p.sem[:ib])]
                m.d.sync += [b_sem.eq(p.sem), b_inc.eq(p.value if src is self.add else p.inc),
                             b_dec.eq(p.dec if src is self.add else 0)]
        m.d.sync += stage_b.eq(take)
        with m.If(take):
            m.d.sync += last.eq(pick)

        # stage B: add, check, write; the host's set takes the write port otherwise
        total = Signal(B + 1)       # bit B: the result left [0, 2**B)
        m.d.comb += total.eq(Mux(b_dec, rmw.data - b_inc, rmw.data + b_inc))
        err = Signal()
        code, esem = Signal(ERROR_BITS), Signal(8)
        m.d.comb += [self.err.eq(err), self.err_code.eq(code), self.err_sem.eq(esem)]
        with m.If(stage_b):
            with m.If(total[B]):
                with m.If(~err):
                    m.d.sync += [err.eq(1), code.eq(E_SEM), esem.eq(b_sem)]
            with m.Else():
                m.d.comb += [wp.addr.eq(b_sem[:ib]), wp.data.eq(total[:B]), wp.en.eq(1)]
        with m.Elif(clearing):
            m.d.comb += [wp.addr.eq(clr), wp.data.eq(0), wp.en.eq(1)]
            m.d.sync += clr.eq(clr + 1)
        with m.Else():
            m.d.comb += self.set.ready.eq(1)
            with m.If(self.set.valid):
                m.d.comb += [wp.addr.eq(self.set.payload.sem[:ib]),
                             wp.data.eq(self.set.payload.value), wp.en.eq(1)]
        with m.If(self.err_clear):
            m.d.sync += [err.eq(0), code.eq(0), esem.eq(0)]
        return m

