# SPDX-License-Identifier: Apache-2.0
"""The sync engine (SP): runs ``dma_start``. It reads descriptors from DRAM and queues them on
a DMA engine (``docs/isa.md`` §6)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.config import CoreConfig, check_config
from rtl.core.sequencer import Sequencer
from rtl.dma.axi import AXI4Signature, BURST_INCR, RESP_OKAY
from rtl.dma.descriptor import DESC_BITS
from rtl.dma.engine import DMAEngine
from rtl.isa import DESC_BYTES, E_AXI, E_DESC

__all__ = ["SyncEngine", "E_DESC", "E_AXI"]



class SyncEngine(wiring.Component):
    """Runs ``dma_start`` instructions from the SP sequencer, one at a time.

    ``dma_start engine queue count desc_addr``. Checked before anything is read:
    ``desc_addr`` must be a multiple of 64, ``engine < dma_engines`` and
    ``queue < dma_queues``, otherwise `E_DESC`; the ``count × 64`` bytes must lie inside the
    DRAM window ``[dram_base, dram_limit)``, otherwise `E_AXI`. Then each descriptor is read
    with one INCR burst (64 bytes, aligned, so it never crosses 4 KiB) and queued, in order, on
    ``dma[engine]`` with ``queue``. The instruction completes (``done``, status 0) when the
    last descriptor is queued. A read response that is not OKAY stops it with `E_AXI`
    (``info`` = the number of descriptors already queued); those stay queued.

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    issue : In(stream.Signature(Sequencer issue_layout))
    done : Out(stream.Signature(Sequencer done_layout))
    axi : Out(AXI4Signature(cfg))
        Reads only, ID 0.
    dma : Out(stream.Signature(DMAEngine in_layout)).array(dma_engines)
    dram_base, dram_limit : In(axi_addr_bits)
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "SyncEngine")
            seq = Sequencer.Signature(cfg, "sp")
            self.dma_in = DMAEngine.Signature(cfg).in_layout
            self.beats = max(1, DESC_BITS // cfg.axi_data_bits)
            super().__init__({
                "issue": In(stream.Signature(seq.issue_layout)),
                "done": Out(stream.Signature(seq.done_layout)),
                "axi": Out(AXI4Signature(cfg)),
                "dma": Out(stream.Signature(self.dma_in)).array(cfg.dma_engines),
                "dram_base": In(cfg.axi_addr_bits), "dram_limit": In(cfg.axi_addr_bits),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig, axi = self.cfg, self.signature, self.axi
        A = cfg.axi_addr_bits
        raw = self.issue.payload.raw
        eng, queue, count, addr = (isa.imm_bits(raw, "dma_start", n)
                                   for n in ("engine", "queue", "count", "desc_addr"))
        end = Signal(A + 18)
        m.d.comb += end.eq(addr + count * DESC_BYTES)
        bad_desc = ((addr % DESC_BYTES != 0) | (eng >= cfg.dma_engines)
                    | (queue >= cfg.dma_queues))
        bad_window = (count != 0) & ((addr < self.dram_base) | (end > self.dram_limit))

        r_eng = Signal(range(max(2, cfg.dma_engines)))
        r_queue = Signal(len(queue))
        r_left = Signal(16)
        r_addr = Signal(A)
        r_done = Signal(16)
        desc = Signal(DESC_BITS)
        beat = Signal(range(sig.beats + 1))
        bytes_per_beat = min(cfg.axi_data_bits, DESC_BITS) // 8
        m.d.comb += [axi.araddr.eq(r_addr), axi.arlen.eq(sig.beats - 1),
                     axi.arsize.eq(bytes_per_beat.bit_length() - 1), axi.arburst.eq(BURST_INCR),
                     axi.arid.eq(0), axi.bready.eq(1)]
        for port in self.dma:
            m.d.comb += [port.payload.queue.eq(r_queue), port.payload.desc.eq(desc)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.issue.valid):
                    m.d.comb += self.issue.ready.eq(1)
                    m.d.sync += [r_eng.eq(eng), r_queue.eq(queue), r_left.eq(count),
                                 r_addr.eq(addr), r_done.eq(0), self.done.payload.info.eq(0)]
                    with m.If(bad_desc):
                        m.d.sync += self.done.payload.status.eq(E_DESC)
                        m.next = "DONE"
                    with m.Elif(bad_window):
                        m.d.sync += self.done.payload.status.eq(E_AXI)
                        m.next = "DONE"
                    with m.Else():
                        m.d.sync += self.done.payload.status.eq(0)
                        m.next = "NEXT"
            with m.State("NEXT"):
                with m.If(r_left == 0):
                    m.next = "DONE"
                with m.Else():
                    m.d.comb += axi.arvalid.eq(1)
                    with m.If(axi.arready):
                        m.d.sync += beat.eq(0)
                        m.next = "READ"
            with m.State("READ"):
                m.d.comb += axi.rready.eq(1)
                with m.If(axi.rvalid):
                    if sig.beats > 1:
                        m.d.sync += desc.eq(Cat(desc[cfg.axi_data_bits:], axi.rdata))
                    else:   # a wide beat: the descriptor's 64 bytes at its offset in the beat
                        lane = r_addr[6:(cfg.axi_data_bits // 8).bit_length() - 1]
                        m.d.sync += desc.eq(axi.rdata.word_select(lane, DESC_BITS))
                    with m.If(axi.rresp != RESP_OKAY):
                        m.d.sync += [self.done.payload.status.eq(E_AXI),
                                     self.done.payload.info.eq(r_done)]
                    with m.If(axi.rlast):
                        m.next = "DRAIN_CHECK"
            with m.State("DRAIN_CHECK"):
                with m.If(self.done.payload.status != 0):
                    m.next = "DONE"
                with m.Else():
                    m.next = "QUEUE"
            with m.State("QUEUE"):
                for e, port in enumerate(self.dma):
                    with m.If(r_eng == e):
                        m.d.comb += port.valid.eq(1)
                        with m.If(port.ready):
                            m.d.sync += [r_left.eq(r_left - 1), r_done.eq(r_done + 1),
                                         r_addr.eq(r_addr + DESC_BYTES)]
                            m.next = "NEXT"
            with m.State("DONE"):
                m.d.comb += self.done.valid.eq(1)
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
