# SPDX-License-Identifier: Apache-2.0
"""Bounded formal check of SBUF's arbiter and banks: no request dropped or duplicated, no write
outside its address, every wait within the documented bound.

:class:`SbufFormal` drives every port of a small :class:`rtl.mem.sbuf.SBUF` with unconstrained
requests that only obey the stream rule (a request, once offered, stays with the same payload
until taken) and asserts on every cycle:

* at most one port is granted per bank, and only a port that requests that bank (no access
  duplicated or invented);
* ``rsp.valid`` of a port is high exactly ``latency`` cycles after one of its reads was granted
  (no response dropped or duplicated);
* one byte of the memory chosen by the solver (any partition, bank, word, byte) always reads
  back as the last value a granted write put there, written again here from the port
  semantics of docs/memory.md: a write that lands anywhere else, or does not land, or a read
  from the wrong place, breaks it ("no write leaves the addressed range");
* no request waits longer than :meth:`SBUF.Signature.wait_bound` cycles (no starvation).

:func:`run_bmc` proves it for ``depth`` cycles from reset with yosys' own SAT solver (the flow
of ``tb/ap/formal.py``: no SMT solver is installed, see docs/memory.md).
"""

from __future__ import annotations


from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, Signal, Value

from rtl.mem.sbuf import SBUF
from tb.formal import prove

__all__ = ["SbufFormal", "run_bmc", "FORMAL_CFG"]


def formal_cfg():
    """The smallest SBUF with two banks: 2 partitions, 128 B each, 4-byte words (32-bit AXI),
    two banks of 16 words."""
    from rtl.config import get_preset
    return get_preset("small").replace(partitions=2, pe_rows=2, pe_cols=2,
                                       sbuf_bytes_per_partition=128, axi_data_bits=32,
                                       sbuf_banks=2)


FORMAL_CFG = formal_cfg()


class SbufFormal(Elaboratable):
    """SBUF with ports ``t`` (row, priority), ``v`` (row), ``d`` (partition), ``yield_after``
    1, under any stream-legal stimulus, with the assertions of the module docstring.
    ``bug="drop"`` makes the spec side forget port ``d``'s writes, so that a write the DUT does
    make is one the check does not expect: the check's own test that it can fail."""

    def __init__(self, cfg=FORMAL_CFG, *, bug=None):
        self.cfg, self.bug = cfg, bug

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P, WB, NB = cfg.partitions, cfg.sbuf_word_bytes, cfg.sbuf_banks
        m.submodules.dut = dut = SBUF(cfg, row_ports=("t", "v"), part_ports=("d",),
                                      priority=("t",), yield_after=1)
        sig = dut.signature
        names = ("t", "v", "d")
        AB = (cfg.sbuf_bytes_per_partition - 1).bit_length()
        bsh = (cfg.sbuf_bank_bytes - 1).bit_length()
        wsh = (WB - 1).bit_length()

        # the tracked byte: partition tp, byte address ta (bank, word, byte in word)
        tp = Signal(range(max(2, P)), name="tp")
        ta = Signal(AB, name="ta")
        m.d.comb += [tp.eq(AnyConst(len(tp))), ta.eq(AnyConst(AB)), Assume(tp < P)]
        # the memory keeps its contents through a reset, so does the model of the tracked byte
        shadow = Signal(8, name="shadow", reset_less=True)
        check_v = {n: Signal(name=f"chk_{n}") for n in names}
        check_x = {n: Signal(8, name=f"chkx_{n}", reset_less=True) for n in names}

        bank_grants = [[] for _ in range(NB)]
        for n in names:
            port = getattr(dut, n)
            req = port.req
            lay = req.payload.shape()
            pay = Signal(lay, name=f"{n}_pay")
            vld = Signal(name=f"{n}_valid")
            m.d.comb += [pay.as_value().eq(AnySeq(lay.size)), vld.eq(AnySeq(1)),
                         req.payload.eq(pay), req.valid.eq(vld)]
            # stream rule: an offered request stays, unchanged, until taken
            held = Signal(name=f"{n}_held")
            prev = Signal(lay, name=f"{n}_prev")
            m.d.sync += [held.eq(vld & ~req.ready), prev.eq(pay)]
            with m.If(held):
                m.d.comb += [Assume(vld), Assume(pay.as_value() == prev.as_value())]
            g = vld & req.ready
            bank = pay.addr[bsh:AB] if NB > 1 else 0
            for b in range(NB):
                bank_grants[b].append(g & (bank == b))
            # no grant without a request
            with m.If(req.ready):
                m.d.comb += Assert(vld)
            # response exactly `latency` (1) cycles after a granted read
            rd = Signal(name=f"{n}_rd")
            m.d.sync += rd.eq(g & ~pay.we)
            m.d.comb += Assert(port.rsp.valid == rd)
            # wait bound
            wait = Signal(8, name=f"{n}_wait")
            with m.If(vld & ~req.ready):
                m.d.sync += wait.eq(wait + 1)
            with m.Else():
                m.d.sync += wait.eq(0)
            m.d.comb += Assert(wait < sig.wait_bound(n))
            # the tracked byte: writes by the spec, reads compared next cycle
            word_hit = pay.addr[wsh:AB] == ta[wsh:AB]
            j = ta[:wsh]
            if n in sig.row_ports:
                lane_ok = (pay.addr[2:wsh] == j[2:]) if wsh > 2 else 1
                hit = word_hit & pay.mask.bit_select(tp, 1) & lane_ok
                be_bit = pay.be.bit_select(j[:2], 1)
                wbyte = pay.wdata.as_value().word_select(tp, 32).word_select(j[:2], 8)
            else:
                hit = word_hit & (pay.part == tp)
                be_bit = pay.be.bit_select(j, 1)
                wbyte = pay.wdata.word_select(j, 8)
            wr = g & pay.we & hit & be_bit
            if not (self.bug == "drop" and n == "d"):     # the planted bug forgets d's writes
                with m.If(wr):
                    m.d.sync += shadow.eq(wbyte)
            m.d.sync += [check_v[n].eq(g & ~pay.we & hit), check_x[n].eq(shadow)]
            with m.If(check_v[n]):
                m.d.comb += Assert(self._byte(port, n, sig, tp, j) == check_x[n])
        for b in range(NB):
            m.d.comb += Assert(Cat(*bank_grants[b]).as_unsigned() & (
                Cat(*bank_grants[b]).as_unsigned() - 1) == 0)
        return m

    @staticmethod
    def _byte(port, n, sig, tp, j):
        data = Value.cast(port.rsp.payload)
        if n in sig.row_ports:
            return data.word_select(tp, 32).word_select(j[:2], 8)
        return data.word_select(j, 8)


def run_bmc(workdir, *, depth=8, bug=None, timeout=1200):
    """Bounded model check of :class:`SbufFormal` for ``depth`` cycles from reset. Returns
    ``(passed, seconds, log)``."""
    return prove(SbufFormal(bug=bug), workdir, "sbuf_formal", depth=depth, memory_map=True,
                 timeout=timeout)
