# SPDX-License-Identifier: Apache-2.0
"""One lane of one Vector-engine ALU stage: ``alu(op, x, y, c)`` on FP32 bit patterns."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data

from rtl.config import check_config
from rtl.fp.fma import FMA
from rtl.fp.pipe import delay
from rtl.pipeline import Pipeline, PipelineSignature
from rtl.vector.isa import (ALU_ADD, ALU_AND, ALU_EQ, ALU_GE, ALU_GT, ALU_LE, ALU_LT, ALU_MAX,
                            ALU_MIN, ALU_MUL, ALU_NE, ALU_OR, ALU_SEL, ALU_SUB, ALU_XOR)

__all__ = ["LaneALU", "ALU_FMA"]

#: Internal op (5-bit ``op``, not an instruction's ALU code): ``x * y + c`` with one rounding
#: (BN_STATS' square-accumulate, BN_AGGR's Newton steps).
ALU_FMA = 16

_QNAN = 0x7FC00000
_ONE, _MINUS_ONE, _MINUS_ZERO = 0x3F800000, 0xBF800000, 0x80000000


def _key(v):
    """Unsigned key whose order is the FP32 order with -0 < +0 (NaN excluded)."""
    return Mux(v[31], ~v, Cat(v[:31], 1))


class LaneALU(Pipeline):
    """``result = alu(op, x, y, c)`` (``golden/vector.py``: :func:`golden.vector.alu`).

    add / subtract / multiply run on one :class:`~rtl.fp.fma.FMA` (exact product, one RNE
    rounding): ``x + y*1``, ``x + y*(-1)``, ``-0 + x*y``. max / min, the six comparisons
    (``1.0``/``0.0``), bitwise and/or/xor, select (``y`` if ``x`` is nonzero else ``c``) and
    bypass (``x``) are combinational and delayed to the FMA's latency. The internal op
    :data:`ALU_FMA` (16) is ``x * y + c`` with one rounding.

    Pipeline: ``cfg.mul_stages + cfg.add_stages`` cycles, one operation per cycle, no stalls;
    ``o.valid`` is ``i.valid`` delayed.

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    i : In(stream.Signature(StructLayout({"op": 5, "x": 32, "y": 32, "c": 32}),
            always_ready=True))
    o : Out(stream.Signature(StructLayout({"r": 32}), always_ready=True))
    """

    class Signature(PipelineSignature):
        """Layouts and latency (the FMA's) of a :class:`LaneALU`."""

        def __init__(self, cfg):
            fma = FMA.Signature(check_config(cfg, "LaneALU"), formats_a=("fp32",),
                                formats_b=("fp32",))
            super().__init__(data.StructLayout({"op": 5, "x": 32, "y": 32, "c": 32}),
                             data.StructLayout({"r": 32}), latency=fma.latency)

    def __init__(self, cfg):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        L = self.signature.latency
        m.submodules.fma = fma = FMA(self.cfg, formats_a=("fp32",), formats_b=("fp32",))
        i = self.i.payload
        op, x, y, c = i.op, i.x, i.y, i.c
        fa = fma.i.payload
        m.d.comb += [fma.i.valid.eq(self.i.valid), fa.a.eq(y), fa.b.eq(_ONE), fa.c.eq(x)]
        with m.Switch(op):
            with m.Case(ALU_SUB):
                m.d.comb += fa.b.eq(_MINUS_ONE)
            with m.Case(ALU_MUL):
                m.d.comb += [fa.a.eq(x), fa.b.eq(y), fa.c.eq(_MINUS_ZERO)]
            with m.Case(ALU_FMA):
                m.d.comb += [fa.a.eq(x), fa.b.eq(y), fa.c.eq(c)]

        def nan(v):
            return (v[23:31] == 0xFF) & (v[:23] != 0)
        any_nan = nan(x) | nan(y)
        eqf = (x == y) | ((x[:31] == 0) & (y[:31] == 0))
        lt_key = _key(x) < _key(y)
        lt = ~any_nan & ~eqf & lt_key
        gt = ~any_nan & ~eqf & ~lt_key
        eq = ~any_nan & eqf
        one = Signal(32)
        cmp = Signal()
        other = Signal(32)
        m.d.comb += one.eq(Mux(cmp, _ONE, 0))
        with m.Switch(op):
            with m.Case(ALU_MAX):
                m.d.comb += other.eq(Mux(any_nan, _QNAN, Mux(lt_key, y, x)))
            with m.Case(ALU_MIN):
                m.d.comb += other.eq(Mux(any_nan, _QNAN, Mux(lt_key, x, y)))
            with m.Case(ALU_EQ):
                m.d.comb += [cmp.eq(eq), other.eq(one)]
            with m.Case(ALU_NE):
                m.d.comb += [cmp.eq(~eq), other.eq(one)]
            with m.Case(ALU_LT):
                m.d.comb += [cmp.eq(lt), other.eq(one)]
            with m.Case(ALU_LE):
                m.d.comb += [cmp.eq(lt | eq), other.eq(one)]
            with m.Case(ALU_GT):
                m.d.comb += [cmp.eq(gt), other.eq(one)]
            with m.Case(ALU_GE):
                m.d.comb += [cmp.eq(gt | eq), other.eq(one)]
            with m.Case(ALU_AND):
                m.d.comb += other.eq(x & y)
            with m.Case(ALU_OR):
                m.d.comb += other.eq(x | y)
            with m.Case(ALU_XOR):
                m.d.comb += other.eq(x ^ y)
            with m.Case(ALU_SEL):
                m.d.comb += other.eq(Mux(x[:31] != 0, y, c))
            with m.Default():                       # bypass (and the FMA ops, unused)
                m.d.comb += other.eq(x)
        use_fma = (op == ALU_ADD) | (op == ALU_SUB) | (op == ALU_MUL) | (op == ALU_FMA)
        use_fma_d = delay(m, use_fma, L, name="use_fma")
        other_d = delay(m, other, L, name="other")
        m.d.comb += [self.o.valid.eq(fma.o.valid),
                     self.o.payload.r.eq(Mux(use_fma_d, fma.o.payload.result, other_d))]
        return m
