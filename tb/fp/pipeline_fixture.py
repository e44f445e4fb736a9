# SPDX-License-Identifier: Apache-2.0
"""A known pipeline (``o = i * 3 + 1`` after ``latency`` cycles) to test the harness itself."""

from amaranth.hdl import Module, Signal, unsigned

from rtl.pipeline import Pipeline, PipelineSignature


class AffinePipeline(Pipeline):
    """``o = (3 * i + 1) mod 2**width``, ``latency`` register stages, valid travels alongside."""

    def __init__(self, *, width=16, latency=3):
        self.width = width
        super().__init__(PipelineSignature(unsigned(width), unsigned(width), latency=latency))

    def elaborate(self, platform):
        m = Module()
        data, valid = (self.i.payload * 3 + 1)[:self.width], self.i.valid
        for _ in range(self.latency):
            d, v = Signal(self.width), Signal()
            m.d.sync += [d.eq(data), v.eq(valid)]
            data, valid = d, v
        m.d.comb += [self.o.payload.eq(data), self.o.valid.eq(valid)]
        return m
