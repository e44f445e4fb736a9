# SPDX-License-Identifier: Apache-2.0
"""One DMA engine: descriptor queues, an AXI4 master to DRAM and a partition port into SBUF.

Microarchitecture, timing and error behaviour: docs/dma.md §4-§5. In short: ``dma_queues``
FIFOs of descriptors, served round-robin at descriptor boundaries; each is checked in closed
form (:class:`~rtl.dma.descriptor.DescriptorCheck`) while earlier ones run, then walked by two
:class:`~rtl.dma.walker.SegmentWalker` s, the source side into a word FIFO (AXI read bursts or
SBUF word reads) and the destination side out of it (AXI write bursts or SBUF word writes, byte
enables at the row ends), with up to ``dma_outstanding`` AXI reads and writes in flight. Two
descriptors are in flight: the next one's reads start once the running one's reads are issued,
its writes once the running one's are sent; completions are in order (§4.1).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.dma.axi import BURST_INCR, AXI4Signature
from rtl.dma.descriptor import (DESC_LAYOUT, E_AXI, E_TIMEOUT, F_BRESP, F_RRESP, F_TIMEOUT,
                                SPACE_DRAM, DescriptorCheck, esize_log2)
from rtl.dma.element import ElementMover, sr_lane
from rtl.dma.walker import SegmentWalker, seg_layout
from rtl.isa import ERROR_BITS
from rtl.mem.port import PartPort

__all__ = ["DMAEngine", "QUEUE_DEPTH", "DATA_DEPTH", "TIMEOUT_CYCLES", "TIMEOUT_LATER"]

#: Descriptors each queue holds.
QUEUE_DEPTH = 2
#: Words of the FIFO between the source and the destination side.
DATA_DEPTH = 16
#: Default of the AXI watchdog (``DMAEngine(timeout=...)``, the reset value of the future
#: ``DMA_TIMEOUT`` register, issue 14): cycles the engine waits on the AXI slave with nothing
#: moving before it gives the descriptor up with E_TIMEOUT (docs/dma.md §3).
TIMEOUT_CYCLES = 4096
#: ``info`` bit of an E_TIMEOUT given to a DRAM descriptor refused because the bus timed out
#: earlier (the first timeout's detail has it clear).
TIMEOUT_LATER = 1 << 9


class _Expander(wiring.Component):
    """A segment as words: ``cur`` is the current word (address, byte enables, last word of
    the segment), ``take`` moves on; the next segment is taken in the cycle the last word of
    the current one goes, so words follow each other without a gap."""

    def __init__(self, cfg, layout):
        self.W = cfg.sbuf_word_bytes
        self._layout = layout
        super().__init__({
            "seg": In(stream.Signature(layout)),
            "valid": Out(1), "word": Out(layout["word"].shape), "be": Out(self.W),
            "seg_end": Out(1), "take": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.W
        s = Signal(self._layout)
        has = Signal()
        idx = Signal(9)
        end = Signal()
        m.d.comb += end.eq(idx + 1 == s.count)
        m.d.comb += [self.valid.eq(has), self.word.eq(s.word + idx), self.seg_end.eq(end)]
        lanes = Const(sum(1 << b for b in range(W)), W)
        lane_idx = [Const(b, 8) for b in range(W)]
        head = Cat(*[~(s.first & (idx == 0) & (lane_idx[b] < s.soff)) for b in range(W)])
        tail = Cat(*[~(s.last & end & (s.eoff != 0) & (lane_idx[b] >= s.eoff))
                     for b in range(W)])
        m.d.comb += self.be.eq(lanes & head & tail)
        load = ~has | (self.take & end)
        m.d.comb += self.seg.ready.eq(load)
        with m.If(self.take & ~end):
            m.d.sync += idx.eq(idx + 1)
        with m.If(load):
            m.d.sync += [has.eq(self.seg.valid), s.eq(self.seg.payload), idx.eq(0)]
        return m


class DMAEngine(wiring.Component):
    """One DMA engine (docs/dma.md).

    Parameters
    ----------
    cfg : CoreConfig
        ``dma_queues`` (queues, AXI IDs), ``dma_outstanding`` (AXI bursts in flight per
        direction), ``axi_data_bits`` / ``axi_addr_bits`` (the master; the SBUF word is as
        wide), ``partitions`` / ``sbuf_bytes_per_partition`` (the SBUF), ``semaphores``.
    engine : int
        The engine's index in the core (0..): its stochastic-rounding stream is XORWOW lane
        ``2**16 + engine`` of ``cfg.sr_seed`` (docs/dma.md §2).
    timeout : int or None
        The AXI watchdog (default :data:`TIMEOUT_CYCLES`, in [16, 2**24]): a descriptor whose
        AXI traffic sees no handshake for ``timeout`` cycles stops its queue with E_TIMEOUT
        (0x09); the engine then stops using the bus until reset (docs/dma.md §3). ``None``:
        the limit is the ``watchdog`` input instead (the core's ``WATCHDOG`` register; 0 = off).

    Members
    -------
    i : In(stream.Signature(in_layout))
        Descriptors: ``queue``, ``desc`` (:data:`~rtl.dma.descriptor.DESC_LAYOUT`). A
        descriptor for a stopped queue (or a queue number >= ``dma_queues``) is taken and
        dropped; otherwise ``i.ready`` is low while that queue is full.
    axi : Out(AXI4Signature(cfg))
        The AXI4 master (ports ``axi__awid`` ...).
    sbuf : Out(PartPort.Signature(cfg))
        The SBUF partition port.
    sem : Out(stream.Signature(sem_layout))
        Completion posts ``{sem, inc}`` of descriptors with ``post`` set.
    dram_base, dram_limit : In(axi_addr_bits)
        The DRAM window ``[dram_base, dram_limit)``; an access outside it is E_AXI.
    watchdog : In(32)
        The watchdog limit when ``timeout`` is ``None`` (0 = off); unused otherwise.
    clear : In(dma_queues)
        Per queue: restart a stopped queue (clears its code and detail).
    err : Out(1)
        Some queue is stopped (the error interrupt line).
    q_code, q_info : Out(ArrayLayout(ERROR_BITS / 32, dma_queues))
        Per queue: the error code (0 = running) and detail word (docs/dma.md §3).
    completed : Out(ArrayLayout(16, dma_queues))
        Per queue: descriptors completed (wraps).
    busy : Out(1)
        A descriptor is being checked, run or posted (or the datapath flushed).
    idle : Out(1)
        No descriptor is queued or running.
    """

    class Signature(wiring.Signature):
        """Members, layouts and timing constants of a :class:`DMAEngine`: ``in_layout``,
        ``sem_layout``, ``check_latency``, ``element_ops`` (``cfg.dma_element_ops``; False:
        ops and casts are E_DESC)."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "DMAEngine")
            Q = cfg.dma_queues
            self.queue_bits = max(1, (Q - 1).bit_length())
            self.in_layout = data.StructLayout({"queue": self.queue_bits, "desc": DESC_LAYOUT})
            self.sem_layout = data.StructLayout({"sem": 8, "inc": 16})
            self.element_ops = cfg.dma_element_ops
            self.check_latency = DescriptorCheck.Signature(
                cfg, element_ops=self.element_ops).latency
            super().__init__({
                "i": In(stream.Signature(self.in_layout)),
                "axi": Out(AXI4Signature(cfg)),
                "sbuf": Out(PartPort.Signature(cfg)),
                "sem": Out(stream.Signature(self.sem_layout)),
                "dram_base": In(cfg.axi_addr_bits), "dram_limit": In(cfg.axi_addr_bits),
                "watchdog": In(32),
                "clear": In(Q), "err": Out(1),
                "q_code": Out(data.ArrayLayout(ERROR_BITS, Q)), "q_info": Out(data.ArrayLayout(32, Q)),
                "completed": Out(data.ArrayLayout(16, Q)), "busy": Out(1), "idle": Out(1),
            })

    def __init__(self, cfg: CoreConfig, *, timeout=TIMEOUT_CYCLES, engine=0):
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
            raise TypeError(f"DMAEngine timeout must be an int or None, not {timeout!r}")
        if timeout is not None and not 16 <= timeout <= 1 << 24:
            raise ValueError(f"DMAEngine timeout must be in [16, {1 << 24}], not {timeout!r}")
        if isinstance(engine, bool) or not isinstance(engine, int):
            raise TypeError(f"DMAEngine engine must be an int, not {engine!r}")
        if not 0 <= engine < 1 << 16:
            raise ValueError(f"DMAEngine engine must be in [0, {(1 << 16) - 1}], "
                             f"not {engine!r}")
        #: This engine's index: its stochastic-rounding lane is ``sr_lane(engine)``.
        self.engine = engine
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        #: Watchdog limit (cycles waiting on the AXI slave with nothing moving).
        self.timeout = timeout

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        Q = cfg.dma_queues
        W = cfg.sbuf_word_bytes
        lw = W.bit_length() - 1
        axi = self.axi
        asig = AXI4Signature(cfg)
        OUT = cfg.dma_outstanding
        wpp = cfg.sbuf_bytes_per_partition // W          # words per partition
        lwpp = wpp.bit_length() - 1

        # --- queues ------------------------------------------------------------------------
        stopped = Signal(Q)
        qf = []
        for q in range(Q):
            f = fifo.SyncFIFOBuffered(width=DESC_LAYOUT.size, depth=QUEUE_DEPTH)
            m.submodules[f"queue{q}"] = f
            qf.append(f)
        iq = self.i.payload.queue
        # a queue number >= dma_queues (possible when it is not a power of two) is taken and
        # dropped: no producer waits on a queue that does not exist
        m.d.comb += self.i.ready.eq(
            (iq >= Q) | Cat(f.w_rdy | stopped[q] for q, f in enumerate(qf)).bit_select(iq, 1))
        for q, f in enumerate(qf):
            m.d.comb += [f.w_data.eq(self.i.payload.desc),
                         f.w_en.eq(self.i.valid & (iq == q) & ~stopped[q])]

        q_code = Signal(data.ArrayLayout(ERROR_BITS, Q))
        q_info = Signal(data.ArrayLayout(32, Q))
        completed = Signal(data.ArrayLayout(16, Q))
        m.d.comb += [self.q_code.eq(q_code), self.q_info.eq(q_info),
                     self.completed.eq(completed), self.err.eq(stopped.any())]

        # --- descriptors in flight ----------------------------------------------------------
        # Up to two descriptors are in flight, in two slots ("tags" 0 and 1): the one whose
        # source the source walker reads (`rt`), the one whose destination the destination
        # walker writes (`wt`), the oldest (`old`, completed first). The next descriptor's
        # reads start once the previous one's reads are all issued (docs/dma.md §4.1).
        EO = cfg.dma_element_ops
        QW = range(Q) if Q > 1 else 1
        check = m.submodules.check = DescriptorCheck(cfg, element_ops=EO)
        m.d.comb += [check.i.payload.dram_base.eq(self.dram_base),
                     check.i.payload.dram_limit.eq(self.dram_limit)]
        nd = Signal(DESC_LAYOUT, name="next_desc")       # checked, waiting for the back
        nq = Signal(QW, name="next_queue")
        nbad = Signal()                                  # ... and failed its check:
        ncode, ninfo = Signal(ERROR_BITS), Signal(32)    # applied in order (no descriptor in flight)
        rr = Signal(QW)

        td = [Signal(DESC_LAYOUT, name=f"slot{t}_desc") for t in range(2)]
        tq = [Signal(QW, name=f"slot{t}_queue") for t in range(2)]
        v = Signal(2)                   # slot in flight
        wdone = Signal(2)               # slot's destination words all issued
        terr = Signal(2)                # slot saw an AXI error response
        tinfo = [Signal(32, name=f"slot{t}_info") for t in range(2)]
        rpend = [Signal(range(OUT + 1), name=f"slot{t}_rpend") for t in range(2)]
        bpend = [Signal(range(OUT + 1), name=f"slot{t}_bpend") for t in range(2)]
        old, rt, wt = Signal(), Signal(), Signal()
        w_on = Signal()                 # the destination walker works for `wt`
        el_mode = Signal()              # the slot in flight is an element descriptor
        flushing = Signal()

        def pick(t, a, b):
            """Slot ``t``'s ``a`` (slot 0) or ``b`` (slot 1)."""
            return Mux(t, b, a)

        def slot_desc(t):
            return Mux(t, td[1].as_value(), td[0].as_value())
        rdesc = Signal(DESC_LAYOUT, name="read_desc")
        wdesc = Signal(DESC_LAYOUT, name="write_desc")
        odesc = Signal(DESC_LAYOUT, name="old_desc")
        m.d.comb += [rdesc.eq(slot_desc(rt)), wdesc.eq(slot_desc(wt)), odesc.eq(slot_desc(old))]
        oq, rq, wq = pick(old, *tq), pick(rt, *tq), pick(wt, *tq)

        # `flush` (after a watchdog timeout, or to drop a descriptor read ahead of a failed
        # one) empties the datapath: walkers, word expanders, FIFOs back to their reset state
        flush = Signal()
        axi_dead = Signal()             # the bus timed out: no AXI access until reset

        def flushed(sub):
            return ResetInserter(flush)(sub)
        src_w, dst_w = SegmentWalker(cfg), SegmentWalker(cfg)
        m.submodules.src_walk = flushed(src_w)
        m.submodules.dst_walk = flushed(dst_w)
        # the source walker starts from `nd`, the destination walker from `nd` (a descriptor
        # starting alone) or from the slot read ahead (`dsel`)
        dfrom = Signal(DESC_LAYOUT, name="dst_start_desc")
        dst_from_nd = Signal()
        m.d.comb += dfrom.eq(Mux(dst_from_nd, nd.as_value(), slot_desc(~wt)))
        for side, (wk, dd) in enumerate(((src_w, nd), (dst_w, dfrom))):
            es = esize_log2(dd.src_dtype)
            base, sp = (dd.src, dd.src_space) if side == 0 else (dd.dst, dd.dst_space)
            m.d.comb += [wk.base.eq(base), wk.row_bytes.eq(dd.dims[0].num << es),
                         wk.axi.eq(sp == SPACE_DRAM)]
            for k in range(3):
                st = dd.dims[k + 1].src_stride if side == 0 else dd.dims[k + 1].dst_stride
                m.d.comb += [wk.nums[k].eq(dd.dims[k + 1].num), wk.strides[k].eq(st)]

        src_dram = rdesc.src_space == SPACE_DRAM
        dst_dram = wdesc.dst_space == SPACE_DRAM

        # --- the element path (docs/dma.md §4.2): while it runs a descriptor (`el_mode`) it
        # drives the AXI channels and the SBUF port, the byte-moving datapath stays idle --------
        if EO:
            el = m.submodules.element = ElementMover(cfg, lane=sr_lane(self.engine))
            m.d.comb += [el.desc.eq(nd), el.abort.eq(flush)]

        def em(a_el, a_main):
            """``a_el`` in element mode, else the byte path's ``a_main``."""
            return Mux(el_mode, a_el, a_main) if EO else a_main

        def nel(x):
            """``x`` gated off in element mode."""
            return x & ~el_mode if EO else x

        # --- data FIFO between the sides -------------------------------------------------------
        dq = fifo.SyncFIFOBuffered(width=8 * W, depth=DATA_DEPTH)
        m.submodules.data = flushed(dq)

        # --- source: AXI reads ---------------------------------------------------------------
        rd_out = Signal(range(OUT + 1))
        ar_fire = Signal()
        r_last = Signal()
        m.d.comb += [axi.arid.eq(rq),
                     axi.araddr.eq(em(el.ar_addr if EO else 0, src_w.seg.payload.word << lw)),
                     axi.arlen.eq(em(0, src_w.seg.payload.count - 1)), axi.arsize.eq(asig.size),
                     axi.arburst.eq(BURST_INCR),
                     axi.arvalid.eq(em(el.ar_valid if EO else 0, src_w.seg.valid & src_dram)
                                    & (rd_out < OUT) & ~axi_dead & ~flush),
                     ar_fire.eq(axi.arvalid & axi.arready)]
        # a dead bus or a flush: late R beats and B responses are taken and dropped
        m.d.comb += [axi.rready.eq(em(1, dq.w_rdy) | axi_dead | flush),
                     r_last.eq(axi.rvalid & axi.rready & axi.rlast)]
        if EO:
            # the mover sees responses only in element mode (its counters must not take a copy's)
            m.d.comb += [el.ar_ready.eq(axi.arready & (rd_out < OUT) & ~axi_dead),
                         el.r_valid.eq(axi.rvalid & el_mode & ~axi_dead),
                         el.r_data.eq(axi.rdata)]
        with m.If(axi_dead):
            m.d.sync += rd_out.eq(0)
        with m.Else():
            m.d.sync += rd_out.eq(rd_out + ar_fire - r_last)
        # R beats belong to the older slot while it has bursts in flight (a descriptor reads
        # ahead of another queue's only when no read is in flight: one ID, in order)
        r_tag = Signal()
        m.d.comb += r_tag.eq(Mux(pick(~rt, *rpend) != 0, ~rt, rt))

        # --- source: SBUF reads ---------------------------------------------------------------
        sx = _Expander(cfg, seg_layout(cfg))
        m.submodules.src_words = flushed(sx)
        m.d.comb += [sx.seg.valid.eq(src_w.seg.valid & ~src_dram),
                     sx.seg.payload.eq(src_w.seg.payload),
                     src_w.seg.ready.eq(Mux(src_dram, ar_fire, sx.seg.ready))]
        inflight = Signal(range(DATA_DEPTH + 2))
        rsp = self.sbuf.rsp.valid
        rd_req = Signal()                       # an SBUF read issued this cycle
        credit = (inflight + dq.level) < DATA_DEPTH

        # data into the FIFO
        m.d.comb += [dq.w_en.eq(nel(Mux(src_dram, axi.rvalid & axi.rready & ~axi_dead, rsp)
                                    & ~flush)),
                     dq.w_data.eq(Mux(src_dram, axi.rdata, self.sbuf.rsp.payload))]
        m.d.sync += inflight.eq(inflight + rd_req - rsp)

        # --- destination: AXI writes -------------------------------------------------------------
        wr_out = Signal(range(OUT + 1))
        wbursts = Signal(range(OUT + 1))        # AW taken, W beats not all sent
        ws = fifo.SyncFIFOBuffered(width=seg_layout(cfg).size, depth=OUT)
        m.submodules.wsegs = flushed(ws)
        aw_fire = Signal()
        b_fire = Signal()
        m.d.comb += [axi.awid.eq(wq),
                     axi.awaddr.eq(em(el.aw_addr if EO else 0, dst_w.seg.payload.word << lw)),
                     axi.awlen.eq(em(0, dst_w.seg.payload.count - 1)), axi.awsize.eq(asig.size),
                     axi.awburst.eq(BURST_INCR),
                     axi.awvalid.eq(em(el.aw_valid if EO else 0,
                                       dst_w.seg.valid & dst_dram & (wr_out < OUT) & ws.w_rdy)
                                    & ~axi_dead & ~flush),
                     aw_fire.eq(axi.awvalid & axi.awready),
                     ws.w_en.eq(nel(aw_fire)), ws.w_data.eq(dst_w.seg.payload)]
        wx = _Expander(cfg, seg_layout(cfg))
        m.submodules.w_words = flushed(wx)
        m.d.comb += [wx.seg.valid.eq(ws.r_rdy), wx.seg.payload.eq(ws.r_data),
                     ws.r_en.eq(wx.seg.ready)]
        w_fire = Signal()
        m.d.comb += [axi.wvalid.eq(em(el.w_valid if EO else 0, wx.valid & dq.r_rdy & dst_dram)
                                   & ~axi_dead),
                     axi.wdata.eq(em(el.w_data if EO else 0, dq.r_data)),
                     axi.wstrb.eq(em(el.w_strb if EO else 0, wx.be)),
                     axi.wlast.eq(em(1, wx.seg_end)),
                     w_fire.eq(axi.wvalid & axi.wready), wx.take.eq(nel(w_fire))]
        m.d.comb += [axi.bready.eq(1), b_fire.eq(axi.bvalid)]
        if EO:
            m.d.comb += [el.aw_ready.eq(axi.awready), el.w_ready.eq(axi.wready),
                         el.b_valid.eq(axi.bvalid & el_mode & ~axi_dead)]
        with m.If(axi_dead):
            m.d.sync += [wr_out.eq(0), wbursts.eq(0)]
        with m.Else():
            m.d.sync += [wr_out.eq(wr_out + aw_fire - b_fire),
                         wbursts.eq(wbursts + nel(aw_fire) - nel(w_fire & wx.seg_end))]
        # B responses: the older slot's while it awaits some with that ID (one ID is in order;
        # different IDs are told apart by BID)
        b_tag = Signal()
        m.d.comb += b_tag.eq(Mux((pick(~wt, *bpend) != 0) & (axi.bid == pick(~wt, *tq)),
                                 ~wt, wt))
        for t in range(2):
            with m.If(axi_dead):
                m.d.sync += [rpend[t].eq(0), bpend[t].eq(0)]
            with m.Else():
                m.d.sync += [rpend[t].eq(rpend[t] + (ar_fire & (rt == t))
                                         - (r_last & (r_tag == t))),
                             bpend[t].eq(bpend[t] + (aw_fire & (wt == t))
                                         - (b_fire & (b_tag == t)))]

        # --- destination: SBUF writes --------------------------------------------------------
        dx = _Expander(cfg, seg_layout(cfg))
        m.submodules.dst_words = flushed(dx)
        m.d.comb += [dx.seg.valid.eq(dst_w.seg.valid & ~dst_dram),
                     dx.seg.payload.eq(dst_w.seg.payload),
                     dst_w.seg.ready.eq(Mux(dst_dram, aw_fire, dx.seg.ready))]

        # --- the SBUF port: writes first; a request once offered is held until taken ------------
        req = self.sbuf.req
        want_w = dx.valid & dq.r_rdy & ~dst_dram
        want_r = sx.valid & credit & ~src_dram
        held = Signal()                 # a request was offered and not taken last cycle
        held_w = Signal()               # ... and it was the write
        sel_w = Mux(held, held_w, want_w)
        word = em(el.req_word if EO else 0, Mux(sel_w, dx.word, sx.word))
        main_valid = Mux(held, 1, want_w | want_r)
        we = em(el.req_we if EO else 0, sel_w)
        m.d.comb += [req.valid.eq(em(el.req_valid if EO else 0, main_valid) & ~flush),
                     req.payload.part.eq(word[lwpp:]),
                     req.payload.addr.eq(word[:lwpp] << lw),
                     req.payload.we.eq(we), req.payload.be.eq(em(el.req_be if EO else 0, dx.be)),
                     req.payload.wdata.eq(em(el.req_wdata if EO else 0, dq.r_data))]
        fire = req.valid & req.ready
        # (a flush withdraws a request not yet taken: the descriptor is abandoned)
        m.d.sync += [held.eq(nel(req.valid & ~req.ready)), held_w.eq(sel_w)]
        m.d.comb += [dx.take.eq(nel(fire & sel_w)), sx.take.eq(nel(fire & ~sel_w)),
                     rd_req.eq(fire & ~we)]
        m.d.comb += dq.r_en.eq(nel(Mux(dst_dram, w_fire, fire & sel_w)))
        if EO:
            m.d.comb += [el.req_ready.eq(req.ready & ~flush), el.rsp_valid.eq(rsp & el_mode),
                         el.rsp_data.eq(self.sbuf.rsp.payload)]

        # --- AXI errors, per slot: the first error response of its descriptor ------------------
        r_bad = axi.rvalid & axi.rready & axi.rresp[1] & ~axi_dead
        b_bad = axi.bvalid & axi.bresp[1] & ~axi_dead
        for t in range(2):
            with m.If(r_bad & (r_tag == t) & ~terr[t]):
                m.d.sync += [terr[t].eq(1), tinfo[t].eq(F_RRESP | (axi.rresp << 12))]
            with m.Elif(b_bad & (b_tag == t) & ~terr[t]):
                m.d.sync += [terr[t].eq(1),
                             tinfo[t].eq(F_BRESP | (1 << 8) | (axi.bresp << 12))]

        # --- the AXI watchdog -------------------------------------------------------------------
        # counts the cycles in which the engine waits on the slave (an address or W beat
        # offered and not taken, a read burst in flight with room for its data, a write burst
        # waiting for its response) while nothing at all moves (no AXI handshake, no SBUF
        # access); any movement restarts it
        if self.timeout is None:        # the WATCHDOG register: 0 turns the watchdog off
            wd = Signal(32)
            limit_hit = (self.watchdog != 0) & (wd == self.watchdog - 1)
        else:
            wd = Signal(range(self.timeout + 1))
            limit_hit = wd == self.timeout - 1
        wait_r = axi.arvalid | ((rd_out != 0) & axi.rready)
        wait_w = axi.awvalid | axi.wvalid | (wr_out != 0)
        moved = (ar_fire | aw_fire | w_fire | (axi.rvalid & axi.rready) | b_fire | fire)
        wd_hit = Signal()
        wd_info = Signal(32)
        m.d.comb += [wd_hit.eq(limit_hit & (wait_r | wait_w) & ~moved),
                     wd_info.eq(F_TIMEOUT | (Mux(wait_r, 0, 1) << 8))]
        run_state = Signal()
        with m.If(run_state & (wait_r | wait_w) & ~moved & ~axi_dead):
            m.d.sync += wd.eq(wd + 1)
        with m.Else():
            m.d.sync += wd.eq(0)

        # --- the sequencer -------------------------------------------------------------------
        m.d.comb += [self.sem.payload.sem.eq(odesc.sem), self.sem.payload.inc.eq(odesc.inc)]
        ready_q = Cat(f.r_rdy & ~stopped[q] for q, f in enumerate(qf))

        def stop(queue, code, info):
            for q in range(Q):
                with m.If(queue == q):
                    m.d.sync += [stopped[q].eq(1), q_code[q].eq(code), q_info[q].eq(info)]

        def stopped_q(queue):
            return stopped.bit_select(queue, 1)

        # front: take the next descriptor (round-robin) and check it while the back runs the
        # earlier ones; a checked descriptor (or its failed verdict) waits in `nd`
        have_next = Signal()
        front_idle = Signal()
        m.d.comb += check.i.payload.desc.eq(nd)
        with m.FSM(name="front"):
            with m.State("IDLE"):
                m.d.comb += front_idle.eq(~have_next)
                order = [Signal(QW, name=f"rr_order{k}") for k in range(Q)]
                for k in range(Q):
                    m.d.comb += order[k].eq(Mux(rr + k >= Q, (rr + k - Q).as_unsigned(), rr + k))
                pk = Signal(QW)
                found = Signal()
                for k in reversed(range(Q)):
                    with m.If(ready_q.bit_select(order[k], 1)):
                        m.d.comb += [pk.eq(order[k]), found.eq(1)]
                with m.If(found & ~have_next):
                    for q, f in enumerate(qf):
                        with m.If(pk == q):
                            m.d.comb += f.r_en.eq(1)
                            m.d.sync += nd.eq(f.r_data)
                    m.d.sync += [nq.eq(pk), rr.eq(Mux(pk == Q - 1, 0, pk + 1))]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += check.i.valid.eq(1)
                m.next = "VERDICT"
            with m.State("VERDICT"):
                with m.If(check.o.valid):
                    # a queue stopped meanwhile keeps its first error; this descriptor is
                    # dropped. A failed verdict waits for the descriptors before it to
                    # complete (the queue stops in order)
                    with m.If(~stopped_q(nq)):
                        m.d.sync += [have_next.eq(1), nbad.eq(check.o.payload.code != 0),
                                     ncode.eq(check.o.payload.code),
                                     ninfo.eq(check.o.payload.info)]
                    m.next = "IDLE"

        def finish(queue):
            for q in range(Q):
                with m.If(queue == q):
                    m.d.sync += completed[q].eq(completed[q] + 1)

        any_v = v.any()
        free = Signal()                         # the slot a starting descriptor takes
        m.d.comb += free.eq(Mux(v.bit_select(old, 1), ~old, old))
        src_free = ~src_w.busy & ~sx.valid
        dst_free = ~dst_w.busy & ~dx.valid & (wbursts == 0)
        uses_dram = (nd.src_space == SPACE_DRAM) | (nd.dst_space == SPACE_DRAM)
        nd_el = ((nd.op != 0) | (nd.src_dtype != nd.dst_dtype)) if EO else Const(0, 1)
        m.d.comb += [run_state.eq(any_v | flushing), flush.eq(flushing)]

        def take_slot(t):
            m.d.sync += [v.bit_select(t, 1).eq(1), wdone.bit_select(t, 1).eq(0),
                         terr.bit_select(t, 1).eq(0), rt.eq(t)]
            for k in range(2):
                with m.If(t == k):
                    m.d.sync += [td[k].eq(nd), tq[k].eq(nq)]

        with m.If(flushing):
            # one or more cycles of datapath reset; SBUF reads and R beats still in flight are
            # awaited and dropped
            m.d.comb += self.busy.eq(1)
            with m.If(wd_hit & ~axi_dead):
                # (a descriptor awaiting its write responses meanwhile is given up)
                with m.If(v.bit_select(old, 1) & ~stopped_q(oq)):
                    stop(oq, E_TIMEOUT, wd_info)
                m.d.sync += [axi_dead.eq(1), v.eq(0)]
            with m.If((inflight == 0) & ((rd_out == 0) | axi_dead)):
                m.d.sync += flushing.eq(0)
        with m.Elif(any_v & wd_hit):
            # the slave stopped answering: give the oldest descriptor up, stop its queue (and
            # the queue of a descriptor in flight behind it), abandon the bus (AXI cannot
            # cancel bursts) and empty the datapath
            with m.If(~stopped_q(oq)):
                stop(oq, E_TIMEOUT, wd_info)
            other_q = pick(~old, *tq)
            with m.If(v.bit_select(~old, 1) & (other_q != oq) & ~stopped_q(other_q)):
                stop(other_q, E_TIMEOUT, F_TIMEOUT | TIMEOUT_LATER)
            m.d.sync += [axi_dead.eq(1), v.eq(0), w_on.eq(0), el_mode.eq(0), flushing.eq(1)]
        with m.Else():
            m.d.comb += self.busy.eq(any_v)
            # --- start: a descriptor alone (nothing in flight) -----------------------------
            with m.If(~any_v & have_next):
                m.d.sync += have_next.eq(0)
                with m.If(stopped_q(nq)):
                    pass
                with m.Elif(nbad):
                    stop(nq, ncode, ninfo)
                with m.Elif(axi_dead & uses_dram):
                    # the bus timed out before: a DRAM descriptor cannot run
                    stop(nq, E_TIMEOUT, F_TIMEOUT | TIMEOUT_LATER)
                with m.Else():
                    take_slot(free)
                    m.d.sync += [old.eq(free), wt.eq(free)]
                    if EO:
                        m.d.sync += [el_mode.eq(nd_el), w_on.eq(~nd_el)]
                        m.d.comb += [el.start.eq(nd_el), src_w.start.eq(~nd_el),
                                     dst_w.start.eq(~nd_el), dst_from_nd.eq(1)]
                    else:
                        m.d.sync += w_on.eq(1)
                        m.d.comb += [src_w.start.eq(1), dst_w.start.eq(1), dst_from_nd.eq(1)]
            # --- read ahead: the next byte copy's reads start once the running one's reads
            # are all issued; across AXI IDs (queues) or source spaces only when no read is
            # in flight, so the data FIFO stays in order ---------------------------------------
            one_v = any_v & ~v.all()
            same_src = nd.src_space == odesc.src_space
            in_order = (((rd_out == 0) & (inflight == 0))
                        | (same_src & ((nd.src_space != SPACE_DRAM) | (nq == oq))))
            src_done = src_free & ((rt == old) | ~v.bit_select(rt, 1))
            with m.If(one_v & have_next & ~nbad & ~el_mode & ~nd_el & uses_dram & ~axi_dead
                      & src_done & in_order):
                m.d.sync += have_next.eq(0)
                with m.If(~stopped_q(nq)):
                    take_slot(free)
                    m.d.comb += src_w.start.eq(1)
            # --- the destination side: done issuing, then (in the same cycle) on to the slot
            # read ahead -----------------------------------------------------------------------
            wfin = w_on & dst_free & ~el_mode
            with m.If(wfin):
                m.d.sync += [w_on.eq(0), wdone.bit_select(wt, 1).eq(1)]
            nxt = ~wt
            nq_w = pick(nxt, *tq)
            drop = stopped_q(nq_w) | (v.bit_select(wt, 1) & terr.bit_select(wt, 1)
                                      & (wq == nq_w))
            with m.If((~w_on | wfin) & ~el_mode & v.bit_select(nxt, 1)
                      & ~wdone.bit_select(nxt, 1)):
                with m.If(drop):
                    # its queue stopped (an error of the descriptor before it): its reads
                    # are dropped, it writes nothing
                    m.d.sync += [v.bit_select(nxt, 1).eq(0), flushing.eq(1)]
                with m.Else():
                    m.d.comb += dst_w.start.eq(1)
                    m.d.sync += [wt.eq(nxt), w_on.eq(1)]
            # --- completion of the oldest, in order ----------------------------------------------
            ok_bytes = ((wdone.bit_select(old, 1) | (wfin & (wt == old)))
                        & (pick(old, *bpend) == 0)
                        & (pick(old, *rpend) == 0)
                        & ((rt != old) | (src_free & (inflight == 0))))
            done_ok = Mux(el_mode, ~el.busy, ok_bytes) if EO else ok_bytes
            with m.If(v.bit_select(old, 1) & done_ok):
                retire = Signal()
                with m.If(stopped_q(oq)):
                    # behind an error of its queue (it ran ahead): not completed
                    m.d.comb += retire.eq(1)
                with m.Elif(terr.bit_select(old, 1)):
                    stop(oq, E_AXI, pick(old, *tinfo))
                    m.d.comb += retire.eq(1)
                with m.Elif(odesc.post):
                    m.d.comb += self.sem.valid.eq(1)
                    with m.If(self.sem.ready):
                        finish(oq)
                        m.d.comb += retire.eq(1)
                with m.Else():
                    finish(oq)
                    m.d.comb += retire.eq(1)
                with m.If(retire):
                    m.d.sync += [v.bit_select(old, 1).eq(0), old.eq(~old), el_mode.eq(0)]
        m.d.comb += self.idle.eq(front_idle & ~any_v & ~flushing
                                 & ~Cat(f.level != 0 for f in qf).any())
        with m.If(~front_idle):
            m.d.comb += self.busy.eq(1)

        # stopped queues drain; clear restarts them
        for q, f in enumerate(qf):
            with m.If(stopped[q]):
                m.d.comb += f.r_en.eq(1)
            with m.If(self.clear[q]):
                m.d.sync += [stopped[q].eq(0), q_code[q].eq(0), q_info[q].eq(0)]
        return m
