# SPDX-License-Identifier: Apache-2.0
"""The host register block: an AXI4-Lite slave with the register map of
``docs/architecture.md`` §11.1 (docs/core.md §3), the first-error latch of §11.3 and the
interrupt line."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.config import DENSE_FORMAT_NAMES, MX_FORMAT_NAMES, CoreConfig, check_config
from rtl.core.semaphores import SemaphoreFile
from rtl.core.sequencer import QUEUE_INDEX_BITS
from rtl.isa import ERROR_BITS

__all__ = ["AXI4LiteSignature", "CSR", "ID_VALUE", "REGS", "Q_REGS", "ERR_SRC_DMA",
           "ERR_SRC_SEM", "IRQ_ERROR", "IRQ_NOTIFY", "IRQ_IDLE"]

#: ``ID`` register: "NC" magic and version 1.
ID_VALUE = 0x4E430001
#: Register offsets (§11.1).
REGS = {"ID": 0x000, "CFG0": 0x004, "CFG1": 0x008, "SR_SEED": 0x00C, "CTRL": 0x010,
        "STATUS": 0x014, "ERR_CODE": 0x018, "ERR_PC": 0x01C, "ERR_INFO": 0x020,
        "WATCHDOG": 0x024, "IRQ_ENABLE": 0x028, "IRQ_STATUS": 0x02C, "DRAM_BASE_LO": 0x030,
        "DRAM_BASE_HI": 0x034, "DRAM_LIMIT_LO": 0x038, "DRAM_LIMIT_HI": 0x03C,
        "CYCLES": 0x040, "DMA_BUSY": 0x044}
#: Per-engine queue registers at ``0x100 + 0x20 * e`` (``e`` = index in ``rtl.isa.ENGINES``).
Q_REGS = {"Q_BASE_LO": 0x0, "Q_BASE_HI": 0x4, "Q_SIZE": 0x8, "Q_HEAD": 0xC, "Q_TAIL": 0x10,
          "Q_STATE": 0x14, "Q_BUSY": 0x18}
Q_BLOCK, Q_STRIDE = 0x100, 0x20
SEM_BLOCK, SEM_INC_BLOCK, SEM_DEC_BLOCK = 0x400, 0x800, 0xC00
#: ``ERR_CODE[10:8]`` of errors that are not a sequencer's: the DMA, the semaphore file.
ERR_SRC_DMA, ERR_SRC_SEM = 6, 7
IRQ_ERROR, IRQ_NOTIFY, IRQ_IDLE = 1, 2, 4
_ADDR_BITS = 12
_E = len(isa.ENGINES)


class AXI4LiteSignature(wiring.Signature):
    """Manager (requester) view of a 32-bit AXI4-Lite port with 12 address bits (the 4 KiB
    window); a subordinate has ``In(AXI4LiteSignature())``. Ports ``<name>__awaddr`` ... for
    cocotbext-axi (``bus_separator="__"``)."""

    def __init__(self):
        super().__init__({
            "awaddr": Out(_ADDR_BITS), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(_ADDR_BITS), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


def _log2(n):
    return max(0, (n - 1).bit_length())


class CSR(wiring.Component):
    """Host registers, first-error latch and interrupt (docs/core.md §3).

    Writes take effect one cycle after the AW and W beats are both accepted (full 32-bit
    writes; ``wstrb`` is ignored); reads return the value of the cycle after AR, semaphores
    one cycle later. Every address answers OKAY; an unmapped one reads 0 and ignores writes.

    ``CTRL.soft_reset`` (bit 0, self-clearing) pulses ``soft_reset`` for one cycle (the core
    resets its sequencers, DMA and semaphore file with it and keeps SBUF and PSUM) and clears,
    here, every ``Q_TAIL``, the error latch and ``IRQ_STATUS``; the queue bases and sizes,
    ``WATCHDOG``, the DRAM window, ``IRQ_ENABLE`` and the engine-enable mask stay.
    ``CTRL.abort`` (bit 1) holds ``stop`` high like an error.

    The first error of any source is latched with its source (``ERR_CODE[10:8]``: the engine
    index, :data:`ERR_SRC_DMA`, :data:`ERR_SRC_SEM`; on a tie, the lowest), its code, queue
    index and detail; ``stop`` is then high until the soft reset (writing 1 to
    ``ERR_CODE[31]`` also clears the latch).

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    bus : In(AXI4LiteSignature())
    q_base : Out(axi_addr_bits).array(6); q_size, q_tail : Out(QUEUE_INDEX_BITS).array(6)
    q_head : In(QUEUE_INDEX_BITS).array(6)
    run : Out(6)
        Engine-enable mask (``CTRL[13:8]``).
    seq_busy, seq_halted, seq_err : In(6)
    seq_code : In(ERROR_BITS).array(6); seq_pc : In(QUEUE_INDEX_BITS).array(6); seq_info : In(32).array(6)
    seq_notify : In(6)
        Notify or ``irq_on_done`` pulses.
    dma_err, dma_idle : In(1); dma_code : In(ERROR_BITS); dma_info : In(32)
    sem_err : In(1); sem_code : In(ERROR_BITS); sem_idx : In(8)
    sem_rd : Out(8); sem_data : In(semaphore_bits)
    sem_set : Out(stream set_layout); sem_add : Out(stream add_layout)
        To the :class:`~rtl.core.semaphores.SemaphoreFile`.
    watchdog : Out(32); dram_base, dram_limit : Out(axi_addr_bits)
    soft_reset, stop, irq : Out(1)

    Performance counters (32 bits, wrapping, cleared by reset and the soft reset): ``CYCLES``
    counts every cycle, ``Q_BUSY`` of an engine the cycles its sequencer was busy, ``DMA_BUSY``
    the cycles some DMA engine was not idle. A kernel's busy fraction per engine is the
    difference of two ``Q_BUSY`` reads over the difference of the ``CYCLES`` reads.
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "CSR")
            Q, A = QUEUE_INDEX_BITS, cfg.axi_addr_bits
            ss = SemaphoreFile.Signature(cfg)
            super().__init__({
                "bus": In(AXI4LiteSignature()),
                "q_base": Out(A).array(_E), "q_size": Out(Q).array(_E),
                "q_tail": Out(Q).array(_E), "q_head": In(Q).array(_E), "run": Out(_E),
                "seq_busy": In(_E), "seq_halted": In(_E), "seq_err": In(_E),
                "seq_code": In(ERROR_BITS).array(_E), "seq_pc": In(Q).array(_E),
                "seq_info": In(32).array(_E), "seq_notify": In(_E),
                "dma_err": In(1), "dma_idle": In(1), "dma_code": In(ERROR_BITS), "dma_info": In(32),
                "sem_err": In(1), "sem_code": In(ERROR_BITS), "sem_idx": In(8),
                "sem_rd": Out(8), "sem_data": In(cfg.semaphore_bits),
                "sem_set": Out(stream.Signature(ss.set_layout)),
                "sem_add": Out(stream.Signature(ss.add_layout)),
                "watchdog": Out(32), "dram_base": Out(A), "dram_limit": Out(A),
                "soft_reset": Out(1), "stop": Out(1), "irq": Out(1),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def cfg_words(self):
        """``(CFG0, CFG1)`` as the host reads them (§11.1)."""
        c = self.cfg
        cfg0 = (c.partitions & 0xFF) | (c.pe_cols & 0xFF) << 8 | (c.psum_banks & 0xF) << 16 \
            | _log2(c.psum_bank_fp32) << 20 | _log2(c.partitions * c.sbuf_bytes_per_partition) << 24
        mask = sum(1 << isa.DTYPE_CODES[f] for f in c.formats if f in isa.DTYPE_CODES)
        mx = sum(1 << i for i, f in enumerate(MX_FORMAT_NAMES) if f in c.mx_formats)
        return cfg0, mask | mx << 16 | _log2(c.mx_block) << 20

    def elaborate(self, platform):
        m = Module()
        cfg, bus = self.cfg, self.bus
        A = cfg.axi_addr_bits
        assert set(DENSE_FORMAT_NAMES) <= set(isa.DTYPE_CODES)

        # ---- registers ---------------------------------------------------------------------
        q_base = [Signal(A, name=f"q_base{e}") for e in range(_E)]
        q_size = [Signal(QUEUE_INDEX_BITS, name=f"q_size{e}") for e in range(_E)]
        q_tail = [Signal(QUEUE_INDEX_BITS, name=f"q_tail{e}") for e in range(_E)]
        run = Signal(_E)
        abort = Signal()
        watchdog = Signal(32, init=cfg.watchdog_reset)
        dram_base = Signal(A)
        dram_limit = Signal(A, init=(1 << A) - 1)
        irq_en = Signal(3)
        irq_st = Signal(3)
        soft = Signal()
        for e in range(_E):
            m.d.comb += [self.q_base[e].eq(q_base[e]), self.q_size[e].eq(q_size[e]),
                         self.q_tail[e].eq(q_tail[e])]
        m.d.comb += [self.run.eq(run), self.watchdog.eq(watchdog),
                     self.dram_base.eq(dram_base), self.dram_limit.eq(dram_limit),
                     self.soft_reset.eq(soft)]
        m.d.sync += soft.eq(0)

        # ---- first-error latch -------------------------------------------------------------
        err_valid = Signal()
        err_src, err_code = Signal(3), Signal(ERROR_BITS)
        err_pc, err_info = Signal(QUEUE_INDEX_BITS), Signal(32)
        m.d.comb += self.stop.eq(err_valid | abort)
        srcs = [(self.seq_err[e], e, self.seq_code[e], self.seq_pc[e], self.seq_info[e])
                for e in range(_E)]
        srcs += [(self.dma_err, ERR_SRC_DMA, self.dma_code, 0, self.dma_info),
                 (self.sem_err, ERR_SRC_SEM, self.sem_code, 0, self.sem_idx)]
        with m.If(~err_valid):
            for i, (flag, src, code, pc, info) in enumerate(srcs):
                cond = flag if i == 0 else flag & ~Cat(s[0] for s in srcs[:i]).any()
                with m.If(cond):
                    m.d.sync += [err_valid.eq(1), err_src.eq(src), err_code.eq(code),
                                 err_pc.eq(pc), err_info.eq(info)]

        # ---- interrupts --------------------------------------------------------------------
        idle = ~(self.seq_busy & run).any() & self.dma_idle
        idle_q = Signal(init=1)
        m.d.sync += idle_q.eq(idle)
        any_err = Cat(s[0] for s in srcs).any()
        events = Cat(any_err & ~err_valid, self.seq_notify.any(), idle & ~idle_q)
        m.d.sync += irq_st.eq(irq_st | events)
        m.d.comb += self.irq.eq((irq_st & irq_en).any())

        # ---- AXI4-Lite writes --------------------------------------------------------------
        w_go = bus.awvalid & bus.wvalid & ~bus.bvalid
        m.d.comb += bus.bresp.eq(0)
        # a semaphore write waits for the file; the bus waits with it
        wa = Signal(_ADDR_BITS)
        wd = Signal(32)
        w_pend = Signal()
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(w_go & ~w_pend):
            m.d.sync += [wa.eq(bus.awaddr), wd.eq(bus.wdata), w_pend.eq(1)]
        m.d.comb += [bus.awready.eq(w_go & ~w_pend), bus.wready.eq(w_go & ~w_pend)]
        sem_i = wa[2:10]
        blk = wa[10:12]
        m.d.comb += [self.sem_set.payload.sem.eq(sem_i), self.sem_set.payload.value.eq(wd),
                     self.sem_add.payload.sem.eq(sem_i), self.sem_add.payload.value.eq(wd),
                     self.sem_add.payload.dec.eq(blk == 3)]
        wdone = Signal()
        with m.If(w_pend):
            with m.If(blk == 1):
                m.d.comb += [self.sem_set.valid.eq(1), wdone.eq(self.sem_set.ready)]
            with m.Elif(blk >= 2):
                m.d.comb += [self.sem_add.valid.eq(1), wdone.eq(self.sem_add.ready)]
            with m.Else():
                m.d.comb += wdone.eq(1)
                with m.Switch(wa[2:10]):
                    with m.Case(REGS["CTRL"] >> 2):
                        m.d.sync += [soft.eq(wd[0]), abort.eq(wd[1]), run.eq(wd[8:8 + _E])]
                    with m.Case(REGS["ERR_CODE"] >> 2):
                        with m.If(wd[31]):
                            m.d.sync += err_valid.eq(0)
                    with m.Case(REGS["WATCHDOG"] >> 2):
                        m.d.sync += watchdog.eq(wd)
                    with m.Case(REGS["IRQ_ENABLE"] >> 2):
                        m.d.sync += irq_en.eq(wd[:3])
                    with m.Case(REGS["IRQ_STATUS"] >> 2):
                        m.d.sync += irq_st.eq((irq_st | events) & ~wd[:3])
                    for name, reg, lo in (("DRAM_BASE", dram_base, True),
                                          ("DRAM_BASE", dram_base, False),
                                          ("DRAM_LIMIT", dram_limit, True),
                                          ("DRAM_LIMIT", dram_limit, False)):
                        off = REGS[f"{name}_{'LO' if lo else 'HI'}"]
                        with m.Case(off >> 2):
                            if lo:
                                m.d.sync += reg[:32].eq(wd)
                            elif A > 32:
                                m.d.sync += reg[32:].eq(wd)
                    for e in range(_E):
                        base = (Q_BLOCK + Q_STRIDE * e) >> 2
                        with m.Case(base + (Q_REGS["Q_BASE_LO"] >> 2)):
                            m.d.sync += q_base[e][:32].eq(wd)
                        if A > 32:
                            with m.Case(base + (Q_REGS["Q_BASE_HI"] >> 2)):
                                m.d.sync += q_base[e][32:].eq(wd)
                        with m.Case(base + (Q_REGS["Q_SIZE"] >> 2)):
                            m.d.sync += q_size[e].eq(wd)
                        with m.Case(base + (Q_REGS["Q_TAIL"] >> 2)):
                            m.d.sync += q_tail[e].eq(wd)
            with m.If(wdone):
                m.d.sync += [w_pend.eq(0), bus.bvalid.eq(1)]
        # soft reset: after the write above (later statements win)
        with m.If(soft):
            m.d.sync += [err_valid.eq(0), irq_st.eq(0)] + [t.eq(0) for t in q_tail]

        # ---- AXI4-Lite reads ---------------------------------------------------------------
        ra = Signal(_ADDR_BITS)
        r_state = Signal(2)          # 0 idle, 1 read (registers), 2 semaphore wait
        m.d.comb += [bus.arready.eq((r_state == 0) & ~bus.rvalid), bus.rresp.eq(0),
                     self.sem_rd.eq(ra[2:10])]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [ra.eq(bus.araddr), r_state.eq(1)]
        cfg0, cfg1 = self.cfg_words()
        cycles, dma_busy = Signal(32), Signal(32)
        q_busy = [Signal(32, name=f"q_busy{e}") for e in range(_E)]
        m.d.sync += [cycles.eq(cycles + 1), dma_busy.eq(dma_busy + ~self.dma_idle)]
        m.d.sync += [q_busy[e].eq(q_busy[e] + self.seq_busy[e]) for e in range(_E)]
        with m.If(self.soft_reset):
            m.d.sync += [cycles.eq(0), dma_busy.eq(0)] + [c.eq(0) for c in q_busy]
        status = Cat((self.seq_busy & run), Signal(2), err_valid, idle)
        val = Signal(32)
        with m.Switch(ra[2:12]):
            for name, value in (("ID", ID_VALUE), ("CFG0", cfg0), ("CFG1", cfg1),
                                ("SR_SEED", cfg.sr_seed),
                                ("CTRL", Cat(soft, abort, Signal(6), run)),
                                ("STATUS", status),
                                ("ERR_CODE", Cat(err_code, err_src, Signal(20), err_valid)),
                                ("ERR_PC", err_pc), ("ERR_INFO", err_info),
                                ("WATCHDOG", watchdog), ("IRQ_ENABLE", irq_en),
                                ("IRQ_STATUS", irq_st), ("DRAM_BASE_LO", dram_base[:32]),
                                ("DRAM_BASE_HI", dram_base[32:] if A > 32 else 0),
                                ("DRAM_LIMIT_LO", dram_limit[:32]),
                                ("DRAM_LIMIT_HI", dram_limit[32:] if A > 32 else 0),
                                ("CYCLES", cycles), ("DMA_BUSY", dma_busy)):
                with m.Case(REGS[name] >> 2):
                    m.d.comb += val.eq(value)
            for e in range(_E):
                base = (Q_BLOCK + Q_STRIDE * e) >> 2
                state = Cat(self.seq_busy[e], self.seq_halted[e], self.seq_err[e])
                for name, value in (("Q_BASE_LO", q_base[e][:32]),
                                    ("Q_BASE_HI", q_base[e][32:] if A > 32 else 0),
                                    ("Q_SIZE", q_size[e]), ("Q_HEAD", self.q_head[e]),
                                    ("Q_TAIL", q_tail[e]), ("Q_STATE", state),
                                    ("Q_BUSY", q_busy[e])):
                    with m.Case(base + (Q_REGS[name] >> 2)):
                        m.d.comb += val.eq(value)
        with m.If(r_state == 1):
            with m.If(ra[10:12] == 1):
                m.d.sync += r_state.eq(2)      # semaphore: the file answers next cycle
            with m.Else():
                m.d.sync += [bus.rdata.eq(val), bus.rvalid.eq(1), r_state.eq(0)]
        with m.If(r_state == 2):
            m.d.sync += [bus.rdata.eq(self.sem_data), bus.rvalid.eq(1), r_state.eq(0)]
        return m
