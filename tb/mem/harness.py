# SPDX-License-Identifier: Apache-2.0
"""The real DMA engine and the SBUF-fed tensor engine on one real SBUF, run unattended on
Verilator: :class:`DmaFedHarness` (its build: :func:`tb.mem.build.dma_fed_sim`).

The SBUF (``rtl/mem/sbuf.py``) has the tensor engine's two row ports (priority) and two
partition ports: ``dma``, driven by a :class:`rtl.dma.engine.DMAEngine` whose AXI4 master is the
harness's ``axi`` bus (cocotbext-axi ``AxiRam`` as DRAM), and ``syn``, a synthetic writer that
writes one full word per cycle into one bank (the memory bench's traffic of a DMA at exactly
full rate). The testbench preloads SBUF (backdoor, ``sbuf.bank<b>``), the fed commands
(``cmd_mem``) and the DMA descriptors (``desc_mem``), pulses ``start`` and awaits ``done``: no
per-cycle Python besides the AXI RAM model. Result beats land in ``res_mem``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.dma.axi import AXI4Signature
from rtl.dma.descriptor import DESC_BITS
from rtl.dma.engine import DMAEngine
from rtl.mem.sbuf import SBUF, YIELD_AFTER
from rtl.tensor.sbuf_fed import SbufTensorEngine

__all__ = ["DmaFedHarness", "DESC_BITS", "IDLE_CYCLES"]

# ``desc_mem`` words hold one descriptor (rtl.dma.descriptor.DESC_BITS) below the queue number.
#: Consecutive idle cycles (every command and descriptor taken, both engines idle) before
#: ``done`` rises.
IDLE_CYCLES = 4


class DmaFedHarness(wiring.Component):
    """SBUF + :class:`SbufTensorEngine` + :class:`DMAEngine` + a synthetic full-rate writer.

    Parameters
    ----------
    cfg : CoreConfig
    cmd_depth, desc_depth, res_depth : int
        Depths of the command, descriptor and result memories.
    use_instances : bool
        The tensor engine's leaf modules by name (Verilator: with :func:`tb.mem.build.dma_fed_sim`).

    Members
    -------
    axi : Out(AXI4Signature(cfg))
        The DMA engine's AXI4 master (ports ``axi__*``).
    dram_base, dram_limit : In(axi_addr_bits)
        The DMA's DRAM window.
    start : In(1)
        Start a run: stream ``n_cmd`` commands and ``n_desc`` descriptors from index 0.
    n_cmd, n_desc : In(16)
    syn_en : In(1)
        The synthetic writer writes bank ``syn_bank`` while the run lasts.
    syn_bank : In
    done : Out(1)
        All commands and descriptors taken and both engines idle for ``IDLE_CYCLES`` cycles.
    cycles : Out(32)
        Cycles from ``start`` to ``done``.
    t_first, t_last_we : Out(32)
        Cycle of the first operand beat the tensor engine accepted and of its last PSUM write.
    n_res : Out(32)
        Result beats stored in ``res_mem``.
    dma_wr, dma_rd, dma_stall : Out(32)
        SBUF writes and reads of the DMA engine granted, cycles its request was refused.
    dma_wr_first, dma_wr_last : Out(32)
        ``dma_wr`` at ``t_first`` and at ``t_last_we`` (DMA writes inside the tensor window).
    syn_wr, syn_stall : Out(32)
        The synthetic writer's writes granted and cycles refused.
    err, err_code, ap_err, ap_err_code : Out
        The tensor feed's error status.
    dma_err, q_code, q_info, completed, sem_posts : Out
        The DMA engine's status (``sem_posts``: semaphore posts taken).
    clear : In(dma_queues)
        Restart stopped DMA queues.
    """

    def __init__(self, cfg, *, cmd_depth=64, desc_depth=32, res_depth=None,
                 use_instances=True, yield_after=YIELD_AFTER):
        self.cfg = cfg
        Q = cfg.dma_queues
        self.depths = dict(cmd=cmd_depth, desc=desc_depth, res=res_depth or cfg.psum_bank_fp32)
        self.sbuf = SBUF(cfg, row_ports=("tensor_st", "tensor_mv"), part_ports=("dma", "syn"),
                         priority=("tensor_st", "tensor_mv"), yield_after=yield_after)
        self.fed = SbufTensorEngine(cfg, use_instances=use_instances)
        self.dma = DMAEngine(cfg)
        self.qbits = DMAEngine.Signature(cfg).queue_bits
        super().__init__({
            "axi": Out(AXI4Signature(cfg)),
            "dram_base": In(cfg.axi_addr_bits), "dram_limit": In(cfg.axi_addr_bits),
            "start": In(1), "n_cmd": In(16), "n_desc": In(16),
            "syn_en": In(1), "syn_bank": In(range(max(2, cfg.sbuf_banks))),
            "done": Out(1), "cycles": Out(32), "t_first": Out(32), "t_last_we": Out(32),
            "n_res": Out(32), "dma_wr": Out(32), "dma_rd": Out(32), "dma_stall": Out(32),
            "dma_wr_first": Out(32), "dma_wr_last": Out(32),
            "syn_wr": Out(32), "syn_stall": Out(32),
            "err": Out(1), "err_code": Out(3), "ap_err": Out(1), "ap_err_code": Out(8),
            "dma_err": Out(1), "q_code": Out(data.ArrayLayout(8, Q)),
            "q_info": Out(data.ArrayLayout(32, Q)), "completed": Out(data.ArrayLayout(16, Q)),
            "sem_posts": Out(16), "clear": In(Q),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        dp = self.depths
        m.submodules.sbuf = sb = self.sbuf
        m.submodules.fed = fed = self.fed
        m.submodules.dma = dma = self.dma
        eng = fed.engine
        wiring.connect(m, fed.st_port, sb.tensor_st)
        wiring.connect(m, fed.mv_port, sb.tensor_mv)
        wiring.connect(m, dma.sbuf, sb.dma)
        wiring.connect(m, dma.axi, wiring.flipped(self.axi))
        m.d.comb += [dma.dram_base.eq(self.dram_base), dma.dram_limit.eq(self.dram_limit),
                     dma.clear.eq(self.clear), self.dma_err.eq(dma.err),
                     self.q_code.eq(dma.q_code), self.q_info.eq(dma.q_info),
                     self.completed.eq(dma.completed), dma.sem.ready.eq(1)]
        for n in ("err", "err_code", "ap_err", "ap_err_code"):
            m.d.comb += getattr(self, n).eq(getattr(fed, n))
        with m.If(dma.sem.valid):
            m.d.sync += self.sem_posts.eq(self.sem_posts + 1)

        running = Signal()
        live = running & ~self.done
        # --- command stream ---------------------------------------------------------------------
        cw = SbufTensorEngine.Signature(cfg).cmd_layout.size
        cmem = m.submodules.cmd_mem = memory.Memory(shape=cw, depth=dp["cmd"], init=[])
        crd = cmem.read_port(domain="comb")
        cidx = Signal(16)
        m.d.comb += [crd.addr.eq(cidx), fed.cmd.payload.eq(crd.data),
                     fed.cmd.valid.eq(live & (cidx < self.n_cmd))]
        with m.If(fed.cmd.valid & fed.cmd.ready):
            m.d.sync += cidx.eq(cidx + 1)
        # --- descriptor stream ------------------------------------------------------------------
        dmem = m.submodules.desc_mem = memory.Memory(shape=DESC_BITS + self.qbits,
                                                     depth=dp["desc"], init=[])
        drd = dmem.read_port(domain="comb")
        didx = Signal(16)
        m.d.comb += [drd.addr.eq(didx), dma.i.payload.desc.eq(drd.data[:DESC_BITS]),
                     dma.i.payload.queue.eq(drd.data[DESC_BITS:]),
                     dma.i.valid.eq(live & (didx < self.n_desc))]
        with m.If(dma.i.valid & dma.i.ready):
            m.d.sync += didx.eq(didx + 1)
        # --- results ------------------------------------------------------------------------------
        rmem = m.submodules.res_mem = memory.Memory(shape=len(fed.res.payload.as_value()),
                                                    depth=dp["res"], init=[])
        wp = rmem.write_port()
        m.d.comb += [fed.res.ready.eq(1), wp.addr.eq(self.n_res), wp.data.eq(fed.res.payload),
                     wp.en.eq(fed.res.valid)]
        with m.If(fed.res.valid):
            m.d.sync += self.n_res.eq(self.n_res + 1)

        # --- synthetic full-rate writer on ``syn`` (as tb.mem.program.FedSystem's) -------------------
        req = sb.syn.req
        WB = cfg.sbuf_word_bytes
        words = cfg.sbuf_bank_bytes // WB
        widx = Signal(range(words))
        bank_shift = (cfg.sbuf_bank_bytes - 1).bit_length()
        pbits = max(1, (cfg.partitions - 1).bit_length())
        m.d.comb += [req.valid.eq(live & self.syn_en),
                     req.payload.addr.eq((self.syn_bank << bank_shift)
                                         | (widx << (WB.bit_length() - 1))),
                     req.payload.part.eq(widx[:pbits]),
                     req.payload.we.eq(1), req.payload.be.eq(-1),
                     req.payload.wdata.eq(self.syn_wr)]
        with m.If(req.valid & req.ready):
            m.d.sync += [widx.eq(widx + 1), self.syn_wr.eq(self.syn_wr + 1)]
        with m.If(req.valid & ~req.ready):
            m.d.sync += self.syn_stall.eq(self.syn_stall + 1)

        # --- counters ------------------------------------------------------------------------------
        dreq = dma.sbuf.req
        dfire = dreq.valid & dreq.ready
        with m.If(live):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If(dfire & dreq.payload.we):
                m.d.sync += self.dma_wr.eq(self.dma_wr + 1)
            with m.If(dfire & ~dreq.payload.we):
                m.d.sync += self.dma_rd.eq(self.dma_rd + 1)
            with m.If(dreq.valid & ~dreq.ready):
                m.d.sync += self.dma_stall.eq(self.dma_stall + 1)
        seen = Signal()
        in_fire = (eng.st.valid & eng.st.ready) | (eng.mv.valid & eng.mv.ready)
        with m.If(live & in_fire & ~seen):
            m.d.sync += [seen.eq(1), self.t_first.eq(self.cycles),
                         self.dma_wr_first.eq(self.dma_wr)]
        with m.If(live & fed.psum_we):
            m.d.sync += [self.t_last_we.eq(self.cycles), self.dma_wr_last.eq(self.dma_wr)]

        # --- done ------------------------------------------------------------------------------------
        quiet = Signal(range(IDLE_CYCLES + 1))
        idle = ((cidx >= self.n_cmd) & ~fed.busy & (didx >= self.n_desc) & dma.idle
                & ~dma.busy)
        with m.If(live):
            with m.If(idle):
                m.d.sync += quiet.eq(quiet + 1)
                with m.If(quiet == IDLE_CYCLES - 1):
                    m.d.sync += [self.done.eq(1), running.eq(0)]
            with m.Else():
                m.d.sync += quiet.eq(0)
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), cidx.eq(0), didx.eq(0), quiet.eq(0),
                         seen.eq(0), self.cycles.eq(0), self.t_first.eq(0),
                         self.t_last_we.eq(0), self.n_res.eq(0), self.dma_wr.eq(0),
                         self.dma_rd.eq(0), self.dma_stall.eq(0), self.dma_wr_first.eq(0),
                         self.dma_wr_last.eq(0), self.syn_wr.eq(0), self.syn_stall.eq(0),
                         self.sem_posts.eq(0)]
        return m
