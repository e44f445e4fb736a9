# SPDX-License-Identifier: Apache-2.0
"""What a block factory returns (:class:`rtl.emit.Design`), and the 3-pin place-and-route harness.

Verilog is emitted by :mod:`rtl.emit` (the one emitter); this module adds the synthesis-only
serial harness and re-exports the emitter's names the flow uses.
"""

from __future__ import annotations

from rtl.emit import Design, as_design, emit_rtlil, emit_verilog, port_values

__all__ = ["Design", "as_design", "emit_rtlil", "emit_verilog", "emit_harness_verilog", "port_bits"]


def port_bits(component):
    """Total input and output port bits of a component (clock and reset not counted)."""
    pv = port_values(component)
    return sum(len(v) for v, i in pv if i), sum(len(v) for v, i in pv if not i)


def emit_harness_verilog(design):
    """Verilog of ``design`` wrapped in a serial harness with pins ``clk rst sin load sout``.

    Every input port bit of the block is driven by a serial-in shift register fed from ``sin``;
    every output port bit is captured by a parallel-load shift register (``load``) that shifts out
    on ``sout``. The harness adds only flip-flops at the block's ports, so place and route of any
    block fits the pins of a small FPGA and the achieved Fmax is that of the block's internal
    register-to-register paths (the harness paths are single flip-flop hops).
    """
    from amaranth.hdl import Cat, Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    design = as_design(design)
    dut = design.top

    class Harness(wiring.Component):
        def __init__(self):
            super().__init__({"sin": In(1), "load": In(1), "sout": Out(1)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.dut = dut
            pv = port_values(dut)
            ins = [v for v, i in pv if i]
            outs = [v for v, i in pv if not i]
            wi = max(1, sum(len(v) for v in ins))
            wo = max(1, sum(len(v) for v in outs))
            isr = Signal(wi)
            m.d.sync += isr.eq(Cat(self.sin, isr[:-1]) if wi > 1 else self.sin)
            pos = 0
            for v in ins:
                m.d.comb += v.eq(isr[pos:pos + len(v)])
                pos += len(v)
            osr = Signal(wo)
            with m.If(self.load):
                m.d.sync += osr.eq(Cat(*outs) if outs else 0)
            with m.Else():
                m.d.sync += osr.eq(osr >> 1)
            m.d.comb += self.sout.eq(osr[0])
            return m

    return emit_verilog(Design(top=Harness(), modules=design.modules, pragmas=design.pragmas),
                        "harness")
