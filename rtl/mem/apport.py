# SPDX-License-Identifier: Apache-2.0
"""Access-pattern reader and writer: an :class:`~rtl.mem.ap.APGenerator` driving a
:class:`~rtl.mem.port.RowPort` (docs/memory.md §7). Every engine reads and writes SBUF / PSUM
through these; none walks addresses by hand."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.isa import ERROR_BITS
from rtl.mem.ap import MEM_PSUM, MEM_SBUF, APGenerator
from rtl.mem.port import LANE_BITS, PSUM, SBUF, RowPort

__all__ = ["APReader", "APWriter", "element_layout"]


def element_layout(cfg: CoreConfig):
    """One element beat: ``data`` (``ArrayLayout(32, partitions)``, lane p = partition p, the
    element right-aligned and zero-extended), ``mask`` (the AP's partitions), ``last`` (the AP's last element)."""
    return data.StructLayout({"data": data.ArrayLayout(LANE_BITS, cfg.partitions),
                              "mask": cfg.partitions, "last": 1})


def _check_memory(memory):
    if memory not in (SBUF, PSUM):
        raise ValueError(f"AP port memory must be 'sbuf' or 'psum', not {memory!r}")
    return MEM_SBUF if memory == SBUF else MEM_PSUM


def _gen_input(m, gen, desc, code):
    """Feed descriptor ``desc`` to ``gen``, with a memory code other than ``code`` replaced by
    0 (illegal): a descriptor for the other memory is rejected as E_AP_FORM, nothing accessed."""
    m.d.comb += [gen.i.payload.eq(desc), gen.i.payload.mem.eq(Mux(desc.mem == code, code, 0))]


def _row_addr(memory, byte_addr, bits):
    """Row-port address of an AP byte address: SBUF bytes (lane bits ignored), PSUM entries."""
    return byte_addr[2:2 + bits] if memory == PSUM else byte_addr[:bits]


class APReader(wiring.Component):
    """Walks an access pattern over a row port and streams the elements it reads.

    A descriptor on ``i`` is checked by the :class:`~rtl.mem.ap.APGenerator` (rejected:
    ``err`` strobe, ``err_code``, no access); an accepted one issues one read per element on
    ``port`` (all partitions of the AP at once) and streams, per element, the 32-bit lane of
    every partition shifted right by the element's byte offset inside the lane (``addr % 4``)
    and cut to the element's ``8 * elem_bytes`` bits: the element right-aligned and
    zero-extended, with the AP's ``mask`` and ``last``. (A 4-byte element is the whole lane,
    e.g. several packed narrow codes.)

    Back-pressure both ways: a read is issued only when the output buffer (``depth`` elements)
    has room for its data, so ``o.ready`` low stops the reads and no data is ever lost; ``req``
    stalls from the memory stop the walk. With both always ready, one element per cycle:
    the first element leaves ``latency`` cycles after the descriptor was taken, and a
    descriptor of n elements occupies the reader for n + ``APGenerator`` overhead cycles.

    Parameters
    ----------
    cfg : CoreConfig
    memory : "sbuf" or "psum"
        The memory of ``port``; a descriptor naming the other memory is rejected (E_AP_FORM).
    mem_latency : int
        The memory's read latency (``SBUF.Signature(...).latency``,
        ``PsumUnit.Signature(...).row_latency``); sizes the output buffer for full rate.
    depth : int or None
        Output buffer (elements), at least ``mem_latency + 2`` (the default, enough for full
        rate); deeper lets the walk run ahead of a consumer that pauses.
    prefetch : bool
        Two :class:`~rtl.mem.ap.APGenerator` taking descriptors alternately: the next
        descriptor is checked while the current one is walked, so back-to-back descriptors
        stream with no gap (one element per cycle across descriptor boundaries) instead of
        ``APGenerator`` overhead + 1 cycles between them; costs a second generator.

    Members
    -------
    i : In(stream.Signature(APGenerator.Signature(cfg).in_layout))
    o : Out(stream.Signature(element_layout(cfg)))
    port : Out(RowPort.Signature(cfg, memory))
    err, ok : Out(1)
        One-cycle strobes: the descriptor just checked was rejected / accepted.
    err_code : Out(ERROR_BITS)
    busy : Out(1)
        Walking, or elements in flight or buffered.
    """

    class Signature(wiring.Signature):
        """Members of an :class:`APReader`; attributes ``desc_layout``, ``elem_layout``,
        ``depth`` (output buffer), ``latency`` (descriptor taken -> first element, no stalls),
        ``memory``."""

        def __init__(self, cfg: CoreConfig, memory: str, *, mem_latency=1, depth=None,
                     prefetch=False):
            check_config(cfg, "APReader")
            _check_memory(memory)
            if isinstance(mem_latency, bool) or not isinstance(mem_latency, int) \
                    or not 0 <= mem_latency <= 8:
                raise ValueError(f"APReader mem_latency must be an integer in [0, 8], "
                                 f"not {mem_latency!r}")
            full = mem_latency + 2
            if depth is None:
                depth = full
            if isinstance(depth, bool) or not isinstance(depth, int) or not full <= depth <= 64:
                raise ValueError(f"APReader depth must be an integer in [{full}, 64], "
                                 f"not {depth!r}")
            gs = APGenerator.Signature(cfg)
            self.memory, self.mem_latency = memory, mem_latency
            self.desc_layout, self.elem_layout = gs.in_layout, element_layout(cfg)
            self.depth = depth
            self.prefetch = bool(prefetch)
            # generator latency, memory latency, one buffer cycle
            self.latency = gs.latency + mem_latency + 1
            super().__init__({
                "i": In(stream.Signature(self.desc_layout)),
                "o": Out(stream.Signature(self.elem_layout)),
                "port": Out(RowPort.Signature(cfg, memory)),
                "err": Out(1), "ok": Out(1), "err_code": Out(ERROR_BITS), "busy": Out(1),
            })

    def __init__(self, cfg: CoreConfig, memory: str = SBUF, *, mem_latency=1, depth=None,
                 prefetch=False):
        super().__init__(self.Signature(cfg, memory, mem_latency=mem_latency, depth=depth,
                                        prefetch=prefetch))
        self.cfg = cfg

    @property
    def latency(self):
        """Cycles from a descriptor taken to its first element on ``o`` (no stalls)."""
        return self.signature.latency

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P = cfg.partitions
        code = _check_memory(sig.memory)
        gens, esz = [], []
        for k in range(2 if sig.prefetch else 1):
            g = APGenerator(cfg)
            m.submodules[f"gen{k}"] = g
            _gen_input(m, g, self.i.payload, code)
            gens.append(g)
            e = Signal(2, name=f"esize{k}")           # of the descriptor gen k walks
            with m.If(g.i.valid & g.i.ready):
                m.d.sync += e.eq(self.i.payload.esize)
            esz.append(e)
        if len(gens) == 1:
            gen = gens[0]
            m.d.comb += [gen.i.valid.eq(self.i.valid), self.i.ready.eq(gen.i.ready),
                         self.err.eq(gen.err), self.ok.eq(gen.ok),
                         self.err_code.eq(gen.err_code)]
            gv, gb, esize = gen.o.valid, gen.o.payload, esz[0]
            busy = gen.busy
        else:
            # Two generators, descriptors dealt alternately (``nxt``); the output follows
            # descriptor order (``turn``): the next descriptor is checked while the current
            # one is walked, so consecutive walks join with no gap.
            g0, g1 = gens
            nxt, turn, last1 = Signal(name="nxt"), Signal(name="turn"), Signal(name="last1")
            perr = [Signal(name=f"perr{k}") for k in range(2)]
            m.d.comb += [g0.i.valid.eq(self.i.valid & ~nxt), g1.i.valid.eq(self.i.valid & nxt),
                         self.i.ready.eq(Mux(nxt, g1.i.ready, g0.i.ready))]
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += nxt.eq(~nxt)
            s1 = g1.err | g1.ok
            with m.If(g0.err | g0.ok | s1):
                m.d.sync += last1.eq(s1)
            m.d.comb += [self.err.eq(g0.err | g1.err), self.ok.eq(g0.ok | g1.ok),
                         self.err_code.eq(Mux(s1 | (~(g0.err | g0.ok) & last1),
                                              g1.err_code, g0.err_code))]
            gv = Mux(turn, g1.o.valid, g0.o.valid)
            gb = data.View(g0.o.payload.shape(), Mux(turn, g1.o.payload.as_value(),
                                                      g0.o.payload.as_value()))
            esize = Mux(turn, esz[1], esz[0])
            for k, g in enumerate(gens):
                with m.If(g.err & (turn != k)):
                    m.d.sync += perr[k].eq(1)
            t_perr = Mux(turn, perr[1], perr[0])
            t_err = Mux(turn, g1.err, g0.err)
            with m.If(t_perr):
                m.d.sync += [perr[0].eq(perr[0] & turn), perr[1].eq(perr[1] & ~turn)]
            done_walk = gv & Mux(turn, g1.o.ready, g0.o.ready) & gb.last
            with m.If(t_perr | t_err | done_walk):
                m.d.sync += turn.eq(~turn)
            busy = g0.busy | g1.busy | perr[0] | perr[1]

        meta = data.StructLayout({"shift": 2, "esize": 2, "mask": P, "last": 1})
        m.submodules.meta = mf = fifo.SyncFIFO(width=meta.size, depth=sig.depth)
        m.submodules.data = df = fifo.SyncFIFO(width=P * LANE_BITS, depth=sig.depth)
        used = Signal(range(sig.depth + 1))
        room = used < sig.depth
        req = self.port.req
        b = gb
        issue = req.valid & req.ready
        take = self.o.valid & self.o.ready
        for k, g in enumerate(gens):
            m.d.comb += g.o.ready.eq(req.ready & room & ((turn == k) if len(gens) > 1 else 1))
        m.d.comb += [
            req.valid.eq(gv & room),
            req.payload.addr.eq(_row_addr(sig.memory, b.addr, len(req.payload.addr))),
            req.payload.mask.eq(b.mask),
            req.payload.we.eq(0),
            mf.w_en.eq(issue),
            mf.w_data.eq(Cat(b.addr[:2], esize, b.mask, b.last)),
            df.w_en.eq(self.port.rsp.valid),
            df.w_data.eq(self.port.rsp.payload),
            self.o.valid.eq(df.r_rdy & mf.r_rdy),
            mf.r_en.eq(take), df.r_en.eq(take),
        ]
        m.d.sync += used.eq(used + issue - take)
        mv = data.View(meta, mf.r_data)
        lanes = data.View(data.ArrayLayout(LANE_BITS, P), df.r_data)
        m.d.comb += [self.o.payload.mask.eq(mv.mask), self.o.payload.last.eq(mv.last)]
        keep = Mux(mv.esize == 0, 0xFF, Mux(mv.esize == 1, 0xFFFF, 0xFFFFFFFF))
        for p in range(P):
            m.d.comb += self.o.payload.data[p].eq((lanes[p] >> Cat(0, 0, 0, mv.shift)) & keep)
        m.d.comb += self.busy.eq(busy | (used != 0))
        return m


class APWriter(wiring.Component):
    """Walks an access pattern over a row port and writes the elements it is given.

    A descriptor on ``i`` is checked by the :class:`~rtl.mem.ap.APGenerator` (rejected:
    ``err`` strobe, ``err_code``, nothing written and no element consumed); an accepted one
    takes one element per address from ``el`` (lane p = partition p, the element right-aligned,
    as :class:`APReader` produces them; ``el.mask``/``el.last`` are ignored, the AP's apply) and
    writes its ``elem_bytes`` bytes at the element's byte position (byte enables), in every
    partition of the AP. One write per cycle while ``el.valid`` and the memory allow; the
    write of element k is issued in the cycle element k is taken.

    Parameters
    ----------
    cfg : CoreConfig
    memory : "sbuf" or "psum"

    Members
    -------
    i : In(stream.Signature(APGenerator.Signature(cfg).in_layout))
    el : In(stream.Signature(element_layout(cfg)))
    port : Out(RowPort.Signature(cfg, memory))
        Writes only (``rsp`` unused).
    err, err_code, busy : Out
    done : Out(1)
        One-cycle strobe, in the cycle the AP's last write is granted.
    """

    class Signature(wiring.Signature):
        """Members of an :class:`APWriter`; attributes ``desc_layout``, ``elem_layout``,
        ``latency`` (descriptor taken -> first write issued, no stalls), ``memory``."""

        def __init__(self, cfg: CoreConfig, memory: str):
            check_config(cfg, "APWriter")
            _check_memory(memory)
            gs = APGenerator.Signature(cfg)
            self.memory = memory
            self.desc_layout, self.elem_layout = gs.in_layout, element_layout(cfg)
            self.latency = gs.latency
            super().__init__({
                "i": In(stream.Signature(self.desc_layout)),
                "el": In(stream.Signature(self.elem_layout)),
                "port": Out(RowPort.Signature(cfg, memory)),
                "err": Out(1), "err_code": Out(ERROR_BITS), "busy": Out(1), "done": Out(1),
            })

    def __init__(self, cfg: CoreConfig, memory: str = SBUF):
        super().__init__(self.Signature(cfg, memory))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P = cfg.partitions
        code = _check_memory(sig.memory)
        m.submodules.gen = gen = APGenerator(cfg)
        _gen_input(m, gen, self.i.payload, code)
        m.d.comb += [gen.i.valid.eq(self.i.valid), self.i.ready.eq(gen.i.ready),
                     self.err.eq(gen.err), self.err_code.eq(gen.err_code),
                     self.busy.eq(gen.busy)]
        esize = Signal(2)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += esize.eq(self.i.payload.esize)
        req = self.port.req
        b = gen.o.payload
        shift = b.addr[:2]
        ones = Mux(esize == 0, 0b0001, Mux(esize == 1, 0b0011, 0b1111))
        fire = req.valid & req.ready
        m.d.comb += [
            req.valid.eq(gen.o.valid & self.el.valid),
            gen.o.ready.eq(req.ready & self.el.valid),
            self.el.ready.eq(req.ready & gen.o.valid),
            req.payload.addr.eq(_row_addr(sig.memory, b.addr, len(req.payload.addr))),
            req.payload.mask.eq(b.mask),
            req.payload.we.eq(1),
            req.payload.be.eq((ones << shift)[:4]),
        ]
        for p in range(P):
            m.d.comb += req.payload.wdata[p].eq(
                (self.el.payload.data[p] << Cat(0, 0, 0, shift))[:LANE_BITS])
        m.d.comb += self.done.eq(fire & b.last)
        return m
