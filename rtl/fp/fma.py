# SPDX-License-Identifier: Apache-2.0
"""Fused multiply-add ``RNE_fp32(c + a * b)``: the MAC of a processing element."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring

from rtl.fp.fused_add import FusedAdd
from rtl.fp.multiplier import ExactMultiplier
from rtl.fp.pipe import delay
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["FMA"]


class FMA(Pipeline):
    """``result = RNE_fp32(c + a * b)`` with the exact product and a single rounding.

    ``a`` and ``b`` are codes of ``formats_a[fmt_a]`` / ``formats_b[fmt_b]`` (run-time
    selects), ``c`` is FP32. Special values, zeros and NaN as in ``docs/number-formats.md`` §2
    and §5 (``0 x Inf``, ``Inf - Inf`` and NaN inputs give ``0x7FC00000``).

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``mul_stages`` and ``add_stages``.
    formats_a, formats_b : tuple of FPFormat or str, keyword-only, optional
        Selectable formats of each operand (default ``cfg.dense_formats``). ``make synth``
        builds one MAC per format with ``formats_a=(f,), formats_b=(f,)``.

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``a`` (``unsigned(max width of formats_a)``), ``b`` (likewise for ``formats_b``),
        ``fmt_a`` (``range(len(formats_a))``; zero bits for a single format), ``fmt_b``,
        ``c`` (``unsigned(32)``, FP32 bits).
    o : Out(stream.Signature(out_layout, always_ready=True))
        ``result`` (``unsigned(32)``, FP32 bits); ``o.valid`` is ``i.valid`` delayed by
        ``latency``.

    Latency ``cfg.mul_stages + cfg.add_stages`` cycles; one operation per cycle; no
    back-pressure (every register loads every cycle; ``o.valid`` marks results).
    """

    class Signature(PipelineSignature):
        """Layouts and latency of an :class:`FMA`; ``mul`` and ``add`` are the signatures of
        its multiplier and fused adder."""

        def __init__(self, cfg, *, formats_a=None, formats_b=None):
            self.mul = ExactMultiplier.Signature(cfg, formats_a=formats_a, formats_b=formats_b)
            self.add = FusedAdd.Signature(cfg, term_layout=self.mul.out_layout)
            self.formats_a, self.formats_b = self.mul.formats_a, self.mul.formats_b
            ml = self.mul.in_layout
            in_layout = data.StructLayout({
                "a": ml["a"].shape, "b": ml["b"].shape, "fmt_a": ml["fmt_a"].shape,
                "fmt_b": ml["fmt_b"].shape, "c": 32,
            })
            super().__init__(in_layout, self.add.out_layout,
                             latency=self.mul.latency + self.add.latency)

    def __init__(self, cfg, *, formats_a=None, formats_b=None):
        super().__init__(self.Signature(cfg, formats_a=formats_a, formats_b=formats_b))
        self.cfg = cfg
        self.formats_a, self.formats_b = self.signature.formats_a, self.signature.formats_b

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = ExactMultiplier(self.cfg, formats_a=self.formats_a,
                                                 formats_b=self.formats_b)
        m.submodules.add = add = FusedAdd(self.cfg, term_layout=mul.out_layout)
        i = self.i.payload
        m.d.comb += [
            mul.i.valid.eq(self.i.valid),
            mul.i.payload.a.eq(i.a), mul.i.payload.b.eq(i.b),
            mul.i.payload.fmt_a.eq(i.fmt_a), mul.i.payload.fmt_b.eq(i.fmt_b),
            add.i.valid.eq(mul.o.valid),
            add.i.payload.p.eq(mul.o.payload),
            add.i.payload.c.eq(delay(m, i.c, mul.latency, name="c")),
        ]
        wiring.connect(m, add.o, wiring.flipped(self.o))
        return m
