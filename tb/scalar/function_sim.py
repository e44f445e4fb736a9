# SPDX-License-Identifier: Apache-2.0
"""amaranth.sim driver of :class:`rtl.scalar.function.FunctionUnit`: load a table image, stream
elements one per cycle, collect the results (every wait bounded)."""

import numpy as np

__all__ = ["FunctionDriver"]


class FunctionDriver:
    """Runs jobs on a :class:`tb.amsim.SimBench` of a ``FunctionUnit``."""

    def __init__(self, bench):
        self.bench = bench
        self.dut = bench.dut

    def run(self, image, xs, *, gap=None):
        """Load ``image`` ({addr: word}) then stream ``xs`` (uint32); returns the outputs in
        order (``np.uint32``). ``gap``: optional bool array, True = an idle cycle before that
        element (valid low), to check that valid, not position, carries the data."""
        dut = self.dut
        xs = [int(v) for v in np.asarray(xs, np.uint32)]
        gaps = [False] * len(xs) if gap is None else [bool(g) for g in gap]
        lat = dut.signature.latency
        out = []

        async def job(ctx):
            for addr, word in sorted(image.items()):
                ctx.set(dut.tw.valid, 1)
                ctx.set(dut.tw.payload.addr, addr)
                ctx.set(dut.tw.payload.data, word)
                await ctx.tick()
            ctx.set(dut.tw.valid, 0)
            sched = []
            for x, g in zip(xs, gaps):
                if g:
                    sched.append(None)
                sched.append(x)
            for c in range(len(sched) + lat + 4):       # bounded: latency + slack
                x = sched[c] if c < len(sched) else None
                ctx.set(dut.i.valid, x is not None)
                ctx.set(dut.i.payload.x, 0 if x is None else x)
                await ctx.tick()
                if ctx.get(dut.o.valid):
                    out.append(ctx.get(dut.o.payload.y))
        self.bench.run(job)
        return np.array(out, dtype=np.uint32)
