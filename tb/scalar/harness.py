# SPDX-License-Identifier: Apache-2.0
"""A Verilator harness around one :class:`~rtl.scalar.engine.ScalarEngine` on an SBUF and a
PSUM unit (the real memory blocks), for the cocotb family ``tb.scalar.tb_scalar``.

* ``imem`` (``IDEPTH`` decoded instructions, ``instr_layout``) is written by cocotb; ``start``
  feeds ``n_instr`` of them in order to the engine's ``instr`` stream, holding ``valid`` low in
  a pseudo-random fraction ``instr_gap / 256`` of the cycles; ``done.ready`` is low in a
  fraction ``done_stall / 256``. Each ``done`` record is logged: ``slog[k]`` status, ``tlog[k]``
  the cycle (from ``start``) it was taken. ``finished`` rises when all ``n_instr`` records were
  taken; ``cycles`` counts from ``start`` to then.
* ``sb`` / ``ps`` are the testbench's row ports on SBUF / PSUM (preload and read back, bounded
  by cocotb while the engine is idle). Otherwise the harness drives them itself as contention:
  a read of a pseudo-random row of every partition in a fraction ``sb_hog`` / ``ps_hog``
  of the cycles (the SBUF port has priority over the engine; the PSUM port competes in the
  unit's row arbitration).
* The engine's function units are instances of one separately converted module
  (``rtl.scalar.engine.leaf_modules``, a Verilator ``hier_block``).
* ``tw`` is the engine's table-write port, ``acc`` its accumulators, ``busy`` its busy flag.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.mem.port import PSUM, SBUF, RowPort
from rtl.mem.sbuf import SBUF as SbufMem
from rtl.scalar.engine import ScalarEngine
from rtl.scalar.function import table_write_layout
from rtl.scalar.isa import instr_layout
from rtl.tensor.psum import PsumUnit

__all__ = ["ScalarHarness", "IDEPTH"]

#: Instructions the harness's instruction memory holds.
IDEPTH = 32


def _lfsr(m, name, seed):
    """A 16-bit Galois LFSR; returns its low byte (one new value per cycle)."""
    r = Signal(16, init=seed, name=name)
    m.d.sync += r.eq(Mux(r[0], (r >> 1) ^ 0xB400, r >> 1))
    return r[:8]


class ScalarHarness(wiring.Component):
    def __init__(self, cfg, *, use_instances=True):
        self.cfg = cfg
        self.sbuf = SbufMem(cfg, row_ports=("hog", "act_rd", "act_wr"), priority=("hog",))
        self.psum = PsumUnit(cfg, use_instances=False, row_ports=("hog", "act_rd", "act_wr"))
        self.eng = ScalarEngine(cfg, sbuf_latency=self.sbuf.signature.latency,
                                psum_latency=self.psum.signature.row_latency,
                                use_instances=use_instances)
        super().__init__({
            "start": In(1), "n_instr": In(8), "finished": Out(1), "cycles": Out(32),
            "n_done": Out(8), "busy": Out(1),
            "instr_gap": In(8), "done_stall": In(8), "sb_hog": In(8), "ps_hog": In(8),
            "tw": In(stream.Signature(table_write_layout(cfg), always_ready=True)),
            "acc": Out(self.eng.acc.shape()),
            "sb": In(RowPort.Signature(cfg, SBUF)),
            "ps": In(RowPort.Signature(cfg, PSUM)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, eng = self.cfg, self.eng
        m.submodules.sbuf, m.submodules.psum, m.submodules.eng = self.sbuf, self.psum, eng
        wiring.connect(m, eng.sbuf_rd, self.sbuf.act_rd)
        wiring.connect(m, eng.sbuf_wr, self.sbuf.act_wr)
        wiring.connect(m, eng.psum_rd, self.psum.act_rd)
        wiring.connect(m, eng.psum_wr, self.psum.act_wr)
        m.d.comb += [eng.tw.valid.eq(self.tw.valid), eng.tw.payload.eq(self.tw.payload),
                     self.acc.eq(eng.acc), self.busy.eq(eng.busy)]

        lay = instr_layout(cfg)
        imem = m.submodules.imem = memory.Memory(shape=lay.size, depth=IDEPTH, init=[])
        slog = m.submodules.slog = memory.Memory(shape=8, depth=IDEPTH, init=[])
        tlog = m.submodules.tlog = memory.Memory(shape=32, depth=IDEPTH, init=[])
        rd = imem.read_port(domain="comb")
        ws, wt = slog.write_port(), tlog.write_port()

        running = Signal()
        fed = Signal(8)
        with m.If(self.start):
            m.d.sync += [running.eq(1), fed.eq(0), self.n_done.eq(0), self.cycles.eq(0),
                         self.finished.eq(0)]
        with m.Elif(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        gap = _lfsr(m, "gap_lfsr", 0xACE1) < self.instr_gap
        stall = _lfsr(m, "done_lfsr", 0x1D0F) < self.done_stall
        m.d.comb += [rd.addr.eq(fed),
                     eng.instr.valid.eq(running & (fed < self.n_instr) & ~gap),
                     eng.instr.payload.as_value().eq(rd.data),
                     eng.done.ready.eq(running & ~stall)]
        with m.If(eng.instr.valid & eng.instr.ready):
            m.d.sync += fed.eq(fed + 1)
        took = eng.done.valid & eng.done.ready
        m.d.comb += [ws.addr.eq(self.n_done), ws.data.eq(eng.done.payload.status), ws.en.eq(took),
                     wt.addr.eq(self.n_done), wt.data.eq(self.cycles), wt.en.eq(took)]
        with m.If(took):
            m.d.sync += self.n_done.eq(self.n_done + 1)
            with m.If(self.n_done + 1 == self.n_instr):
                m.d.sync += [self.finished.eq(1), running.eq(0)]

        # testbench ports, or contention reads of random rows
        for port, mem, rate, seed in ((self.sb, self.sbuf.hog, self.sb_hog, 0x7A31),
                                      (self.ps, self.psum.hog, self.ps_hog, 0x51C3)):
            a = Signal(16, init=seed, name=f"hog_addr_{seed:x}")
            m.d.sync += a.eq(Mux(a[0], (a >> 1) ^ 0xB400, a >> 1))
            steal = _lfsr(m, f"hog_lfsr_{seed:x}", seed ^ 0xFFFF) < rate
            with m.If(port.req.valid):
                m.d.comb += [mem.req.valid.eq(1), mem.req.payload.eq(port.req.payload),
                             port.req.ready.eq(mem.req.ready)]
            with m.Else():
                m.d.comb += [mem.req.valid.eq(steal), mem.req.payload.addr.eq(a),
                             mem.req.payload.mask.eq((1 << cfg.partitions) - 1)]
            m.d.comb += [port.rsp.valid.eq(mem.rsp.valid), port.rsp.payload.eq(mem.rsp.payload)]
        return m
