# SPDX-License-Identifier: Apache-2.0
"""A Verilator harness around one :class:`~rtl.dma.engine.DMAEngine`: a descriptor memory fed
into the engine, a model of SBUF behind its partition port, delay lines on the AXI read-address
and write-response channels, response forcing for DECERR injection, and the semaphore file.

* **SBUF model** (``sbuf_mem``, one word per entry, preloaded and read back by cocotb): a
  memory with byte enables; ``req.ready`` is low in a pseudo-random fraction
  ``sbuf_stall / 256`` of the cycles (an LFSR: arbitration losses of any pattern), read data
  comes back ``sbuf_latency`` cycles after the request was taken, in order.
* **DRAM** is cocotbext-axi's ``AxiRam`` on the ``axi__*`` ports. ``rd_delay`` holds every
  read burst's address ``rd_delay`` cycles before the RAM sees it (read latency), ``b_delay``
  holds every write response (write latency); 0 passes them through. ``force_rresp`` /
  ``force_bresp`` are ORed into the responses the engine sees (DECERR = 3).
* ``start`` feeds ``n_desc`` descriptors (``desc_mem``: ``queue << 512 | descriptor``) in order;
  ``done`` rises when all were taken and the engine is idle; ``cycles`` counts from ``start``
  to ``done``, ``t_first`` / ``t_last`` are the cycles of the first and last destination data
  write (AXI W beat or SBUF write).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.core.semaphores import SemaphoreFile
from rtl.dma.axi import AXI4Signature
from rtl.dma.engine import DMAEngine

__all__ = ["DMAHarness"]

_AR = ("arid", "araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot")
_B = ("bid", "bresp")


class _Delay(wiring.Component):
    """Holds each payload ``delay`` cycles (at least) before offering it; 0 passes through."""

    def __init__(self, width, depth):
        self.width, self.depth = width, depth
        super().__init__({"i_valid": In(1), "i_ready": Out(1), "i_data": In(width),
                          "o_valid": Out(1), "o_ready": In(1), "o_data": Out(width),
                          "delay": In(8)})

    def elaborate(self, platform):
        m = Module()
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        f = m.submodules.f = fifo.SyncFIFOBuffered(width=self.width + 32, depth=self.depth)
        ts = f.r_data[self.width:]
        due = (now - ts) >= self.delay
        with m.If(self.delay == 0):
            m.d.comb += [self.o_valid.eq(self.i_valid), self.i_ready.eq(self.o_ready),
                         self.o_data.eq(self.i_data)]
        with m.Else():
            m.d.comb += [f.w_en.eq(self.i_valid), f.w_data.eq(Cat(self.i_data, now)),
                         self.i_ready.eq(f.w_rdy),
                         self.o_valid.eq(f.r_rdy & due), self.o_data.eq(f.r_data[:self.width]),
                         f.r_en.eq(self.o_ready & due)]
        return m


class DMAHarness(wiring.Component):
    def __init__(self, cfg, *, sbuf_latency=2, desc_depth=64):
        self.cfg = cfg
        self.sbuf_latency = sbuf_latency
        self.desc_depth = desc_depth
        esig = DMAEngine.Signature(cfg)
        self.qbits = esig.queue_bits
        Q = cfg.dma_queues
        W = cfg.sbuf_word_bytes
        self.sbuf_words = cfg.partitions * cfg.sbuf_bytes_per_partition // W
        super().__init__({
            "axi": Out(AXI4Signature(cfg)),
            "dram_base": In(cfg.axi_addr_bits), "dram_limit": In(cfg.axi_addr_bits),
            "start": In(1), "n_desc": In(16), "done": Out(1), "cycles": Out(32),
            "t_first": Out(32), "t_last": Out(32), "fed": Out(16),
            "clear": In(Q), "err": Out(1), "q_code": Out(data.ArrayLayout(8, Q)),
            "q_info": Out(data.ArrayLayout(32, Q)), "completed": Out(data.ArrayLayout(16, Q)),
            "busy": Out(1),
            "sbuf_stall": In(8), "rd_delay": In(8), "b_delay": In(8),
            "force_rresp": In(2), "force_bresp": In(2),
            "sem_rd": In(8), "sem_data": Out(cfg.semaphore_bits), "sem_set_valid": In(1),
            "sem_set_sem": In(8), "sem_set_value": In(cfg.semaphore_bits), "sem_err": Out(1),
            "sem_err_code": Out(8), "sem_err_sem": Out(8),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.sbuf_word_bytes
        lw = W.bit_length() - 1
        lwpp = (cfg.sbuf_bytes_per_partition // W).bit_length() - 1
        eng = m.submodules.dut = DMAEngine(cfg)
        sems = m.submodules.sems = SemaphoreFile(cfg, sources=1)
        wiring.connect(m, eng.sem, sems.inc[0])
        m.d.comb += [sems.rd_sem.eq(self.sem_rd), self.sem_data.eq(sems.rd_data),
                     sems.set.valid.eq(self.sem_set_valid),
                     sems.set.payload.sem.eq(self.sem_set_sem),
                     sems.set.payload.value.eq(self.sem_set_value),
                     self.sem_err.eq(sems.err), self.sem_err_code.eq(sems.err_code),
                     self.sem_err_sem.eq(sems.err_sem)]
        m.d.comb += [eng.dram_base.eq(self.dram_base), eng.dram_limit.eq(self.dram_limit),
                     eng.clear.eq(self.clear), self.err.eq(eng.err), self.q_code.eq(eng.q_code),
                     self.q_info.eq(eng.q_info), self.completed.eq(eng.completed),
                     self.busy.eq(eng.busy)]

        # --- descriptor feeder ----------------------------------------------------------------
        dmem = m.submodules.desc_mem = memory.Memory(shape=512 + self.qbits,
                                                     depth=self.desc_depth, init=[])
        drd = dmem.read_port(domain="comb")
        idx = Signal(16)
        running = Signal()
        m.d.comb += [drd.addr.eq(idx), eng.i.payload.desc.eq(drd.data[:512]),
                     eng.i.payload.queue.eq(drd.data[512:]), self.fed.eq(idx),
                     # not in the `start` cycle: `n_desc` of a larger new batch would
                     # otherwise offer the entry at the old `idx` before it returns to 0
                     eng.i.valid.eq(running & ~self.start & (idx < self.n_desc))]
        with m.If(eng.i.valid & eng.i.ready):
            m.d.sync += idx.eq(idx + 1)
        done = Signal()
        m.d.comb += [done.eq(running & (idx >= self.n_desc) & eng.idle), self.done.eq(done)]
        cycles = Signal(32)
        m.d.comb += self.cycles.eq(cycles)
        with m.If(self.start):
            m.d.sync += [running.eq(1), idx.eq(0), cycles.eq(0), self.t_first.eq(0),
                         self.t_last.eq(0)]
        with m.Elif(running & ~done):
            m.d.sync += cycles.eq(cycles + 1)

        # --- AXI: delays and forced responses ---------------------------------------------------
        ea, xa = eng.axi, self.axi
        ar_w = sum(len(getattr(ea, n)) for n in _AR)
        ard = m.submodules.ar_delay = _Delay(ar_w, cfg.dma_outstanding + 1)
        m.d.comb += [ard.delay.eq(self.rd_delay), ard.i_valid.eq(ea.arvalid),
                     ea.arready.eq(ard.i_ready), ard.i_data.eq(Cat(getattr(ea, n) for n in _AR)),
                     xa.arvalid.eq(ard.o_valid), ard.o_ready.eq(xa.arready),
                     Cat(getattr(xa, n) for n in _AR).eq(ard.o_data)]
        b_w = sum(len(getattr(ea, n)) for n in _B)
        bd = m.submodules.b_delay = _Delay(b_w, cfg.dma_outstanding + 1)
        m.d.comb += [bd.delay.eq(self.b_delay), bd.i_valid.eq(xa.bvalid),
                     xa.bready.eq(bd.i_ready), bd.i_data.eq(Cat(xa.bid, xa.bresp)),
                     ea.bvalid.eq(bd.o_valid), bd.o_ready.eq(ea.bready),
                     Cat(ea.bid, ea.bresp).eq(bd.o_data | (self.force_bresp << len(xa.bid)))]
        for n in ("awid", "awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot",
                  "awvalid", "wdata", "wstrb", "wlast", "wvalid", "rready"):
            m.d.comb += getattr(xa, n).eq(getattr(ea, n))
        for n in ("awready", "wready", "rid", "rdata", "rlast", "rvalid"):
            m.d.comb += getattr(ea, n).eq(getattr(xa, n))
        m.d.comb += ea.rresp.eq(xa.rresp | self.force_rresp)

        # --- SBUF model -----------------------------------------------------------------------
        smem = m.submodules.sbuf_mem = memory.Memory(shape=8 * W, depth=self.sbuf_words, init=[])
        wp = smem.write_port(granularity=8)
        rp = smem.read_port()
        req, rsp = eng.sbuf.req, eng.sbuf.rsp
        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
        m.d.comb += req.ready.eq(lfsr[:8] >= self.sbuf_stall)
        waddr = Cat(req.payload.addr[lw:lw + lwpp], req.payload.part)
        fire = req.valid & req.ready
        m.d.comb += [wp.addr.eq(waddr), wp.data.eq(req.payload.wdata),
                     wp.en.eq(Mux(fire & req.payload.we, req.payload.be, 0)),
                     rp.addr.eq(waddr)]
        v = fire & ~req.payload.we
        valid, dat = Signal(), Signal(8 * W)
        m.d.sync += valid.eq(v)
        m.d.comb += dat.eq(rp.data)
        for k in range(self.sbuf_latency - 1):
            nv, nd = Signal(name=f"rsp_v{k}"), Signal(8 * W, name=f"rsp_d{k}")
            m.d.sync += [nv.eq(valid), nd.eq(dat)]
            valid, dat = nv, nd
        m.d.comb += [rsp.valid.eq(valid), rsp.payload.eq(dat)]

        # --- destination write timestamps -------------------------------------------------------
        wr = (ea.wvalid & xa.wready) | (fire & req.payload.we)
        with m.If(running & ~done & wr):
            with m.If(self.t_first == 0):
                m.d.sync += self.t_first.eq(cycles)
            m.d.sync += self.t_last.eq(cycles)
        return m
