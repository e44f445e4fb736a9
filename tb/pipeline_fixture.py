# SPDX-License-Identifier: Apache-2.0
"""A known pipeline (``o = i * 3 + 1`` after ``latency`` cycles) to test the harness itself."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class AffinePipeline(wiring.Component):
    """``o = (3 * i + 1) mod 2**width``, ``latency`` register stages, valid travels alongside."""

    def __init__(self, *, width=16, latency=3):
        self.width = width
        self.latency = latency
        super().__init__({"i_valid": In(1), "i": In(width), "o_valid": Out(1), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        data, valid = (self.i * 3 + 1)[:self.width], self.i_valid
        for _ in range(self.latency):
            d, v = Signal(self.width), Signal()
            m.d.sync += [d.eq(data), v.eq(valid)]
            data, valid = d, v
        m.d.comb += [self.o.eq(data), self.o_valid.eq(valid)]
        return m
