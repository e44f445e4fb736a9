# SPDX-License-Identifier: Apache-2.0
"""cocotb side of :class:`tb.harness.VectorHarness`: preload, start, await done, read back."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, ReadOnly


class VectorTB:
    """Drives a ``VectorHarness`` top level.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    depth : int
        The harness batch depth (``VectorHarness.depth``, read from the rebuilt harness object).
    """

    def __init__(self, dut, depth):
        self.dut = dut
        self.depth = depth
        self.total_cycles = 0
        self._started = False

    async def reset(self):
        if not self._started:
            cocotb.start_soon(Clock(self.dut.clk, 10, unit="ns").start())
            self._started = True
        self.dut.rst.value = 1
        self.dut.start.value = 0
        self.dut.count.value = 0
        self.dut.bubbles.value = 0
        await RisingEdge(self.dut.clk)
        await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    async def run(self, words, *, bubbles=False):
        """Stream ``words`` (ints, packed with the DUT's input layout); return the output words."""
        out = []
        for lo in range(0, len(words), self.depth):
            out.extend(await self._batch(words[lo:lo + self.depth], bubbles))
        return out

    async def _batch(self, words, bubbles):
        dut = self.dut
        mem_in = dut.vec_in
        for i, w in enumerate(words):
            mem_in[i].value = int(w)
        dut.count.value = len(words)
        dut.bubbles.value = int(bubbles)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.done)
        await ReadOnly()
        self.total_cycles += int(dut.cycles.value)
        mem_out = dut.vec_out
        res = [int(mem_out[i].value) for i in range(len(words))]
        await RisingEdge(dut.clk)
        return res
