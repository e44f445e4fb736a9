# SPDX-License-Identifier: Apache-2.0
"""Bounded formal check of the ring link ports' credit counters and sequence check.

:class:`LinkFormal` drives a :class:`rtl.collective.link.LinkTX` and a
:class:`rtl.collective.link.LinkRX` (not joined: each gets any input on any cycle, a reset at
cycle 0 and anywhere after) and asserts on every cycle, from docs/collectives.md rather than
from the RTL:

TX, per VC:
* the credit counter stays in ``[0, link_credits]``, and no flit leaves on a VC without credit;
* its next value is ``credits + returned - sent``, except that a return that would pass
  ``link_credits`` leaves it unchanged and raises ``err`` with ``credit_overflow``.

RX, against a shadow count of the flits it accepted per VC and of its FIFO fill:
* a flit whose CRC is wrong is an error of kind ``crc``; one whose sequence number is not
  the number of flits accepted so far on its VC (modulo ``2**link_seq_bits``) -- any dropped,
  duplicated or reordered flit -- is an error of kind ``seq``; a flit for a full FIFO is
  ``overflow``; any other flit is accepted without error;
* nothing is offered on ``o`` once ``err`` is high, and ``credit`` returns exactly the flits
  taken the cycle before.

A flit's CRC field is either the CRC the RX port's own CRC unit computes for it
(``LinkRX.crc_unit``, checked against golden's CRC-32C in simulation) or anything
(``crc_free``), so the solver sends good and bad flits without having to prove two XOR trees
equal. :func:`run_bmc` proves it with
yosys' SAT solver (:func:`tb.formal.prove`, as tests/test_mem_formal.py).
The check's own tests: ``bug="vc1"`` (the shadow forgets to count VC1's flits) and
``bug="credit"`` (the TX model forgets returned credits) must fail.
"""

from __future__ import annotations

from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, Mux, ResetSignal, Signal

from rtl.collective.link import LinkRX, LinkTX, flit_layout
from rtl.config import LINK_FAULTS, LINK_VCS, get_preset, link_flit_fields
from tb.formal import prove

__all__ = ["LinkFormal", "run_bmc", "FORMAL_CFG"]

#: The smallest link: 32-bit payload, 2 credits per VC (3-bit sequence numbers), ring of 2.
FORMAL_CFG = get_preset("small").replace(link_credits=2, ring_size=2)


class LinkFormal(Elaboratable):
    """The two ports under any stimulus, with the assertions of the module docstring."""

    def __init__(self, cfg=FORMAL_CFG, *, bug=None):
        self.cfg, self.bug = cfg, bug

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        C = cfg.link_credits
        m.submodules.tx = tx = LinkTX(cfg)
        m.submodules.rx = rx = LinkRX(cfg)
        rst = ResetSignal()
        started = Signal(reset_less=True)
        m.d.sync += started.eq(1)
        with m.If(~started):
            m.d.comb += Assume(rst)
        live = Signal()                    # a cycle since the last reset
        m.d.sync += live.eq(1)

        # --- TX ---------------------------------------------------------------------------
        for v in range(LINK_VCS):
            lay = tx.i[v].payload.shape()
            m.d.comb += [tx.i[v].valid.eq(AnySeq(1)),
                         tx.i[v].payload.as_value().eq(AnySeq(lay.size))]
        m.d.comb += [tx.credit.eq(AnySeq(LINK_VCS)), tx.watchdog.eq(AnySeq(4))]
        prev_c = [Signal(range(C + 1), name=f"prev_c{v}") for v in range(LINK_VCS)]
        prev_b = Signal(LINK_VCS)
        prev_s = Signal(LINK_VCS)
        sent = []
        for v in range(LINK_VCS):
            s = tx.i[v].valid & tx.i[v].ready & ~tx.err     # VC v leaves on VC v here
            sent.append(s)
            m.d.comb += Assert(tx.credits[v] <= C)
            with m.If(s):
                m.d.comb += Assert(tx.credits[v] != 0)
            m.d.sync += prev_c[v].eq(tx.credits[v])
            with m.If(live):
                over = prev_b[v] & ~prev_s[v] & (prev_c[v] == C)
                with m.If(over):
                    m.d.comb += [Assert(tx.credits[v] == C), Assert(tx.err)]
                with m.Else():
                    back = 0 if self.bug == "credit" else prev_b[v]
                    m.d.comb += Assert(tx.credits[v] == prev_c[v] + back - prev_s[v])
        m.d.sync += [prev_b.eq(tx.credit), prev_s.eq(Cat(*sent))]
        m.d.comb += Assert(sent[0] + sent[1] <= 1)

        # --- RX ---------------------------------------------------------------------------
        f = Signal(flit_layout(cfg))
        covered = sum(w for n, w in link_flit_fields(cfg) if n != "crc")
        crc = rx.crc_unit
        crc_free = Signal()
        m.d.comb += [f.as_value()[:covered].eq(AnySeq(covered)), crc_free.eq(AnySeq(1)),
                     f.crc.eq(Mux(crc_free, AnySeq(32), crc.crc)),
                     rx.w_valid.eq(AnySeq(1)), rx.w_flit.eq(f),
                     rx.expect.eq(0), rx.watchdog.eq(0)]
        for v in range(LINK_VCS):
            m.d.comb += rx.o[v].ready.eq(AnySeq(1))
        exp = [Signal(cfg.link_seq_bits, name=f"exp{v}") for v in range(LINK_VCS)]
        fill = [Signal(range(C + 1), name=f"fill{v}") for v in range(LINK_VCS)]
        arrive = rx.w_valid & ~rx.err
        good = f.crc == crc.crc
        in_order = f.seq == Mux(f.vc, exp[1], exp[0])
        full = Mux(f.vc, fill[1], fill[0]) == C
        want = Signal(8)                       # the error this flit must raise, 0: none
        with m.If(arrive & ~good):
            m.d.comb += want.eq(LINK_FAULTS["crc"])
        with m.Elif(arrive & ~in_order):
            m.d.comb += want.eq(LINK_FAULTS["seq"])
        with m.Elif(arrive & full):
            m.d.comb += want.eq(LINK_FAULTS["overflow"])
        stored = arrive & (want == 0)
        pops = Signal(LINK_VCS)
        m.d.comb += pops.eq(Cat(*(rx.o[v].valid & rx.o[v].ready for v in range(LINK_VCS))))
        for v in range(LINK_VCS):
            m.d.comb += Assert(~(rx.err & rx.o[v].valid))
            inc = stored & (f.vc == v)
            if not (self.bug == "vc1" and v == 1):
                with m.If(inc):
                    m.d.sync += exp[v].eq(exp[v] + 1)
            m.d.sync += fill[v].eq(fill[v] + inc - pops[v])
            m.d.comb += Assert(rx.o[v].valid == ((fill[v] != 0) & ~rx.err))
        was_err, was_want, was_pops = Signal(), Signal(8), Signal(LINK_VCS)
        m.d.sync += [was_err.eq(rx.err), was_want.eq(want), was_pops.eq(pops)]
        with m.If(live):
            m.d.comb += Assert(rx.credit == was_pops)
            with m.If(~was_err & (was_want != 0)):
                m.d.comb += [Assert(rx.err), Assert(rx.err_info == was_want)]
            with m.If(~was_err & (was_want == 0)):
                m.d.comb += Assert(~rx.err)
        return m


def run_bmc(workdir, *, depth=10, bug=None, timeout=1200):
    """Bounded model check of :class:`LinkFormal` for ``depth`` cycles from reset. Returns
    ``(passed, seconds, log)``."""
    return prove(LinkFormal(bug=bug), workdir, "link_formal", depth=depth, memory_map=True,
                 timeout=timeout)
