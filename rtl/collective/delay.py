# SPDX-License-Identifier: Apache-2.0
"""The wire between two cores: a delay line of ``latency`` cycles (docs/collectives.md §6)."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DelayLine"]


class DelayLine(wiring.Component):
    """``o_valid``/``o`` at cycle ``t`` are ``i_valid``/``i`` of cycle ``t - latency`` (0 and
    ``o_valid`` low for the first ``latency`` cycles after a reset: nothing is in flight).

    The valid bits are a shift register (cleared by reset); with ``in_memory`` the data go
    through a memory of ``latency - 1`` words and its synchronous read port (the wide flits),
    otherwise through the shift register too (the credit returns).

    Parameters
    ----------
    width : int
        Data bits.
    latency : int
        Cycles, 2..256.
    in_memory : bool

    Members
    -------
    i : In(width); i_valid : In(1)
    o : Out(width); o_valid : Out(1)
    """

    class Signature(wiring.Signature):
        """Members and ``latency`` of a :class:`DelayLine`."""

        def __init__(self, width, latency):
            if isinstance(width, bool) or not isinstance(width, int) or width <= 0:
                raise ValueError(f"DelayLine width must be a positive integer, not {width!r}")
            if isinstance(latency, bool) or not isinstance(latency, int) or \
                    not 2 <= latency <= 256:
                raise ValueError(f"DelayLine latency must be in [2, 256], not {latency!r}")
            self.width, self.latency = width, latency
            super().__init__({"i": In(width), "i_valid": In(1),
                              "o": Out(width), "o_valid": Out(1)})

    def __init__(self, width, latency, *, in_memory=True):
        super().__init__(self.Signature(width, latency))
        self.width, self.latency, self.in_memory = width, latency, in_memory

    def elaborate(self, platform):
        m = Module()
        L = self.latency
        valid = Signal(L)
        m.d.sync += valid.eq((valid << 1) | self.i_valid)
        m.d.comb += self.o_valid.eq(valid[L - 1])
        if self.in_memory:
            D = L - 1
            mem = m.submodules.mem = memory.Memory(shape=self.width, depth=D, init=[])
            wp = mem.write_port()
            rp = mem.read_port()                        # reads the word before this write
            ptr = Signal(range(D))
            m.d.sync += ptr.eq(ptr + 1)
            with m.If(ptr == D - 1):
                m.d.sync += ptr.eq(0)
            m.d.comb += [wp.addr.eq(ptr), wp.data.eq(self.i), wp.en.eq(1),
                         rp.addr.eq(ptr), self.o.eq(rp.data)]
        else:
            regs = [Signal(self.width, name=f"d{k}") for k in range(L)]
            m.d.sync += regs[0].eq(self.i)
            for k in range(1, L):
                m.d.sync += regs[k].eq(regs[k - 1])
            m.d.comb += self.o.eq(regs[L - 1])
        return m
