# SPDX-License-Identifier: Apache-2.0
"""The cocotb drivers of the multi-core top (:class:`rtl.core.multicore.MultiCore`): one
:class:`tb.core.driver.CoreTB` view per core on its ``c<i>_axi`` (an ``AxiRam``) and
``c<i>_host`` (an ``AxiLiteMaster``) ports; and of the collective-engine ring
(:class:`tb.multicore.harness.EngineRingHarness`): :class:`EngineRingTB`. The programs are
``tb/multicore/program.py``'s."""

from __future__ import annotations

import logging

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from tb.base import TB
from tb.core.driver import CoreTB
from tb.core.program import DRAM_BYTES
from tb.mem.driver import load_sbuf_banks, read_sbuf_banks

__all__ = ["EngineRingTB", "MultiCoreTB"]


class _Ports:
    """Core ``i``'s view of the top's ports, named as :class:`CoreTB` expects them."""

    def __init__(self, dut, i):
        self.clk, self.rst = dut.clk, dut.rst
        self.irq = getattr(dut, f"c{i}_irq")
        self.activity = getattr(dut, f"c{i}_activity")
        self._log = dut._log


class _CoreView(CoreTB):
    """A :class:`CoreTB` on core ``i`` of the multi-core top (shares the top's clock)."""

    def __init__(self, top: TB, i):              # noqa: D107 - CoreTB's members, prefixed
        dut = top.dut
        self.dut, self.cfg, self.params, self.seed = _Ports(dut, i), top.cfg, top.params, top.seed
        self.log, self._clock, self.cut_after = dut._log, True, None
        self.ram = AxiRam(AxiBus.from_prefix(dut, f"c{i}_axi", bus_separator="__"), dut.clk,
                          dut.rst, size=DRAM_BYTES)
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"c{i}_host", bus_separator="__"),
                                  dut.clk, dut.rst)
        for part in (self.ram, self.host):
            for side in (part.write_if, part.read_if):
                side.log.setLevel(logging.WARNING)


class MultiCoreTB(TB):
    """The top's testbench: ``cores[i]`` drives core i."""

    def __init__(self, dut):
        super().__init__(dut)
        self.n = self.cfg.ring_size
        self.cores = [_CoreView(self, i) for i in range(self.n)]

    async def run_all(self, progs, what, *, watchdog=0, skew=None):
        """Run ``progs[i]`` (a :class:`CoreProgram`) on every core at once; a list of
        ``(cycles, ERR_CODE)``, one per core. ``skew[i]``: cycles core i waits before it
        loads and starts its program (ranks that reach a collective at different times)."""
        for c in self.cores:
            await c.wr("WATCHDOG", watchdog)

        async def one(i, c, p):
            if skew is not None and skew[i]:
                await ClockCycles(self.dut.clk, int(skew[i]))
            return await c.run_program(p, f"{what} core {i}")
        tasks = [cocotb.start_soon(one(i, c, p))
                 for i, (c, p) in enumerate(zip(self.cores, progs))]
        return [await t for t in tasks]

    async def soft_reset_all(self):
        """The soft reset of every core, one after the other."""
        for c in self.cores:
            await c.soft_reset()


class EngineRingTB(TB):
    """The engine ring's testbench: backdoor SBUF access per rank (``ring.sbuf<r>.bank<b>``)
    and one instruction per rank run to completion (:meth:`run`)."""

    def __init__(self, dut):
        super().__init__(dut)
        self.n = self.cfg.ring_size

    async def reset(self):
        await TB.reset(self, start=0, watchdog=0, cut=self.n)

    def _banks(self, r):
        sb = getattr(self.dut.ring, f"sbuf{r}")
        return [getattr(sb, f"bank{b}") for b in range(self.cfg.sbuf_banks)]

    def load_sbuf(self, r, image):
        """Write ``image`` (partitions x bytes, uint8) into rank ``r``'s SBUF banks."""
        load_sbuf_banks(self.cfg, self._banks(r), image)

    def read_sbuf(self, r):
        """Rank ``r``'s SBUF as partitions x bytes (uint8)."""
        return read_sbuf_banks(self.cfg, self._banks(r))

    async def run(self, instrs, what, *, max_cycles, watchdog=0, cut=None):
        """Issue ``instrs[r]`` (the packed ``instr`` payload, an int) to every rank in one
        cycle and await every rank's ``done``, at most ``max_cycles`` cycles (a hang fails
        naming ``what``). Returns ``(statuses, infos, cycles)``: ``cycles`` from the issue
        cycle (1) to the last rank's done, as :func:`tb.multicore.rig.run_engines` counts."""
        dut, n = self.dut, self.n
        dut.watchdog.value = watchdog
        dut.cut.value = n if cut is None else cut
        for r, word in enumerate(instrs):
            getattr(dut, f"instr{r}").value = word
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await self.wait_high(dut.all_done, cycles=max_cycles, what=what)
        taken = int(dut.taken.value)
        if taken != (1 << n) - 1:
            raise AssertionError(self.fail_text(what, f"ranks took the instruction: "
                                                      f"{taken:0{n}b} (an engine was busy)"))
        st = [int(getattr(dut, f"status{r}").value) for r in range(n)]
        info = [int(getattr(dut, f"info{r}").value) for r in range(n)]
        cycles = max(int(getattr(dut, f"done_at{r}").value) for r in range(n))
        await ClockCycles(dut.clk, 4)        # as run_engines, before the SBUFs are read
        return st, info, cycles
