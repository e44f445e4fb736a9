# SPDX-License-Identifier: Apache-2.0
"""A vector harness: stream preloaded input vectors through a fixed-latency pipeline, unattended.

The testbench writes input words straight into the ``vec_in`` memory (no bus cycles), pulses
``start`` and awaits ``done``; the design runs alone at one vector per cycle (or with
pseudo-random bubbles), so Verilator runs at full speed instead of one Python step per cycle.
"""

from amaranth.hdl import Module, Signal, Cat, Shape
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out


class VectorHarness(wiring.Component):
    """Feed ``dut.i`` from memory ``vec_in``; store every ``dut.o`` into memory ``vec_out``.

    The DUT is a :class:`~rtl.pipeline.Pipeline` without back-pressure (``i`` and ``o`` streams,
    ``always_ready``): every cycle with ``i.valid`` high produces exactly one cycle with
    ``o.valid`` high, in order (any latency). The harness meets it with ``wiring.connect``.

    Parameters
    ----------
    dut : Pipeline
        The pipeline under test (becomes submodule ``dut``).
    depth : int
        Vectors per batch.

    Members
    -------
    start : In(1)
        Pulse to stream ``count`` vectors from ``vec_in[0]`` onwards.
    count : In(range(depth + 1))
        Vectors in this batch.
    bubbles : In(1)
        When high, ``i_valid`` drops on pseudo-random cycles (a 16-bit LFSR, ~1 in 4).
    done : Out(1)
        High from the cycle the last output is stored until the next ``start``.
    cycles : Out(32)
        Clock cycles from ``start`` to ``done``.
    """

    def __init__(self, dut, *, depth):
        self._dut = dut
        self.depth = depth
        sig = dut.signature
        self.in_layout, self.out_layout = sig.in_layout, sig.out_layout
        self.in_width = Shape.cast(self.in_layout).width
        self.out_width = Shape.cast(self.out_layout).width
        super().__init__({
            "start": In(1), "count": In(range(depth + 1)), "bubbles": In(1),
            "done": Out(1), "cycles": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        dut = self._dut
        m.submodules.dut = dut
        m.submodules.vec_in = vec_in = memory.Memory(shape=self.in_width, depth=self.depth,
                                                     init=[])
        m.submodules.vec_out = vec_out = memory.Memory(shape=self.out_width, depth=self.depth,
                                                       init=[])
        rd = vec_in.read_port(domain="sync")
        wr = vec_out.write_port()

        running = Signal()
        issued = Signal(range(self.depth + 1))
        stored = Signal(range(self.depth + 1))
        lfsr = Signal(16, init=0xACE1)
        m.d.sync += lfsr.eq(Cat(lfsr[1:], lfsr[0] ^ lfsr[2] ^ lfsr[3] ^ lfsr[5]))
        stall = self.bubbles & (lfsr[0:2] == 0)

        fire = Signal()
        m.d.comb += [
            fire.eq(running & (issued < self.count) & ~stall),
            rd.addr.eq(issued),
            rd.en.eq(1),
        ]
        with m.If(fire):
            m.d.sync += issued.eq(issued + 1)
        # The read port has one cycle of latency: present its data with a delayed valid.
        feed = stream.Signature(self.in_layout, always_ready=True).create(path=("feed",))
        sink = stream.Signature(self.out_layout, always_ready=True).flip().create(
            path=("sink",))
        wiring.connect(m, feed, dut.i)
        wiring.connect(m, dut.o, sink)
        m.d.sync += feed.valid.eq(fire)
        m.d.comb += feed.payload.eq(rd.data)

        m.d.comb += [wr.addr.eq(stored), wr.data.eq(sink.payload), wr.en.eq(sink.valid)]
        with m.If(sink.valid):
            m.d.sync += stored.eq(stored + 1)

        with m.If(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            with m.If((stored == self.count) & ~sink.valid & (issued == self.count)):
                m.d.sync += [running.eq(0), self.done.eq(1)]
        with m.If(self.start):
            m.d.sync += [running.eq(1), self.done.eq(0), issued.eq(0), stored.eq(0),
                         self.cycles.eq(0)]
        return m
