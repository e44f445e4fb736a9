# SPDX-License-Identifier: Apache-2.0
"""cocotb side of :class:`tb.fp.harness.VectorHarness`: preload, start, await done, read back.

:class:`VectorTB` streams packed words; :class:`PipelineTB` adds the unit's layouts (from its
``Signature``, rebuilt from the config and parameters, never elaborated): fields in, fields out,
metrics recorded per stream.
"""

from __future__ import annotations

import time

from cocotb.triggers import RisingEdge

from tb.base import TB
from tb.pack import pack, unpack

__all__ = ["VectorTB", "PipelineTB"]


class VectorTB(TB):
    """Drives a ``VectorHarness`` top level of batch ``depth``.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    depth : int
        The harness batch depth (``params["depth"]`` by default).
    latency : int
        The pipeline's latency (bounds the wait for ``done``).
    """

    def __init__(self, dut, depth=None, *, latency=0):
        super().__init__(dut)
        self.depth = int(depth if depth is not None else self.params["depth"])
        self.latency = latency
        self.total_cycles = 0

    async def reset(self):
        await super().reset(start=0, count=0, bubbles=0)

    async def run_words(self, words, *, bubbles=False):
        """Stream ``words`` (ints, packed with the DUT's input layout); the output words."""
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
        # one vector per cycle, or one in ~4/3 cycles with bubbles, plus the pipeline
        bound = 2 * len(words) + self.latency + 64
        await self.wait_high(dut.done, cycles=bound, what=f"vector harness batch of "
                                                          f"{len(words)} (done)")
        self.total_cycles += int(dut.cycles.value)
        mem_out = dut.vec_out
        res = [int(mem_out[i].value) for i in range(len(words))]
        await RisingEdge(dut.clk)
        return res


class PipelineTB(VectorTB):
    """A :class:`VectorTB` for a unit with a :class:`~rtl.pipeline.PipelineSignature`.

    Parameters
    ----------
    dut : cocotb handle of the harness top.
    signature : PipelineSignature
        The unit's signature (``Unit.Signature(cfg, ...)``): layouts and latency.
    unit : str
        Name used in logs and metrics.
    """

    def __init__(self, dut, signature, unit, depth=None):
        super().__init__(dut, depth, latency=signature.latency)
        self.signature = signature
        self.unit = unit

    async def stream(self, what, *, bubbles=False, **fields):
        """Stream one set of inputs (numpy arrays per input field); the output fields as
        ``np.int64`` arrays. Records cases, seconds and cycles."""
        words = pack(self.signature.in_layout, **fields)
        t0 = time.monotonic()
        c0 = self.total_cycles
        out = await self.run_words(words, bubbles=bubbles)
        dt = time.monotonic() - t0
        self.record(unit=self.unit, test=what, cases=len(words), seconds=dt,
                    cycles=self.total_cycles - c0, bubbles=bool(bubbles))
        return unpack(self.signature.out_layout, out)
