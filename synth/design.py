# SPDX-License-Identifier: Apache-2.0
"""What a block factory returns, how it becomes Verilog, and the 3-pin place-and-route harness."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Design", "as_design", "emit_verilog", "emit_harness_verilog", "port_bits"]


@dataclass
class Design:
    """A synthesizable block: an Amaranth top component plus separately emitted modules.

    Parameters
    ----------
    top : amaranth.lib.wiring.Component
        The block itself.
    modules : dict of str to Component
        Modules that ``top`` instantiates by name with ``amaranth.hdl.Instance`` (for example one
        processing element ``"pe"`` instantiated N x N times). Each is emitted once as its own
        Verilog module, so yosys synthesizes it once and ``stat`` multiplies it by its instance
        count (hierarchy is kept).
    """

    top: object
    modules: dict = field(default_factory=dict)


def as_design(obj):
    """``obj`` if it is a :class:`Design`, else a :class:`Design` around the component ``obj``."""
    if isinstance(obj, Design):
        return obj
    if isinstance(obj, tuple) and len(obj) == 2:
        return Design(top=obj[0], modules=dict(obj[1]))
    return Design(top=obj)


def _convert(component, name):
    from amaranth.back import verilog
    return verilog.convert(component, name=name, emit_src=False)


def emit_verilog(design, top_name):
    """Verilog text of ``design`` with its top module called ``top_name``."""
    parts = [_convert(design.top, top_name)]
    for name, comp in sorted(design.modules.items()):
        parts.append(_convert(comp, name))
    return "\n".join(parts)


def _ports(component):
    """``(inputs, outputs)``: lists of Amaranth values of the component's signature members."""
    from amaranth.hdl import Value
    from amaranth.lib.wiring import In
    ins, outs = [], []
    for _path, member, value in component.signature.flatten(component):
        (ins if member.flow == In else outs).append(Value.cast(value))
    return ins, outs


def port_bits(component):
    """Total input and output port bits of a component (clock and reset not counted)."""
    ins, outs = _ports(component)
    return sum(len(v) for v in ins), sum(len(v) for v in outs)


def emit_harness_verilog(design):
    """Verilog of ``design`` wrapped in a serial harness with pins ``clk rst sin load sout``.

    Every input port bit of the block is driven by a serial-in shift register fed from ``sin``;
    every output port bit is captured by a parallel-load shift register (``load``) that shifts out
    on ``sout``. The harness adds only flip-flops at the block's ports, so place and route of any
    block fits the pins of a small FPGA and the achieved Fmax is that of the block's internal
    register-to-register paths (the harness paths are single flip-flop hops).
    """
    from amaranth.hdl import Cat, Elaboratable, Module, Signal

    dut = design.top

    class Harness(Elaboratable):
        def __init__(self):
            self.sin = Signal()
            self.load = Signal()
            self.sout = Signal()

        def elaborate(self, platform):
            m = Module()
            m.submodules.dut = dut
            ins, outs = _ports(dut)
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

    from amaranth.back import verilog
    h = Harness()
    parts = [verilog.convert(h, name="harness", ports=[h.sin, h.load, h.sout], emit_src=False)]
    for name, comp in sorted(design.modules.items()):
        parts.append(_convert(comp, name))
    return "\n".join(parts)
