# SPDX-License-Identifier: Apache-2.0
"""One DMA engine: descriptor queues, an AXI4 master to DRAM and a partition port into SBUF.

Microarchitecture, timing and error behaviour: docs/dma.md §4-§5. In short: ``dma_queues``
FIFOs of descriptors, served round-robin at descriptor boundaries; one descriptor at a time is
checked in closed form (:class:`~rtl.dma.descriptor.DescriptorCheck`) and then walked by two
:class:`~rtl.dma.walker.SegmentWalker` s, the source side into a word FIFO (AXI read bursts or
SBUF word reads) and the destination side out of it (AXI write bursts or SBUF word writes, byte
enables at the row ends), with up to ``dma_outstanding`` AXI reads and writes in flight.
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
        A descriptor is being checked, run or posted.
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

        # --- the current descriptor ----------------------------------------------------------
        d = Signal(DESC_LAYOUT, name="cur_desc")
        cq = Signal(range(Q) if Q > 1 else 1, name="cur_queue")
        rr = Signal(range(Q) if Q > 1 else 1)
        EO = cfg.dma_element_ops
        check = m.submodules.check = DescriptorCheck(cfg, element_ops=EO)
        m.d.comb += [check.i.payload.dram_base.eq(self.dram_base),
                     check.i.payload.dram_limit.eq(self.dram_limit)]

        nd = Signal(DESC_LAYOUT, name="next_desc")       # checked, waiting for the back
        nq = Signal(range(Q) if Q > 1 else 1, name="next_queue")
        # the walkers latch their side of `nd` when the back takes it
        # `flush` (after a watchdog timeout) empties the datapath: walkers, word expanders,
        # FIFOs and counters back to their reset state
        flush = Signal()
        axi_dead = Signal()             # the bus timed out: no AXI access until reset

        def flushed(sub):
            return ResetInserter(flush)(sub)
        src_w, dst_w = SegmentWalker(cfg), SegmentWalker(cfg)
        m.submodules.src_walk = flushed(src_w)
        m.submodules.dst_walk = flushed(dst_w)
        es = Signal(2)
        m.d.comb += es.eq(esize_log2(nd.src_dtype))
        for side, (wk, base, sp) in enumerate(((src_w, nd.src, nd.src_space),
                                              (dst_w, nd.dst, nd.dst_space))):
            m.d.comb += [wk.base.eq(base), wk.row_bytes.eq(nd.dims[0].num << es),
                         wk.axi.eq(sp == SPACE_DRAM)]
            for k in range(3):
                st = nd.dims[k + 1].src_stride if side == 0 else nd.dims[k + 1].dst_stride
                m.d.comb += [wk.nums[k].eq(nd.dims[k + 1].num), wk.strides[k].eq(st)]

        src_dram = d.src_space == SPACE_DRAM
        dst_dram = d.dst_space == SPACE_DRAM

        # --- the element path (docs/dma.md §4.2): while it runs a descriptor (`el_mode`) it
        # drives the AXI channels and the SBUF port, the byte-moving datapath stays idle --------
        if EO:
            el = m.submodules.element = ElementMover(cfg, lane=sr_lane(self.engine))
            el_mode = Signal()
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
        axi_err = Signal()
        axi_err_info = Signal(32)
        m.d.comb += [axi.arid.eq(cq),
                     axi.araddr.eq(em(el.ar_addr if EO else 0, src_w.seg.payload.word << lw)),
                     axi.arlen.eq(em(0, src_w.seg.payload.count - 1)), axi.arsize.eq(asig.size),
                     axi.arburst.eq(BURST_INCR),
                     axi.arvalid.eq(em(el.ar_valid if EO else 0, src_w.seg.valid & src_dram)
                                    & (rd_out < OUT) & ~axi_dead),
                     ar_fire.eq(axi.arvalid & axi.arready)]
        # a dead bus: late R beats and B responses are taken and dropped
        m.d.comb += [axi.rready.eq(em(1, dq.w_rdy) | axi_dead),
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
        ws = fifo.SyncFIFOBuffered(width=seg_layout(cfg).size, depth=OUT)
        m.submodules.wsegs = flushed(ws)
        aw_fire = Signal()
        b_fire = Signal()
        m.d.comb += [axi.awid.eq(cq),
                     axi.awaddr.eq(em(el.aw_addr if EO else 0, dst_w.seg.payload.word << lw)),
                     axi.awlen.eq(em(0, dst_w.seg.payload.count - 1)), axi.awsize.eq(asig.size),
                     axi.awburst.eq(BURST_INCR),
                     axi.awvalid.eq(em(el.aw_valid if EO else 0,
                                       dst_w.seg.valid & dst_dram & (wr_out < OUT) & ws.w_rdy)
                                    & ~axi_dead),
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
            m.d.sync += wr_out.eq(0)
        with m.Else():
            m.d.sync += wr_out.eq(wr_out + aw_fire - b_fire)

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

        # --- AXI errors while the descriptor runs -----------------------------------------------
        with m.If(axi_dead):
            pass
        with m.Elif(axi.rvalid & axi.rready & (axi.rresp[1]) & ~axi_err):
            m.d.sync += [axi_err.eq(1), axi_err_info.eq(F_RRESP | (axi.rresp << 12))]
        with m.Elif(axi.bvalid & axi.bresp[1] & ~axi_err):
            m.d.sync += [axi_err.eq(1), axi_err_info.eq(F_BRESP | (1 << 8) | (axi.bresp << 12))]

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
        src_idle = ~src_w.busy & ~sx.valid & (rd_out == 0) & (inflight == 0)
        uses_dram = (nd.src_space == SPACE_DRAM) | (nd.dst_space == SPACE_DRAM)
        dst_idle = (~dst_w.busy & ~dx.valid & ~wx.valid & ~ws.r_rdy & (wr_out == 0)
                    & ~dq.r_rdy)
        m.d.comb += [self.sem.payload.sem.eq(d.sem), self.sem.payload.inc.eq(d.inc)]
        ready_q = Cat(f.r_rdy & ~stopped[q] for q, f in enumerate(qf))

        def stop(queue, code, info):
            for q in range(Q):
                with m.If(queue == q):
                    m.d.sync += [stopped[q].eq(1), q_code[q].eq(code), q_info[q].eq(info)]

        # front: take the next descriptor (round-robin) and check it while the back runs the
        # current one; a checked descriptor waits in `nd` until the back takes it
        have_next = Signal()
        front_idle = Signal()
        back_idle = Signal()
        m.d.comb += check.i.payload.desc.eq(nd)
        with m.FSM(name="front"):
            with m.State("IDLE"):
                m.d.comb += front_idle.eq(~have_next)
                order = [Signal(range(Q) if Q > 1 else 1, name=f"rr_order{k}") for k in range(Q)]
                for k in range(Q):
                    m.d.comb += order[k].eq(Mux(rr + k >= Q, (rr + k - Q).as_unsigned(), rr + k))
                pick = Signal(range(Q) if Q > 1 else 1)
                found = Signal()
                for k in reversed(range(Q)):
                    with m.If(ready_q.bit_select(order[k], 1)):
                        m.d.comb += [pick.eq(order[k]), found.eq(1)]
                with m.If(found & ~have_next):
                    for q, f in enumerate(qf):
                        with m.If(pick == q):
                            m.d.comb += f.r_en.eq(1)
                            m.d.sync += nd.eq(f.r_data)
                    m.d.sync += [nq.eq(pick), rr.eq(Mux(pick == Q - 1, 0, pick + 1))]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += check.i.valid.eq(1)
                m.next = "VERDICT"
            with m.State("VERDICT"):
                with m.If(check.o.valid):
                    # a queue stopped meanwhile (by an earlier descriptor's AXI error) keeps
                    # that first error; this descriptor is dropped
                    with m.If(~stopped.bit_select(nq, 1)):
                        with m.If(check.o.payload.code != 0):
                            stop(nq, check.o.payload.code, check.o.payload.info)
                        with m.Else():
                            m.d.sync += have_next.eq(1)
                    m.next = "IDLE"

        def finish():
            for q in range(Q):
                with m.If(cq == q):
                    m.d.sync += completed[q].eq(completed[q] + 1)

        with m.FSM(name="back"):
            with m.State("IDLE"):
                m.d.comb += back_idle.eq(1)
                with m.If(have_next):
                    m.d.sync += have_next.eq(0)
                    with m.If(stopped.bit_select(nq, 1)):
                        pass
                    with m.Elif(axi_dead & uses_dram):
                        # the bus timed out before: a DRAM descriptor cannot run
                        stop(nq, E_TIMEOUT, F_TIMEOUT | TIMEOUT_LATER)
                    with m.Else():
                        m.d.sync += [d.eq(nd), cq.eq(nq), axi_err.eq(0)]
                        if EO:
                            is_el = (nd.op != 0) | (nd.src_dtype != nd.dst_dtype)
                            m.d.sync += el_mode.eq(is_el)
                            m.d.comb += [el.start.eq(is_el), src_w.start.eq(~is_el),
                                         dst_w.start.eq(~is_el)]
                        else:
                            m.d.comb += [src_w.start.eq(1), dst_w.start.eq(1)]
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), run_state.eq(1)]
                with m.If(wd_hit):
                    # the slave stopped answering: give the descriptor up, stop its queue,
                    # abandon the bus (AXI cannot cancel bursts) and empty the datapath
                    stop(cq, E_TIMEOUT, wd_info)
                    m.d.sync += axi_dead.eq(1)
                    m.next = "FLUSH"
                with m.Elif(src_idle & dst_idle & (~el.busy if EO else 1)):
                    with m.If(axi_err):
                        stop(cq, E_AXI, axi_err_info)
                        m.next = "IDLE"
                    with m.Elif(d.post):
                        m.next = "POST"
                    with m.Else():
                        finish()
                        m.next = "IDLE"
            with m.State("FLUSH"):
                # one cycle of datapath reset, then wait for SBUF reads still in flight (their
                # data is dropped)
                m.d.comb += [self.busy.eq(1), flush.eq(1)]
                with m.If(inflight == 0):
                    m.next = "IDLE"
            with m.State("POST"):
                m.d.comb += [self.busy.eq(1), self.sem.valid.eq(1)]
                with m.If(self.sem.ready):
                    finish()
                    m.next = "IDLE"
        m.d.comb += self.idle.eq(front_idle & back_idle & ~Cat(f.level != 0 for f in qf).any())
        with m.If(~front_idle):
            m.d.comb += self.busy.eq(1)

        # stopped queues drain; clear restarts them
        for q, f in enumerate(qf):
            with m.If(stopped[q]):
                m.d.comb += f.r_en.eq(1)
            with m.If(self.clear[q]):
                m.d.sync += [stopped[q].eq(0), q_code[q].eq(0), q_info[q].eq(0)]
        return m
