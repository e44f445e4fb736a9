# SPDX-License-Identifier: Apache-2.0
"""The NeuronCore top (docs/core.md §5): the engines with their sequencers, SBUF, PSUM, the
DMA engines, the semaphore file and the host registers. It has one AXI4 master (instruction
fetch, descriptors and DMA), one AXI4-Lite slave (the host) and one interrupt line."""

from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, ClockSignal, DomainRenamer, Module, Mux, ResetSignal, \
    Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.collective.engine import CollectiveEngine
from rtl.collective.link import LinkRX, LinkTX, payload_layout
from rtl.collective.permute import PermuteEngine
from rtl.config import LINK_VCS, CoreConfig, check_config
from rtl.core.axi_mux import AXI4Mux
from rtl.core.csr import CSR, AXI4LiteSignature
from rtl.core.engine_decode import CCDecoder, ScalarDecoder, VectorDecoder
from rtl.core.semaphores import SemaphoreFile
from rtl.core.sequencer import Sequencer
from rtl.core.sync_engine import SyncEngine
from rtl.core.tensor_decode import TensorDecoder
from rtl.dma.engine import DMAEngine
from rtl.isa import ERROR_BITS
from rtl.mem.rowmux import RowPortMux
from rtl.mem.sbuf import SBUF
from rtl.tensor.sbuf_fed import SbufTensorEngine
from rtl.scalar.engine import ScalarEngine
from rtl.vector.engine import VectorEngine

__all__ = ["NeuronCore", "ENGINES_BUILT", "activity_layout"]

#: Engines with a sequencer in this core (the others' queue registers read as idle).
ENGINES_BUILT = ("pe", "dve", "act", "sp", "cc")


def activity_layout(cfg):
    """``{field: (lsb, width)}`` of the ``activity`` trace port (:class:`NeuronCore`), in bit
    order: ``busy``, ``dma``, ``retired``, ``waiting``, ``issued`` (one bit per engine of
    ``rtl.isa.ENGINES`` each, but ``dma``: one), ``dma_busy`` (per DMA engine), ``dma_done``
    (per DMA engine and queue, engine-major)."""
    ne, out, lsb = len(isa.ENGINES), {}, 0
    for name, w in (("busy", ne), ("dma", 1), ("retired", ne), ("waiting", ne), ("issued", ne),
                    ("dma_busy", cfg.dma_engines), ("dma_done", cfg.dma_engines * cfg.dma_queues)):
        out[name], lsb = (lsb, w), lsb + w
    return out


class NeuronCore(wiring.Component):
    """One NeuronCore.

    The tensor engine (fed from SBUF, PSUM inside it) runs the ``pe`` queue through its
    decoder. The vector engine runs the ``dve`` queue (SBUF row ports ``vector_r0``,
    ``vector_r1``, ``vector_w``; its three PSUM ports share the PSUM's ``vector`` port through a
    :class:`~rtl.mem.rowmux.RowPortMux`). The scalar engine runs the ``act`` queue (SBUF row
    ports ``scalar_r``, ``scalar_w``; its two PSUM ports share the PSUM's ``scalar`` port). The sync engine runs the ``sp`` queue, whose ``dma_start`` instructions feed the
    DMA engines (``cfg.dma_engines``, each on an SBUF partition port). The collective engine
    runs the ``cc`` queue (SBUF row ports ``cc_r``, ``cc_w``) through the core's ring link
    ports (docs/collectives.md §14; with ``ring_size`` 1 a collective is a local copy and the
    core has no ring ports). Every sequencer, the
    sync engine and every DMA engine share one AXI4 master through :class:`AXI4Mux`
    (manager order: the sequencers of :data:`ENGINES_BUILT`, the sync engine, the DMA
    engines). DMA completions and instruction posts go to the semaphore file. Errors go to the
    host registers' first-error latch, which stops every stream.

    ``CTRL.soft_reset`` resets the sequencers, decoders, engines, DMA and semaphores; SBUF and
    PSUM keep their contents. It is safe at any time, with AXI transactions in flight: the
    engines stay in reset while the interconnect drains (:class:`AXI4Mux` ``flush``: granted
    address beats go out, open W bursts end with strobe-less beats, responses are sunk), and
    the core reads as busy (``STATUS`` not idle) until the port is quiet.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        The PEs, the vector engine's lane ALUs and the scalar engine's per-lane function
        units as ``Instance`` of one converted module each (synthesis/Verilator:
        :func:`tb.core.build.core_design` adds the modules) or as submodules (amaranth.sim).

    Members
    -------
    axi : Out(AXI4Signature(cfg, id_bits=...))
        The core's AXI4 master (ports ``axi__*``).
    host : In(AXI4LiteSignature())
        The host registers (ports ``host__*``).
    irq : Out(1)
    rank : In(link_src_bits); dateline : In(1)
        Present when ``cfg.ring_size > 1``: this core's rank, and whether its TX link is the
        ring's dateline (its flits leave on VC1).
    ring_tx_valid, ring_tx_flit : Out(1), Out(link_flit_bits); ring_tx_credit : In(2)
        The TX link toward rank + 1 (flits out, credits back), when ``ring_size > 1``.
    ring_rx_valid, ring_rx_flit : In(1), In(link_flit_bits); ring_rx_credit : Out(2)
        The RX link from rank - 1 (flits in, credits out), when ``ring_size > 1``.
    activity : Out(sum of the widths of activity_layout(cfg))
        Trace port (fields :func:`activity_layout`), per engine ``e`` (``rtl.isa.ENGINES``
        order): ``busy`` its sequencer is busy (the host reads the same as cycle counts in the
        ``Q_BUSY`` / ``DMA_BUSY`` registers), ``retired`` / ``issued`` toggle when it retires /
        issues an instruction, ``waiting`` its next instruction waits on a semaphore; ``dma``
        some DMA engine is not idle, ``dma_busy`` each DMA engine runs a descriptor,
        ``dma_done`` toggles when a queue completes a descriptor. Testbenches draw timelines
        and time each instruction from it.
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "NeuronCore")
            self.managers = len(ENGINES_BUILT) + 1 + cfg.dma_engines
            self.mux = AXI4Mux.Signature(cfg, self.managers)
            ring = {}
            if cfg.ring_size > 1:
                fb = cfg.link_flit_bits
                ring = {"rank": In(cfg.link_src_bits), "dateline": In(1),
                        "ring_tx_valid": Out(1), "ring_tx_flit": Out(fb),
                        "ring_tx_credit": In(LINK_VCS), "ring_rx_valid": In(1),
                        "ring_rx_flit": In(fb), "ring_rx_credit": Out(LINK_VCS)}
            super().__init__({"axi": Out(self.mux.out_sig), "host": In(AXI4LiteSignature()),
                              "irq": Out(1), "activity": Out(sum(
                                  w for _, w in activity_layout(cfg).values())), **ring})

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        n_seq, n_dma = len(ENGINES_BUILT), cfg.dma_engines
        csr = m.submodules.csr = CSR(cfg)
        mux = m.submodules.axi_mux = AXI4Mux(cfg, sig.managers)
        # the soft reset holds the engines in reset until the AXI port is quiet (the mux
        # completes open W bursts and sinks the responses of the transactions in flight)
        draining = Signal()
        with m.If(csr.soft_reset):
            m.d.sync += draining.eq(1)
        with m.Elif(~mux.busy):
            m.d.sync += draining.eq(0)
        in_reset = csr.soft_reset | draining
        m.d.comb += mux.flush.eq(in_reset)
        # the engines run in a clock domain of their own whose reset is the core's reset or the
        # soft reset: a domain, not ResetInserter, so that the units they instantiate by name
        # (PEs, lane ALUs, function units: ``i_rst=ResetSignal()``) are reset too (with
        # ResetInserter a PE kept a beat in flight across the soft reset, and the array's
        # in-flight count then never returned to idle)
        m.domains.soft = cd_soft = ClockDomain("soft", local=True)
        m.d.comb += [cd_soft.clk.eq(ClockSignal()), cd_soft.rst.eq(ResetSignal() | in_reset)]
        soft = DomainRenamer("soft")

        seqs = {e: Sequencer(cfg, e) for e in ENGINES_BUILT}
        for e, s in seqs.items():
            m.submodules[f"seq_{e}"] = soft(s)
        sems = SemaphoreFile(cfg, sources=n_seq + n_dma, readers=n_seq)
        m.submodules.sems = soft(sems)
        fed = SbufTensorEngine(cfg, use_instances=self.use_instances)
        m.submodules.tensor = soft(fed)
        dec = TensorDecoder(cfg)
        m.submodules.tensor_decode = soft(dec)
        sync = SyncEngine(cfg)
        m.submodules.sync = soft(sync)
        # the AXI watchdog limit is the WATCHDOG register; each engine its own SR stream
        dmas = [DMAEngine(cfg, timeout=None, engine=k) for k in range(n_dma)]
        for i, d in enumerate(dmas):
            m.submodules[f"dma{i}"] = soft(d)
        vec = VectorEngine(cfg, use_instances=self.use_instances)
        m.submodules.vector = soft(vec)
        vdec = VectorDecoder(cfg)
        m.submodules.vector_decode = soft(vdec)
        act = ScalarEngine(cfg, use_instances=self.use_instances)
        m.submodules.scalar = soft(act)
        sdec = ScalarDecoder(cfg)
        m.submodules.scalar_decode = soft(sdec)
        sbuf = m.submodules.sbuf = SBUF(
            cfg, row_ports=("tensor_st", "tensor_mv", "vector_r0", "vector_r1", "vector_w",
                            "scalar_r", "scalar_w", "cc_r", "cc_w"),
            part_ports=tuple(f"dma{i}" for i in range(n_dma)),
            priority=("tensor_st", "tensor_mv"))

        # ---- the AXI master and the host ---------------------------------------------------
        wiring.connect(m, mux.s, wiring.flipped(self.axi))
        wiring.connect(m, wiring.flipped(self.host), csr.bus)
        m.d.comb += self.irq.eq(csr.irq)
        masters = [seqs[e].axi for e in ENGINES_BUILT] + [sync.axi] + [d.axi for d in dmas]
        for k, axi in enumerate(masters):
            wiring.connect(m, axi, mux.m[k])

        # ---- sequencers: queue registers, semaphores, errors -------------------------------
        for r, e in enumerate(ENGINES_BUILT):
            s, x = seqs[e], isa.ENGINES.index(e)
            m.d.comb += [s.q_base.eq(csr.q_base[x]), s.q_size.eq(csr.q_size[x]),
                         s.q_tail.eq(csr.q_tail[x]), csr.q_head[x].eq(s.q_head),
                         s.run.eq(csr.run[x]), s.stop.eq(csr.stop),
                         s.watchdog.eq(csr.watchdog),
                         sems.wait_sem[r].eq(s.sem_rd), s.sem_data.eq(sems.wait_data[r]),
                         csr.seq_busy[x].eq(s.busy), csr.seq_halted[x].eq(s.halted),
                         csr.seq_err[x].eq(s.err), csr.seq_code[x].eq(s.err_code),
                         csr.seq_pc[x].eq(s.err_pc), csr.seq_info[x].eq(s.err_info),
                         csr.seq_notify[x].eq(s.notify | s.irq_done)]
            wiring.connect(m, s.post, sems.inc[r])
        wiring.connect(m, csr.sem_set, sems.set)
        wiring.connect(m, csr.sem_add, sems.add)
        m.d.comb += [sems.rd_sem.eq(csr.sem_rd), csr.sem_data.eq(sems.rd_data),
                     csr.sem_err.eq(sems.err), csr.sem_code.eq(sems.err_code),
                     csr.sem_idx.eq(sems.err_sem)]

        # ---- tensor engine -----------------------------------------------------------------
        wiring.connect(m, seqs["pe"].issue, dec.issue)
        wiring.connect(m, dec.done, seqs["pe"].done)
        wiring.connect(m, dec.cmd, fed.cmd)
        wiring.connect(m, fed.st_port, sbuf.tensor_st)
        wiring.connect(m, fed.mv_port, sbuf.tensor_mv)
        m.d.comb += [dec.eng_busy.eq(fed.busy), dec.eng_err.eq(fed.err),
                     dec.eng_err_code.eq(fed.err_code), dec.eng_disp.eq(fed.disp),
                     dec.eng_disp_code.eq(fed.disp_code),
                     dec.eng_disp_reject.eq(fed.disp_reject), fed.res.ready.eq(1),
                     dec.eng_op_issue.eq(fed.op_issue), dec.eng_op_done.eq(fed.op_done)]

        # ---- vector engine -----------------------------------------------------------------
        wiring.connect(m, seqs["dve"].issue, vdec.issue)
        wiring.connect(m, vdec.done, seqs["dve"].done)
        wiring.connect(m, vdec.instr, vec.instr)
        wiring.connect(m, vec.done, vdec.eng_done)
        wiring.connect(m, vec.sbuf_rd0, sbuf.vector_r0)
        wiring.connect(m, vec.sbuf_rd1, sbuf.vector_r1)
        wiring.connect(m, vec.sbuf_wr, sbuf.vector_w)
        pmux = m.submodules.vector_psum = RowPortMux(cfg, "psum", 3)
        for k, port in enumerate((vec.psum_rd0, vec.psum_rd1, vec.psum_wr)):
            wiring.connect(m, port, pmux.up[k])
        wiring.connect(m, pmux.down, fed.psum_vector)

        # ---- scalar engine -----------------------------------------------------------------
        wiring.connect(m, seqs["act"].issue, sdec.issue)
        wiring.connect(m, sdec.done, seqs["act"].done)
        wiring.connect(m, sdec.instr, act.instr)
        wiring.connect(m, act.done, sdec.eng_done)
        wiring.connect(m, act.sbuf_rd, sbuf.scalar_r)
        wiring.connect(m, act.sbuf_wr, sbuf.scalar_w)
        smux = m.submodules.scalar_psum = RowPortMux(cfg, "psum", 2)
        for k, port in enumerate((act.psum_rd, act.psum_wr)):
            wiring.connect(m, port, smux.up[k])
        wiring.connect(m, smux.down, fed.psum_scalar)
        m.d.comb += act.tw.valid.eq(0)          # tables load by ACT_TABLE_LOAD from SBUF

        # ---- collective engines and the ring link ports -------------------------------------
        cce = CollectiveEngine(cfg)
        m.submodules.cc = soft(cce)
        pme = PermuteEngine(cfg)
        m.submodules.cc_permute = soft(pme)
        ccd = CCDecoder(cfg)
        m.submodules.cc_decode = soft(ccd)
        wiring.connect(m, seqs["cc"].issue, ccd.issue)
        wiring.connect(m, ccd.done, seqs["cc"].done)
        cc = self._cc_dispatch(m, ccd, cce, pme, sbuf)
        self._ring(m, cc, soft, csr)

        # ---- sync engine and DMA -----------------------------------------------------------
        wiring.connect(m, seqs["sp"].issue, sync.issue)
        wiring.connect(m, sync.done, seqs["sp"].done)
        m.d.comb += [sync.dram_base.eq(csr.dram_base), sync.dram_limit.eq(csr.dram_limit)]
        dma_err = Signal()
        dma_code, dma_info = Signal(ERROR_BITS), Signal(32)
        for i, d in enumerate(dmas):
            wiring.connect(m, sync.dma[i], d.i)
            wiring.connect(m, d.sbuf, getattr(sbuf, f"dma{i}"))
            wiring.connect(m, d.sem, sems.inc[n_seq + i])
            m.d.comb += [d.dram_base.eq(csr.dram_base), d.dram_limit.eq(csr.dram_limit),
                         d.watchdog.eq(csr.watchdog)]
        # the DMA's first stopped queue (engine order, then queue order) for the error latch
        for d in reversed(dmas):
            for q in reversed(range(cfg.dma_queues)):
                with m.If(d.q_code[q] != 0):
                    m.d.comb += [dma_err.eq(1), dma_code.eq(d.q_code[q]),
                                 dma_info.eq(d.q_info[q])]
        dma_idle = Cat(d.idle for d in dmas).all()
        trace = {f: Signal(len(isa.ENGINES), name=f"trace_{f}")
                 for f in ("retired", "waiting", "issued")}
        for e in ENGINES_BUILT:
            m.d.comb += [trace[f][isa.ENGINES.index(e)].eq(getattr(seqs[e], f)) for f in trace]
        m.d.comb += [self.activity.eq(Cat(csr.seq_busy, ~dma_idle | draining, *trace.values(),
                                          *(d.busy for d in dmas),
                                          *(d.completed[q][0] for d in dmas
                                            for q in range(cfg.dma_queues))))]
        m.d.comb += [csr.dma_err.eq(dma_err), csr.dma_code.eq(dma_code),
                     csr.dma_info.eq(dma_info), csr.dma_idle.eq(dma_idle & ~draining)]
        return m

    def _cc_dispatch(self, m, ccd, cce, pme, sbuf):
        """The CC queue's decoded instructions to two engines by opcode: ``all_to_all`` and
        ``send_recv`` to the :class:`PermuteEngine`, the others to the
        :class:`CollectiveEngine` (docs/collectives.md §14.6). The queue runs in order and
        one instruction at a time, so the engine that took the last instruction (``sel``) owns
        the SBUF row ports ``cc_r``/``cc_w``, the ring TX and RX and the ``done`` stream until
        it answers. Returns the ring-facing signals as a namespace like an engine's."""
        from types import SimpleNamespace
        pl = payload_layout(self.cfg)
        ins = ccd.instr
        to_p = (ins.payload.opcode == isa.OP_ALL_TO_ALL) | (ins.payload.opcode == isa.OP_SEND_RECV)
        sel, outstanding = Signal(), Signal()           # sel: the permute engine
        engs = (cce, pme)
        for k, e in enumerate(engs):
            mine = to_p if k else ~to_p
            m.d.comb += [e.instr.valid.eq(ins.valid & ~outstanding & mine),
                         e.instr.payload.eq(ins.payload)]
        m.d.comb += ins.ready.eq(~outstanding & Mux(to_p, pme.instr.ready, cce.instr.ready))
        with m.If(ins.valid & ins.ready):
            m.d.soft += [sel.eq(to_p), outstanding.eq(1)]
        with m.Elif(ccd.eng_done.valid & ccd.eng_done.ready):
            m.d.soft += outstanding.eq(0)
        m.d.comb += [ccd.eng_done.valid.eq(Mux(sel, pme.done.valid, cce.done.valid)),
                     ccd.eng_done.payload.eq(Mux(sel, pme.done.payload.as_value(),
                                                 cce.done.payload.as_value())),
                     cce.done.ready.eq(ccd.eng_done.ready & ~sel),
                     pme.done.ready.eq(ccd.eng_done.ready & sel)]
        for port, name in (("rd", "cc_r"), ("wr", "cc_w")):
            a, b, mem = getattr(cce, port), getattr(pme, port), getattr(sbuf, name)
            m.d.comb += [mem.req.valid.eq(Mux(sel, b.req.valid, a.req.valid)),
                         mem.req.payload.eq(Mux(sel, b.req.payload.as_value(),
                                                a.req.payload.as_value())),
                         a.req.ready.eq(mem.req.ready & ~sel), b.req.ready.eq(mem.req.ready & sel),
                         a.rsp.valid.eq(mem.rsp.valid & ~sel), b.rsp.valid.eq(mem.rsp.valid & sel),
                         a.rsp.payload.eq(mem.rsp.payload), b.rsp.payload.eq(mem.rsp.payload)]
        tx_valid, tx_ready, rx_expect = Signal(), Signal(), Signal()
        tx_payload = Signal(pl)
        rx = [SimpleNamespace(valid=Signal(name=f"cc_rx{v}_valid"),
                              payload=Signal(pl, name=f"cc_rx{v}_payload"),
                              ready=Signal(name=f"cc_rx{v}_ready")) for v in range(LINK_VCS)]
        m.d.comb += [tx_valid.eq(Mux(sel, pme.tx.valid, cce.tx.valid)),
                     tx_payload.eq(Mux(sel, pme.tx.payload.as_value(), cce.tx.payload.as_value())),
                     cce.tx.ready.eq(tx_ready & ~sel), pme.tx.ready.eq(tx_ready & sel),
                     rx_expect.eq(Mux(sel, pme.rx_expect, cce.rx_expect))]
        for v in range(LINK_VCS):
            for k, e in enumerate(engs):
                m.d.comb += [e.rx[v].valid.eq(rx[v].valid & (sel if k else ~sel)),
                             e.rx[v].payload.eq(rx[v].payload)]
            m.d.comb += rx[v].ready.eq(Mux(sel, pme.rx[v].ready, cce.rx[v].ready))
        link_err, link_info = Signal(), Signal(8)
        rank = Signal(self.cfg.link_src_bits)
        tx_credit = Signal(range(self.cfg.link_credits + 1))
        for e in engs:
            m.d.comb += [e.link_err.eq(link_err), e.link_info.eq(link_info), e.rank.eq(rank)]
        m.d.comb += pme.tx_credit.eq(tx_credit)
        return SimpleNamespace(tx=SimpleNamespace(valid=tx_valid, ready=tx_ready,
                                                  payload=tx_payload),
                               rx=rx, rx_expect=rx_expect, link_err=link_err,
                               link_info=link_info, rank=rank, tx_credit=tx_credit)

    def _ring(self, m, cce, soft, csr):
        """The link ports of the ring (none on a ring of one). The TX port is built without
        the dateline: on the dateline core the engine's flits enter its VC1 input, which is
        what a dateline port does to them (the engines take every flit they receive, and the
        permute engine sends the flits it forwards through that same input: nothing is
        forwarded through the port), so one converted core serves every rank."""
        if self.cfg.ring_size == 1:
            m.d.comb += [cce.tx.ready.eq(1), cce.link_err.eq(0), cce.rank.eq(0),
                         cce.tx_credit.eq(self.cfg.link_credits)]
            return
        tx = m.submodules.link_tx = soft(LinkTX(self.cfg))
        rx = m.submodules.link_rx = soft(LinkRX(self.cfg))
        dl = self.dateline
        for v in range(LINK_VCS):
            m.d.comb += [tx.i[v].valid.eq(cce.tx.valid & (dl == v)),
                         tx.i[v].payload.eq(cce.tx.payload),
                         cce.rx[v].valid.eq(rx.o[v].valid), cce.rx[v].payload.eq(rx.o[v].payload),
                         rx.o[v].ready.eq(cce.rx[v].ready)]
        m.d.comb += [cce.tx.ready.eq(Mux(dl, tx.i[1].ready, tx.i[0].ready)),
                     cce.rank.eq(self.rank),
                     cce.tx_credit.eq(Mux(dl, tx.credits[1], tx.credits[0])),
                     self.ring_tx_valid.eq(tx.w_valid), self.ring_tx_flit.eq(tx.w_flit.as_value()),
                     tx.credit.eq(self.ring_tx_credit),
                     rx.w_valid.eq(self.ring_rx_valid), rx.w_flit.eq(self.ring_rx_flit),
                     self.ring_rx_credit.eq(rx.credit),
                     tx.watchdog.eq(csr.watchdog), rx.watchdog.eq(csr.watchdog),
                     rx.expect.eq(cce.rx_expect),
                     cce.link_err.eq(tx.err | rx.err),
                     cce.link_info.eq(Mux(rx.err, rx.err_info, tx.err_info))]
