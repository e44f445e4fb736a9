# SPDX-License-Identifier: Apache-2.0
"""The host register block (rtl/core/csr.py) over AXI4-Lite, with a real semaphore file behind
it, in amaranth.sim (small preset). Expected values come from docs/architecture.md §11.1 and
the config, computed here."""

import math
import random

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from rtl import isa
from rtl.config import get_preset
from rtl.core.csr import (CSR, ERR_SRC_DMA, ERR_SRC_SEM, ID_VALUE, IRQ_ERROR, IRQ_IDLE, IRQ_NOTIFY,
                          Q_BLOCK, Q_REGS, Q_STRIDE, REGS, SEM_BLOCK, SEM_DEC_BLOCK,
                          SEM_INC_BLOCK)
from rtl.core.semaphores import E_SEM, SemaphoreFile

CFG = get_preset("small")
TIMEOUT = 50


class _Top(wiring.Component):
    def __init__(self):
        self.csr = CSR(CFG)
        self.sems = SemaphoreFile(CFG, sources=1)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.csr, m.submodules.sems = c, s = self.csr, self.sems
        wiring.connect(m, c.sem_set, s.set)
        wiring.connect(m, c.sem_add, s.add)
        m.d.comb += [s.rd_sem.eq(c.sem_rd), c.sem_data.eq(s.rd_data),
                     c.sem_err.eq(s.err), c.sem_code.eq(s.err_code), c.sem_idx.eq(s.err_sem)]
        return m


async def write(ctx, bus, addr, value):
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wdata, value)
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.bready, 1)
    for _ in range(TIMEOUT):
        aw = ctx.get(bus.awready)
        await ctx.tick()
        if aw:
            break
    else:
        raise AssertionError(f"AW at 0x{addr:x} not accepted")
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    for _ in range(TIMEOUT):
        if ctx.get(bus.bvalid):
            assert ctx.get(bus.bresp) == 0
            await ctx.tick()
            ctx.set(bus.bready, 0)
            return
        await ctx.tick()
    raise AssertionError(f"no B for 0x{addr:x}")


async def read(ctx, bus, addr):
    ctx.set(bus.araddr, addr)
    ctx.set(bus.arvalid, 1)
    ctx.set(bus.rready, 1)
    for _ in range(TIMEOUT):
        ar = ctx.get(bus.arready)
        await ctx.tick()
        if ar:
            break
    else:
        raise AssertionError(f"AR at 0x{addr:x} not accepted")
    ctx.set(bus.arvalid, 0)
    for _ in range(TIMEOUT):
        if ctx.get(bus.rvalid):
            v = ctx.get(bus.rdata)
            await ctx.tick()
            ctx.set(bus.rready, 0)
            return v
        await ctx.tick()
    raise AssertionError(f"no R for 0x{addr:x}")


def run(job):
    top = _Top()
    sim = Simulator(top)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await job(ctx, top.csr)
    sim.add_testbench(bench)
    sim.run()


def qreg(e, name):
    return Q_BLOCK + Q_STRIDE * e + Q_REGS[name]


def test_identity_and_config_words():
    async def job(ctx, c):
        b = c.bus
        assert await read(ctx, b, REGS["ID"]) == ID_VALUE
        cfg0 = await read(ctx, b, REGS["CFG0"])
        assert cfg0 & 0xFF == CFG.partitions and cfg0 >> 8 & 0xFF == CFG.pe_cols
        assert cfg0 >> 16 & 0xF == CFG.psum_banks
        assert 1 << (cfg0 >> 20 & 0xF) == CFG.psum_bank_fp32
        assert cfg0 >> 24 & 0x1F == math.ceil(math.log2(CFG.partitions
                                                         * CFG.sbuf_bytes_per_partition))
        cfg1 = await read(ctx, b, REGS["CFG1"])
        assert {isa.DTYPES[i] for i in range(16) if cfg1 >> i & 1} == set(CFG.formats)
        assert 1 << (cfg1 >> 20 & 0xF) == CFG.mx_block
        assert await read(ctx, b, REGS["SR_SEED"]) == CFG.sr_seed
        assert await read(ctx, b, REGS["WATCHDOG"]) == CFG.watchdog_reset
        assert await read(ctx, b, 0x0FC) == 0          # unmapped
    run(job)


def test_registers_read_back_and_drive_the_core():
    rng = random.Random(3)

    async def job(ctx, c):
        b = c.bus
        vals = {}
        for e in range(len(isa.ENGINES)):
            for name in ("Q_BASE_LO", "Q_BASE_HI", "Q_SIZE", "Q_TAIL"):
                v = rng.getrandbits(16 if name in ("Q_SIZE", "Q_TAIL") else 32)
                await write(ctx, b, qreg(e, name), v)
                vals[(e, name)] = v
            ctx.set(c.q_head[e], 100 + e)
        for name in ("WATCHDOG", "DRAM_BASE_LO", "DRAM_BASE_HI", "DRAM_LIMIT_LO",
                     "DRAM_LIMIT_HI"):
            vals[name] = rng.getrandbits(32)
            await write(ctx, b, REGS[name], vals[name])
        await write(ctx, b, REGS["CTRL"], 0b101101 << 8)
        for e in range(len(isa.ENGINES)):
            for name in ("Q_BASE_LO", "Q_BASE_HI", "Q_SIZE", "Q_TAIL"):
                assert await read(ctx, b, qreg(e, name)) == vals[(e, name)], (e, name)
            assert await read(ctx, b, qreg(e, "Q_HEAD")) == 100 + e
            assert ctx.get(c.q_base[e]) == vals[(e, "Q_BASE_HI")] << 32 | vals[(e, "Q_BASE_LO")]
            assert ctx.get(c.q_size[e]) == vals[(e, "Q_SIZE")]
            assert ctx.get(c.q_tail[e]) == vals[(e, "Q_TAIL")]
        for name in ("WATCHDOG", "DRAM_BASE_LO", "DRAM_BASE_HI"):
            assert await read(ctx, b, REGS[name]) == vals[name], name
        assert ctx.get(c.watchdog) == vals["WATCHDOG"]
        assert ctx.get(c.dram_base) == vals["DRAM_BASE_HI"] << 32 | vals["DRAM_BASE_LO"]
        assert ctx.get(c.dram_limit) == vals["DRAM_LIMIT_HI"] << 32 | vals["DRAM_LIMIT_LO"]
        assert ctx.get(c.run) == 0b101101
        assert await read(ctx, b, REGS["CTRL"]) == 0b101101 << 8
    run(job)


def test_semaphores_from_the_host():
    async def job(ctx, c):
        b = c.bus
        await write(ctx, b, SEM_BLOCK + 4 * 3, 10)
        await write(ctx, b, SEM_INC_BLOCK + 4 * 3, 5)
        await write(ctx, b, SEM_DEC_BLOCK + 4 * 3, 7)
        await write(ctx, b, SEM_INC_BLOCK + 4 * 9, 0x12345)
        assert await read(ctx, b, SEM_BLOCK + 4 * 3) == 8
        assert await read(ctx, b, SEM_BLOCK + 4 * 9) == 0x12345
        assert not ctx.get(c.stop)
        await write(ctx, b, SEM_DEC_BLOCK + 4 * 3, 9)         # underflow
        await ctx.tick().repeat(3)
        assert await read(ctx, b, SEM_BLOCK + 4 * 3) == 8      # unchanged
        code = await read(ctx, b, REGS["ERR_CODE"])
        assert code == (1 << 31 | ERR_SRC_SEM << 8 | E_SEM)
        assert await read(ctx, b, REGS["ERR_INFO"]) == 3
        assert ctx.get(c.stop)
    run(job)


def test_first_error_irq_and_soft_reset():
    async def job(ctx, c):
        b = c.bus
        await write(ctx, b, REGS["IRQ_ENABLE"], 0b011)
        await write(ctx, b, REGS["CTRL"], 0b1111 << 8)
        await write(ctx, b, qreg(1, "Q_TAIL"), 5)
        assert not ctx.get(c.irq)
        # two engines fail in the same cycle: the lower index is kept; a later one is not
        for e, code, pc, info in ((3, 0x04, 17, 0xAB), (2, 0x07, 9, 0xCD)):
            ctx.set(c.seq_err[e], 1)
            ctx.set(c.seq_code[e], code)
            ctx.set(c.seq_pc[e], pc)
            ctx.set(c.seq_info[e], info)
        await ctx.tick()
        ctx.set(c.dma_err, 1)
        ctx.set(c.dma_code, 0x0A)
        await ctx.tick()
        assert ctx.get(c.stop) and ctx.get(c.irq)
        assert await read(ctx, b, REGS["ERR_CODE"]) == (1 << 31 | 2 << 8 | 0x07)
        assert await read(ctx, b, REGS["ERR_PC"]) == 9
        assert await read(ctx, b, REGS["ERR_INFO"]) == 0xCD
        st = await read(ctx, b, REGS["STATUS"])
        assert st >> 8 & 1
        assert await read(ctx, b, REGS["IRQ_STATUS"]) & 1
        await write(ctx, b, REGS["IRQ_STATUS"], 1)             # W1C
        assert await read(ctx, b, REGS["IRQ_STATUS"]) & 1 == 0 and not ctx.get(c.irq)
        # notify pulses raise IRQ bit 1
        ctx.set(c.seq_notify, 0b10)
        await ctx.tick()
        ctx.set(c.seq_notify, 0)
        assert ctx.get(c.irq) and await read(ctx, b, REGS["IRQ_STATUS"]) & 2
        # soft reset: pulse, errors, IRQ status and tails cleared; enables and bases kept
        for e in (2, 3):
            ctx.set(c.seq_err[e], 0)
        ctx.set(c.dma_err, 0)
        pulses = 0
        ctx.set(b.awaddr, REGS["CTRL"])
        ctx.set(b.wdata, 1 | 0b1111 << 8)
        ctx.set(b.awvalid, 1)
        ctx.set(b.wvalid, 1)
        ctx.set(b.bready, 1)
        for _ in range(10):
            await ctx.tick()
            ctx.set(b.awvalid, 0)
            ctx.set(b.wvalid, 0)
            pulses += ctx.get(c.soft_reset)
        assert pulses == 1
        assert not ctx.get(c.stop)
        assert await read(ctx, b, REGS["ERR_CODE"]) >> 31 == 0
        assert await read(ctx, b, qreg(1, "Q_TAIL")) == 0
        assert await read(ctx, b, REGS["IRQ_STATUS"]) & 0b011 == 0
        assert ctx.get(c.run) == 0b1111
    run(job)


def test_idle_interrupt_on_the_falling_busy_edge():
    async def job(ctx, c):
        b = c.bus
        await write(ctx, b, REGS["IRQ_ENABLE"], 0b100)
        await write(ctx, b, REGS["CTRL"], 0b1 << 8)
        ctx.set(c.dma_idle, 1)
        await write(ctx, b, REGS["IRQ_STATUS"], 0b111)
        assert not ctx.get(c.irq)
        ctx.set(c.seq_busy, 1)
        await ctx.tick().repeat(3)
        assert not ctx.get(c.irq)
        assert await read(ctx, b, REGS["STATUS"]) & 0x23F == 1
        ctx.set(c.seq_busy, 0)
        await ctx.tick().repeat(2)
        assert ctx.get(c.irq)
        assert await read(ctx, b, REGS["STATUS"]) >> 9 & 1
        assert await read(ctx, b, REGS["IRQ_STATUS"]) == IRQ_IDLE
        await write(ctx, b, REGS["IRQ_STATUS"], IRQ_ERROR | IRQ_NOTIFY)   # other bits only
        await ctx.tick()
        assert await read(ctx, b, REGS["IRQ_STATUS"]) == IRQ_IDLE and ctx.get(c.irq)
        await write(ctx, b, REGS["IRQ_STATUS"], IRQ_IDLE)     # write 1 to clear
        await ctx.tick()
        assert await read(ctx, b, REGS["IRQ_STATUS"]) == 0 and not ctx.get(c.irq)
    run(job)


def test_unmapped_addresses_ignore_writes():
    """Writes to unmapped words below the semaphores, among them the images of CTRL,
    WATCHDOG and the queue registers one address bit above the map (0x200, 0x300), change no
    register and drive nothing."""
    async def job(ctx, c):
        b = c.bus
        await write(ctx, b, REGS["CTRL"], 0b10 << 8)
        await write(ctx, b, qreg(0, "Q_SIZE"), 7)
        before = {a: await read(ctx, b, a) for a in list(REGS.values())
                  + [qreg(e, n) for e in range(len(isa.ENGINES)) for n in Q_REGS]
                  if a not in (REGS["CYCLES"], REGS["DMA_BUSY"])}     # counters
        for a in [0x0FC, 0x200 | REGS["CTRL"], 0x200 | REGS["WATCHDOG"],
                  0x200 | REGS["IRQ_ENABLE"], 0x200 | qreg(0, "Q_SIZE"), 0x3FC]:
            await write(ctx, b, a, 0xFFFF_FFFE)
        await ctx.tick().repeat(2)
        after = {a: await read(ctx, b, a) for a in before}
        assert after == before, {hex(a): (before[a], after[a]) for a in before
                                 if after[a] != before[a]}
        assert ctx.get(c.run) == 0b10 and ctx.get(c.q_size[0]) == 7
        assert await read(ctx, b, 0x200 | REGS["CTRL"]) == 0
    run(job)


def test_performance_counters():
    """CYCLES counts every cycle, Q_BUSY the busy cycles of its engine only, DMA_BUSY the
    non-idle ones; the soft reset clears all of them."""
    async def job(ctx, c):
        b = c.bus
        ctx.set(c.dma_idle, 1)
        c0 = await read(ctx, b, REGS["CYCLES"])
        ctx.set(c.seq_busy, 0b000100)       # engine 2 busy for 7 cycles
        await ctx.tick().repeat(7)
        ctx.set(c.seq_busy, 0b010000)       # engine 4 and the DMA for 5
        ctx.set(c.dma_idle, 0)
        await ctx.tick().repeat(5)
        ctx.set(c.seq_busy, 0)
        ctx.set(c.dma_idle, 1)
        c1 = await read(ctx, b, REGS["CYCLES"])
        busy = [await read(ctx, b, qreg(e, "Q_BUSY")) for e in range(len(isa.ENGINES))]
        assert busy == [0, 0, 7, 0, 5, 0], busy
        assert await read(ctx, b, REGS["DMA_BUSY"]) == 5
        # back-to-back reads are a fixed number of cycles apart: the 12 cycles above + that
        r0 = await read(ctx, b, REGS["CYCLES"])
        r1 = await read(ctx, b, REGS["CYCLES"])
        assert c1 - c0 == 12 + (r1 - r0), (c0, c1, r0, r1)
        await write(ctx, b, REGS["CTRL"], 1)
        assert await read(ctx, b, REGS["DMA_BUSY"]) == 0
        assert await read(ctx, b, qreg(2, "Q_BUSY")) == 0
        assert await read(ctx, b, REGS["CYCLES"]) < 10
    run(job)


def test_cycles_after_the_soft_reset_as_after_reset():
    """Both resets clear CYCLES to 0 (docs/core.md §3): read k cycles after the power-on reset
    and k cycles after the soft-reset pulse takes effect, the two reads give the same count."""
    k = 5

    async def job(ctx, c):
        b = c.bus
        await ctx.tick().repeat(k)                  # cycle 0 is the first after reset
        v0 = await read(ctx, b, REGS["CYCLES"])
        ctx.set(b.awaddr, REGS["CTRL"])
        ctx.set(b.wdata, 1)
        ctx.set(b.awvalid, 1)
        ctx.set(b.wvalid, 1)
        ctx.set(b.bready, 1)
        for _ in range(TIMEOUT):
            aw = ctx.get(b.awready)
            await ctx.tick()
            if aw:
                ctx.set(b.awvalid, 0)
                ctx.set(b.wvalid, 0)
            if ctx.get(c.soft_reset):
                break
        else:
            raise AssertionError("no soft-reset pulse")
        await ctx.tick()                            # the pulse's cycle ends: counters at 0
        await ctx.tick().repeat(k)
        v1 = await read(ctx, b, REGS["CYCLES"])
        assert v1 == v0, (v0, v1)
    run(job)


def test_err_code_bit31_write_clears_the_latch():
    """Writing bit 31 of ERR_CODE clears the first-error latch, which then latches the next
    error (and again at once while a source still holds one); bit 31 written to any other
    word, or ERR_CODE written with bit 31 clear, keeps the latch (docs/core.md §3)."""
    read_only = ("ID", "CFG0", "CFG1", "SR_SEED", "STATUS", "ERR_PC", "ERR_INFO", "CYCLES",
                 "DMA_BUSY")

    async def job(ctx, c):
        b = c.bus
        ctx.set(c.dma_idle, 1)
        ctx.set(c.seq_err[1], 1)
        ctx.set(c.seq_code[1], 0x05)
        ctx.set(c.seq_pc[1], 12)
        await ctx.tick()
        ctx.set(c.seq_err[1], 0)
        first = 1 << 31 | 1 << 8 | 0x05
        assert await read(ctx, b, REGS["ERR_CODE"]) == first
        for name in read_only:
            await write(ctx, b, REGS[name], 1 << 31)
        await write(ctx, b, REGS["ERR_CODE"], 0x7FFF_FFFF)
        await ctx.tick()
        assert ctx.get(c.stop)
        assert await read(ctx, b, REGS["ERR_CODE"]) == first
        await write(ctx, b, REGS["ERR_CODE"], 1 << 31)
        await ctx.tick()
        assert not ctx.get(c.stop)
        assert await read(ctx, b, REGS["ERR_CODE"]) >> 31 == 0
        # the next error is the first one again; held, it latches again after a clear
        ctx.set(c.dma_err, 1)
        ctx.set(c.dma_code, 0x0A)
        await ctx.tick()
        second = 1 << 31 | ERR_SRC_DMA << 8 | 0x0A
        assert await read(ctx, b, REGS["ERR_CODE"]) == second
        await write(ctx, b, REGS["ERR_CODE"], 1 << 31)
        await ctx.tick()
        assert ctx.get(c.stop)
        assert await read(ctx, b, REGS["ERR_CODE"]) == second
    run(job)


def test_read_response_held_until_rready():
    """AXI4-Lite (IHI 0022, A3.2.1): once RVALID is up, RDATA stays until the RREADY
    handshake. A second AR presented meanwhile is answered after the first, each with its
    register's value."""
    async def job(ctx, c):
        b = c.bus
        addrs = [REGS["ID"], REGS["SR_SEED"]]
        want = [ID_VALUE, CFG.sr_seed]
        got, held = [], 0
        ctx.set(b.araddr, addrs[0])
        ctx.set(b.arvalid, 1)
        ctx.set(b.rready, 0)
        sent = 0
        for _ in range(TIMEOUT):
            ar = ctx.get(b.arvalid) and ctx.get(b.arready)
            rv = ctx.get(b.rvalid)
            rd = ctx.get(b.rdata)
            if rv:
                assert rd == want[len(got)], (len(got), hex(rd))
                held += not ctx.get(b.rready)
            await ctx.tick()
            if ar:
                sent += 1
                if sent < len(addrs):
                    ctx.set(b.araddr, addrs[sent])     # the next AR at once
                else:
                    ctx.set(b.arvalid, 0)
            if rv and ctx.get(b.rready):
                got.append(rd)
                held = 0
                ctx.set(b.rready, 0)
                if len(got) == len(addrs):
                    break
            elif held >= 4:
                ctx.set(b.rready, 1)                   # accept after 4 cycles of back-pressure
        else:
            raise AssertionError(f"reads not answered: {got}")
        assert got == want, [hex(v) for v in got]
    run(job)


def test_write_channels_handshake_independently():
    """A manager that drops AWVALID and WVALID each on its own handshake: both beats are
    accepted, B comes only after both (AXI4-Lite, IHI 0022 A3.3.1), and the write takes
    effect, also when W is presented before AW."""
    async def job(ctx, c):
        b = c.bus
        for value, aw_delay in ((0x1234_5678, 0), (0x0BAD_CAFE, 3)):
            ctx.set(b.awaddr, REGS["WATCHDOG"])
            ctx.set(b.wdata, value)
            ctx.set(b.wvalid, 1)
            ctx.set(b.bready, 1)
            aw_done = w_done = False
            for cyc in range(TIMEOUT):
                if cyc == aw_delay and not aw_done:
                    ctx.set(b.awvalid, 1)
                aw = ctx.get(b.awvalid) and ctx.get(b.awready)
                w = ctx.get(b.wvalid) and ctx.get(b.wready)
                bv = ctx.get(b.bvalid)
                if bv:
                    assert aw_done and w_done, (value, aw_done, w_done)
                await ctx.tick()
                if aw:
                    aw_done = True
                    ctx.set(b.awvalid, 0)
                if w:
                    w_done = True
                    ctx.set(b.wvalid, 0)
                if bv:
                    break
            else:
                raise AssertionError(f"no B (AW {aw_done}, W {w_done})")
            ctx.set(b.bready, 0)
            assert await read(ctx, b, REGS["WATCHDOG"]) == value
            assert ctx.get(c.watchdog) == value
    run(job)
