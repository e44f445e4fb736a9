# SPDX-License-Identifier: Apache-2.0
"""The ring link's ports (docs/collectives.md §2-§6): :class:`LinkTX` sends flits, :class:`LinkRX`
receives them; between them a :class:`rtl.collective.delay.DelayLine` each way models the wire.

One link carries one flit per cycle forward (``w_valid``, ``w_flit``) and one credit-return
mask per cycle back (``credit``, bit v: one credit of virtual channel v). Each of the
``LINK_VCS`` = 2 virtual channels has its own receive FIFO of ``link_credits`` flits at the RX
port and its own credit counter at the TX port, so a flit waiting on one VC never blocks the
other. A TX port built with ``dateline=True`` (the ring's wrap-around link in its direction)
sends every flit on VC1: a flit switches from VC0 to VC1 when it crosses the dateline and
stays there, which breaks the cycle of buffer dependencies around the ring (no deadlock).

Errors (code ``E_LINK``, ``err_info`` one of :data:`rtl.config.LINK_FAULTS`; the first one is
kept until reset): the RX port checks each flit's CRC-32C and its sequence number (one counter
per VC, stamped by the sending port), and stops: from the next cycle it delivers nothing, stores
nothing and returns no credit. The TX port reports a credit return past ``link_credits`` and, by
its watchdog, credits outstanding with none returned for ``watchdog`` cycles (a lost credit, a
silent or stopped receiver); the RX port's watchdog reports a link silent for ``watchdog``
cycles while ``expect`` is high. After an error a TX port takes (and drops) every offered flit,
so nothing upstream waits on it.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.collective.crc import LinkCRC
from rtl.config import LINK_CHUNK_BITS, LINK_FAULTS, LINK_STREAM_BITS, LINK_VCS, CoreConfig, \
    check_config, link_flit_fields
from rtl.isa import E_LINK

__all__ = ["flit_layout", "payload_layout", "LinkTX", "LinkRX", "LinkPort", "WATCHDOG_BITS"]

#: Width of the watchdog limit input (the core's ``WATCHDOG`` register).
WATCHDOG_BITS = 32


def flit_layout(cfg):
    """The flit on the wire: :func:`rtl.config.link_flit_fields`, least significant first."""
    return data.StructLayout(dict(link_flit_fields(cfg)))


def payload_layout(cfg):
    """What a sender gives a TX port and an RX port delivers: the flit without ``vc``, ``seq``,
    ``pad`` and ``crc``."""
    return data.StructLayout({"data": cfg.link_bits, "src": cfg.link_src_bits, "last": 1,
                              "stream": LINK_STREAM_BITS, "chunk": LINK_CHUNK_BITS})


def _covered(cfg):
    return sum(w for n, w in link_flit_fields(cfg) if n != "crc")


class LinkTX(wiring.Component):
    """The sending port of one link.

    Input ``i[v]`` carries the flits that arrived on (or, for a flit this core injects, start
    on) VC ``v``; they leave on VC ``v | dateline``. Each cycle the port takes at most one
    flit: the first input, round-robin after the one served last, that is valid and whose
    outgoing VC has a credit (``ready`` may depend on ``valid``). The flit leaves registered
    the next cycle on ``w_valid``/``w_flit`` with the VC, the VC's next sequence number and its
    CRC-32C.

    Parameters
    ----------
    cfg : CoreConfig
        ``link_bits``, ``link_credits``, ``ring_size``.
    dateline : bool
        This link is its direction's dateline (every flit leaves on VC1).

    Members
    -------
    i : In(stream.Signature(payload_layout(cfg))).array(LINK_VCS)
    w_valid : Out(1); w_flit : Out(flit_layout(cfg))
    credit : In(LINK_VCS)
        Returned credits, one bit per VC (from the reverse wire).
    credits : Out(range(link_credits + 1)).array(LINK_VCS)
        The credit counters.
    watchdog : In(32)
        Cycles a VC's credits may stay outstanding with none returned; 0 = no limit.
    err, err_code, err_info : Out(1), Out(8), Out(8)
    """

    class Signature(wiring.Signature):
        """Members and ``latency`` (input taken to ``w_valid``) of a :class:`LinkTX`."""

        def __init__(self, cfg: CoreConfig, *, dateline=False):
            check_config(cfg, "LinkTX")
            if not isinstance(dateline, bool):
                raise TypeError(f"LinkTX dateline must be a bool, not {dateline!r}")
            self.dateline = dateline
            self.latency = 1
            super().__init__({
                "i": In(stream.Signature(payload_layout(cfg))).array(LINK_VCS),
                "w_valid": Out(1), "w_flit": Out(flit_layout(cfg)),
                "credit": In(LINK_VCS),
                "credits": Out(range(cfg.link_credits + 1)).array(LINK_VCS),
                "watchdog": In(WATCHDOG_BITS),
                "err": Out(1), "err_code": Out(8), "err_info": Out(8),
            })

    def __init__(self, cfg: CoreConfig, *, dateline=False):
        super().__init__(self.Signature(cfg, dateline=dateline))
        self.cfg, self.dateline = cfg, dateline

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        C = cfg.link_credits
        credit = [Signal(range(C + 1), init=C, name=f"credit{v}") for v in range(LINK_VCS)]
        seq = [Signal(cfg.link_seq_bits, name=f"seq{v}") for v in range(LINK_VCS)]
        rr = Signal(init=1)                     # the input served last
        err = Signal()
        info = Signal(8)
        for v in range(LINK_VCS):
            m.d.comb += self.credits[v].eq(credit[v])

        # VC v's flits leave on VC (v | dateline)
        vo_of = [Const(v | self.dateline, 1) for v in range(LINK_VCS)]
        elig = [self.i[v].valid & (Mux(vo_of[v], credit[1], credit[0]) != 0) & ~err
                for v in range(LINK_VCS)]
        g0 = Signal()
        g1 = Signal()
        m.d.comb += [g0.eq(elig[0] & (rr | ~elig[1])), g1.eq(elig[1] & (~rr | ~elig[0]))]
        take = g0 | g1
        for v, g in enumerate((g0, g1)):
            m.d.comb += self.i[v].ready.eq(err | g)

        # the flit: header from the granted input, VC, sequence number, CRC
        p = Signal(payload_layout(cfg))
        m.d.comb += p.eq(Mux(g1, self.i[1].payload, self.i[0].payload))
        vo = Signal()
        m.d.comb += vo.eq(Mux(g1, vo_of[1], vo_of[0]))
        nf = Signal(flit_layout(cfg))
        m.d.comb += [nf.data.eq(p.data), nf.src.eq(p.src), nf.vc.eq(vo), nf.last.eq(p.last),
                     nf.stream.eq(p.stream), nf.chunk.eq(p.chunk),
                     nf.seq.eq(Mux(vo, seq[1], seq[0]))]
        crc = m.submodules.crc = LinkCRC(_covered(cfg))
        m.d.comb += [crc.data.eq(nf.as_value()[:_covered(cfg)]), nf.crc.eq(crc.crc)]
        m.d.sync += self.w_valid.eq(take)
        with m.If(take):
            m.d.sync += [self.w_flit.eq(nf), rr.eq(g1)]
            with m.If(vo):
                m.d.sync += seq[1].eq(seq[1] + 1)
            with m.Else():
                m.d.sync += seq[0].eq(seq[0] + 1)

        # credits: -1 per flit sent, +1 per credit returned; a return past C is an error
        overflow = Signal()
        over = []
        for v in range(LINK_VCS):
            sent = take & (vo == v)
            back = self.credit[v]
            ov = back & ~sent & (credit[v] == C)
            over.append(ov)
            with m.If(~ov):
                m.d.sync += credit[v].eq(credit[v] + back - sent)
        m.d.comb += overflow.eq(Cat(*over).any())

        # watchdog: credits of a VC outstanding and none returned for `watchdog` cycles in a
        # row (a flit waits for a credit, or a credit was lost)
        timeout = Signal()
        outs = []
        for v in range(LINK_VCS):
            wd = Signal(WATCHDOG_BITS, name=f"wd{v}")
            waiting = (credit[v] != C) & ~self.credit[v] & ~err & (self.watchdog != 0)
            with m.If(waiting):
                m.d.sync += wd.eq(wd + 1)
            with m.Else():
                m.d.sync += wd.eq(0)
            outs.append(waiting & (wd + 1 >= self.watchdog))
        m.d.comb += timeout.eq(Cat(*outs).any())

        with m.If(~err & (overflow | timeout)):
            m.d.sync += [err.eq(1), info.eq(Mux(overflow, LINK_FAULTS["credit_overflow"],
                                                LINK_FAULTS["credit_timeout"]))]
        m.d.comb += [self.err.eq(err), self.err_info.eq(info),
                     self.err_code.eq(Mux(err, E_LINK, 0))]
        return m


class LinkRX(wiring.Component):
    """The receiving port of one link.

    A flit arriving on ``w_valid``/``w_flit`` is stored in its VC's FIFO (``link_credits``
    flits) when its CRC-32C matches, its sequence number is the VC's next one and the FIFO has
    room (by the credits it always has; a full FIFO is an error); ``o[v]`` offers it from the
    next cycle. Each flit taken from ``o[v]`` returns one credit of VC v, registered, on
    ``credit``.

    Parameters
    ----------
    cfg : CoreConfig
        ``link_bits``, ``link_credits``, ``ring_size``.

    Members
    -------
    w_valid : In(1); w_flit : In(flit_layout(cfg))
    o : Out(stream.Signature(payload_layout(cfg))).array(LINK_VCS)
    credit : Out(LINK_VCS)
    expect : In(1)
        A flit is awaited: the silence watchdog runs.
    watchdog : In(32)
        Cycles the link may stay silent while ``expect``; 0 = no limit.
    err, err_code, err_info : Out(1), Out(8), Out(8)
    """

    class Signature(wiring.Signature):
        """Members and ``latency`` (``w_valid`` to ``o.valid``) of a :class:`LinkRX`."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "LinkRX")
            self.latency = 1
            super().__init__({
                "w_valid": In(1), "w_flit": In(flit_layout(cfg)),
                "o": Out(stream.Signature(payload_layout(cfg))).array(LINK_VCS),
                "credit": Out(LINK_VCS),
                "expect": In(1), "watchdog": In(WATCHDOG_BITS),
                "err": Out(1), "err_code": Out(8), "err_info": Out(8),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        #: The CRC-32C of the arriving flit's covered bits (its ``crc`` output is what the
        #: flit's ``crc`` field is compared with; the formal check reads it).
        self.crc_unit = LinkCRC(_covered(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        lay = payload_layout(cfg)
        err = Signal()
        info = Signal(8)
        f = self.w_flit
        crc = m.submodules.crc = self.crc_unit
        m.d.comb += crc.data.eq(f.as_value()[:_covered(cfg)])
        crc_good = crc.crc == f.crc
        exp = [Signal(cfg.link_seq_bits, name=f"exp{v}") for v in range(LINK_VCS)]
        seq_good = f.seq == Mux(f.vc, exp[1], exp[0])
        fifos = [fifo.SyncFIFO(width=lay.size, depth=cfg.link_credits)
                 for _ in range(LINK_VCS)]
        full = Mux(f.vc, ~fifos[1].w_rdy, ~fifos[0].w_rdy)
        arrive = self.w_valid & ~err
        accept = arrive & crc_good & seq_good & ~full
        w = Signal(lay)
        m.d.comb += [w.data.eq(f.data), w.src.eq(f.src), w.last.eq(f.last),
                     w.stream.eq(f.stream), w.chunk.eq(f.chunk)]
        pops = []
        for v, q in enumerate(fifos):
            m.submodules[f"fifo{v}"] = q
            hit = accept & (f.vc == v)
            m.d.comb += [q.w_data.eq(w), q.w_en.eq(hit),
                         self.o[v].valid.eq(q.r_rdy & ~err),
                         self.o[v].payload.eq(q.r_data),
                         q.r_en.eq(self.o[v].ready & ~err)]
            with m.If(hit):
                m.d.sync += exp[v].eq(exp[v] + 1)
            pops.append(self.o[v].valid & self.o[v].ready)
        m.d.sync += self.credit.eq(Cat(*pops))

        # silence watchdog
        wd = Signal(WATCHDOG_BITS)
        quiet = self.expect & ~self.w_valid & ~err & (self.watchdog != 0)
        with m.If(quiet):
            m.d.sync += wd.eq(wd + 1)
        with m.Else():
            m.d.sync += wd.eq(0)
        silent = quiet & (wd + 1 >= self.watchdog)

        kind = Signal(8)
        with m.If(arrive & ~crc_good):
            m.d.comb += kind.eq(LINK_FAULTS["crc"])
        with m.Elif(arrive & ~seq_good):
            m.d.comb += kind.eq(LINK_FAULTS["seq"])
        with m.Elif(arrive & full):
            m.d.comb += kind.eq(LINK_FAULTS["overflow"])
        with m.Elif(silent):
            m.d.comb += kind.eq(LINK_FAULTS["silent"])
        with m.If(~err & (kind != 0)):
            m.d.sync += [err.eq(1), info.eq(kind)]
        m.d.comb += [self.err.eq(err), self.err_info.eq(info),
                     self.err_code.eq(Mux(err, E_LINK, 0))]
        return m


class LinkPort(wiring.Component):
    """A core's port toward one ring neighbour: the :class:`LinkTX` of the link to it and the
    :class:`LinkRX` of the link from it (what ``make synth`` reports as one link port).

    Parameters
    ----------
    cfg : CoreConfig
    dateline : bool
        The TX link is its direction's dateline.

    Members
    -------
    tx : Out(LinkTX.Signature(cfg, dateline=dateline))
    rx : Out(LinkRX.Signature(cfg))
    """

    class Signature(wiring.Signature):
        """Members of a :class:`LinkPort`."""

        def __init__(self, cfg: CoreConfig, *, dateline=False):
            check_config(cfg, "LinkPort")
            super().__init__({"tx": Out(LinkTX.Signature(cfg, dateline=dateline)),
                              "rx": Out(LinkRX.Signature(cfg))})

    def __init__(self, cfg: CoreConfig, *, dateline=False):
        super().__init__(self.Signature(cfg, dateline=dateline))
        self.cfg, self.dateline = cfg, dateline

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = LinkTX(self.cfg, dateline=self.dateline)
        m.submodules.rx = rx = LinkRX(self.cfg)
        for outer, inner in ((self.tx, tx), (self.rx, rx)):
            pairs = zip(outer.signature.flatten(outer), inner.signature.flatten(inner))
            for (_, member, o), (_, _, i) in pairs:
                m.d.comb += i.eq(o) if member.flow == In else o.eq(i)
        return m
