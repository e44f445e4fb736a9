# SPDX-License-Identifier: Apache-2.0
"""The cocotb driver of the whole core (:class:`rtl.core.neuroncore.NeuronCore`): DRAM is
cocotbext-axi's ``AxiRam`` (on ``axi__*``), the host an ``AxiLiteMaster`` (on ``host__*``);
register access, program loading, doorbells and the wait for the interrupt (every wait bounded)."""

from __future__ import annotations

import logging

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from rtl import isa
from rtl.core.csr import IRQ_ERROR, IRQ_IDLE, Q_BLOCK, Q_REGS, Q_STRIDE, REGS, SEM_BLOCK
from rtl.core.neuroncore import ENGINES_BUILT
from tb.base import CLOCK_NS, TB
from tb.core.program import DRAM_BYTES, QUEUE_BYTES, CoreProgram

__all__ = ["CoreTB", "MAX_CYCLES"]

#: Longest run of any test program, in cycles (a hung core fails the test).
MAX_CYCLES = 200_000


class CoreTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        self.ram = AxiRam(AxiBus.from_prefix(dut, "axi", bus_separator="__"), dut.clk, dut.rst,
                          size=max(DRAM_BYTES, int(self.params.get("dram_bytes", 0))))
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "host", bus_separator="__"),
                                  dut.clk, dut.rst)
        # one log line per burst costs more than simulating it
        for part in (self.ram, self.host):
            for side in (part.write_if, part.read_if):
                side.log.setLevel(logging.WARNING)
        #: When set, :meth:`run_program` returns that many cycles after the start.
        self.cut_after = None

    async def wr(self, name_or_addr, value):
        a = REGS[name_or_addr] if isinstance(name_or_addr, str) else name_or_addr
        await self.host.write_dword(a, value)

    async def rd(self, name_or_addr):
        a = REGS[name_or_addr] if isinstance(name_or_addr, str) else name_or_addr
        return await self.host.read_dword(a)

    def qreg(self, engine, name):
        return Q_BLOCK + Q_STRIDE * isa.ENGINES.index(engine) + Q_REGS[name]

    async def run_program(self, prog: CoreProgram, what):
        """Load ``prog``, run it to the idle or error interrupt; returns the cycles from the
        first doorbell to the interrupt and the error word."""
        dram, qs = prog.image()
        self.ram.write(0, bytes(dram))
        queues = {e: (prog.queue_base(e), QUEUE_BYTES // isa.INSTR_BYTES, qs.get(e, (0, 0))[1])
                  for e in ENGINES_BUILT}
        return await self.run_queues(queues, what, dram_limit=DRAM_BYTES)

    async def run_queues(self, queues, what, *, dram_base=0, dram_limit=DRAM_BYTES,
                         max_cycles=MAX_CYCLES):
        """Run the queues ``{engine: (q_base, q_size, q_tail)}`` already in DRAM (an engine
        not named gets an empty queue) to the idle or error interrupt; returns the cycles from
        the start to the interrupt and the error word (``(None, None)`` when
        :attr:`cut_after` stops it early)."""
        await self.wr("DRAM_BASE_LO", dram_base & 0xFFFFFFFF)
        await self.wr("DRAM_BASE_HI", dram_base >> 32)
        await self.wr("DRAM_LIMIT_LO", dram_limit & 0xFFFFFFFF)
        await self.wr("DRAM_LIMIT_HI", dram_limit >> 32)
        await self.wr("IRQ_STATUS", 0b111)
        await self.wr("IRQ_ENABLE", IRQ_ERROR | IRQ_IDLE)
        # engines disabled while the queues are set up; one CTRL write starts them together
        # (an engine started alone could finish before the next doorbell: a false idle)
        await self.wr("CTRL", 0)
        mask = 0
        for e in ENGINES_BUILT:
            base, size, _ = queues.get(e, (0, 2, 0))
            await self.wr(self.qreg(e, "Q_BASE_LO"), base & 0xFFFFFFFF)
            await self.wr(self.qreg(e, "Q_BASE_HI"), base >> 32)
            await self.wr(self.qreg(e, "Q_SIZE"), size)
            mask |= 1 << isa.ENGINES.index(e)
        for e, (_, _, tail) in queues.items():
            await self.wr(self.qreg(e, "Q_TAIL"), tail)
        await self.wr("IRQ_STATUS", 0b111)
        t0 = cocotb.utils.get_sim_time("ns")
        #: Cycle of the doorbell (the ``CTRL`` write that starts the engines) of the last run.
        self.start_cycle = int(t0 // CLOCK_NS)
        await self.wr("CTRL", mask << 8)
        if self.cut_after is not None:        # a soft reset in the middle of the run
            await ClockCycles(self.dut.clk, self.cut_after)
            return None, None
        await self.wait_high(self.dut.irq, cycles=max_cycles, what=what)
        cycles = int((cocotb.utils.get_sim_time("ns") - t0) // CLOCK_NS)
        await ClockCycles(self.dut.clk, 1)
        return cycles, await self.rd("ERR_CODE")

    async def trace(self, log):
        """Append ``(cycle, activity bits)`` to ``log`` at every change of the core's
        ``activity`` port (event-driven: one callback per change, not per cycle)."""
        while True:
            await self.dut.activity.value_change
            log.append((int(cocotb.utils.get_sim_time("ns") // CLOCK_NS),
                        int(self.dut.activity.value)))

    async def wait_idle(self, what, polls=2000):
        """Poll ``STATUS`` until the core is idle (streams drained, DMA idle): the soft reset
        must not cut AXI transactions in flight (docs/core.md §5)."""
        for _ in range(polls):
            if (await self.rd("STATUS")) >> 9 & 1:
                return
        raise AssertionError(self.fail_text(what, "the core did not drain"))

    async def counters(self):
        """``{"cycles": CYCLES, engine: Q_BUSY ..., "dma": DMA_BUSY}`` (wrapping 32-bit)."""
        out = {"cycles": await self.rd("CYCLES"), "dma": await self.rd("DMA_BUSY")}
        for e in ENGINES_BUILT:
            out[e] = await self.rd(self.qreg(e, "Q_BUSY"))
        return out

    async def soft_reset(self):
        ctrl = await self.rd("CTRL")
        await self.wr("CTRL", ctrl | 1)
        # the semaphore file clears its counters, one per cycle
        await ClockCycles(self.dut.clk, self.cfg.semaphores + 4)

    async def sem(self, i):
        return await self.rd(SEM_BLOCK + 4 * i)


#: DRAM address of the result of :func:`matmul_program`.
