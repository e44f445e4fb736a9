# SPDX-License-Identifier: Apache-2.0
"""Fused multiply-add ``RNE_fp32(c + a * b)``: the MAC of a processing element."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.fp.fused_add import FusedAdd
from rtl.fp.multiplier import ExactMultiplier
from rtl.fp.pipe import delay, owned

__all__ = ["FMA"]


class FMA(wiring.Component):
    """``result = RNE_fp32(c + a * b)`` with the exact product and a single rounding.

    ``a`` and ``b`` are codes of ``formats_a[fmt_a]`` / ``formats_b[fmt_b]`` (run-time
    selects), ``c`` is FP32. Special values, zeros and NaN as in ``docs/number-formats.md`` §2
    and §5 (``0 x Inf``, ``Inf - Inf`` and NaN inputs give ``0x7FC00000``).

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``mul_stages`` and ``add_stages``.
    formats_a, formats_b : tuple of FPFormat or str, optional
        Selectable formats of each operand (default ``cfg.dense_formats``). ``make synth``
        builds one MAC per format with ``formats_a=(f,), formats_b=(f,)``.

    Members
    -------
    i_valid : In(1)
    i : In(StructLayout)
        ``a`` (``unsigned(max width of formats_a)``), ``b`` (likewise for ``formats_b``),
        ``fmt_a`` (``range(len(formats_a))``; zero bits for a single format), ``fmt_b``,
        ``c`` (``unsigned(32)``, FP32 bits).
    o_valid : Out(1)
        ``i_valid`` delayed by ``latency``.
    o : Out(StructLayout)
        ``result`` (``unsigned(32)``, FP32 bits).

    Latency ``cfg.mul_stages + cfg.add_stages`` cycles; one operation per cycle; no
    back-pressure (every register loads every cycle; ``o_valid`` marks results).
    """

    def __init__(self, cfg, formats_a=None, formats_b=None):
        self._mul = owned(ExactMultiplier(cfg, formats_a, formats_b))
        self._add = owned(FusedAdd(cfg, self._mul.out_layout))
        self.cfg = cfg
        self.formats_a, self.formats_b = self._mul.formats_a, self._mul.formats_b
        ml = self._mul.in_layout
        self.in_layout = data.StructLayout({
            "a": ml["a"].shape, "b": ml["b"].shape, "fmt_a": ml["fmt_a"].shape,
            "fmt_b": ml["fmt_b"].shape, "c": 32,
        })
        self.out_layout = self._add.out_layout
        super().__init__({
            "i_valid": In(1), "i": In(self.in_layout),
            "o_valid": Out(1), "o": Out(self.out_layout),
        })

    @property
    def latency(self):
        """Cycles from ``i`` to ``o`` (``cfg.mul_stages + cfg.add_stages``)."""
        return self._mul.latency + self._add.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = self._mul
        m.submodules.add = add = self._add
        m.d.comb += [
            mul.i_valid.eq(self.i_valid),
            mul.i.a.eq(self.i.a), mul.i.b.eq(self.i.b),
            mul.i.fmt_a.eq(self.i.fmt_a), mul.i.fmt_b.eq(self.i.fmt_b),
            add.i_valid.eq(mul.o_valid),
            add.i.p.eq(mul.o),
            add.i.c.eq(delay(m, self.i.c, mul.latency, name="c")),
            self.o_valid.eq(add.o_valid),
            self.o.eq(add.o),
        ]
        return m
