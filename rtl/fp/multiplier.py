# SPDX-License-Identifier: Apache-2.0
"""Exact floating-point multiplier: any pair of enabled formats, no rounding."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.fp.pipe import owned, stage
from rtl.fp.unpack import Unpack, check_cfg, check_formats, exact_layout, exp_range

__all__ = ["ExactMultiplier"]


class ExactMultiplier(wiring.Component):
    """Exact product ``a * b`` of a code of ``formats_a[fmt_a]`` and one of ``formats_b[fmt_b]``.

    Every format is an FP32 subset, so the product is exact in ``sig_width_a + sig_width_b``
    significand bits (48 for FP32 x FP32). Specials (contract §5): NaN if either input is NaN or
    for ``0 x Inf``; otherwise Inf if either is Inf; otherwise zero if either is zero; the sign
    is always the XOR of the input signs.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``mul_stages`` (the latency).
    formats_a, formats_b : tuple of FPFormat or str
        Formats selectable at run time for each operand (default ``cfg.dense_formats``).

    Members
    -------
    i_valid : In(1)
    i : In(StructLayout)
        ``a`` (``unsigned(max width of formats_a)``), ``b`` (likewise), ``fmt_a``
        (``range(len(formats_a))``, index into ``formats_a``; zero bits for one format),
        ``fmt_b``.
    o_valid : Out(1)
        ``i_valid`` delayed by ``latency`` cycles.
    o : Out(exact_layout)
        ``sign``, ``sig`` (``unsigned(sig_width_a + sig_width_b)``), ``exp`` (signed exponent
        of ``sig``'s LSB), ``is_zero``, ``is_inf``, ``is_nan``; value ``(-1)**sign * sig *
        2**exp``. Valid when ``o_valid``.

    Latency is ``cfg.mul_stages`` cycles, one input per cycle, no back-pressure (the registers
    load every cycle). With 2 or more stages the first register sits after the decode.
    """

    def __init__(self, cfg, formats_a=None, formats_b=None):
        self.cfg = check_cfg(cfg)
        self.formats_a = check_formats(
            "formats_a", cfg.dense_formats if formats_a is None else formats_a, cfg)
        self.formats_b = check_formats(
            "formats_b", cfg.dense_formats if formats_b is None else formats_b, cfg)
        self._ua = owned(Unpack(self.formats_a))
        self._ub = owned(Unpack(self.formats_b))
        lo = (min(exp_range(f)[0] for f in self.formats_a)
              + min(exp_range(f)[0] for f in self.formats_b))
        hi = (max(exp_range(f)[1] for f in self.formats_a)
              + max(exp_range(f)[1] for f in self.formats_b))
        self.sig_width = self._ua.sig_width + self._ub.sig_width
        self.in_layout = data.StructLayout({
            "a": self._ua.code_width, "b": self._ub.code_width,
            "fmt_a": range(len(self.formats_a)), "fmt_b": range(len(self.formats_b)),
        })
        self.out_layout = exact_layout(self.sig_width, range(min(lo, -1), hi + 1))
        super().__init__({
            "i_valid": In(1), "i": In(self.in_layout),
            "o_valid": Out(1), "o": Out(self.out_layout),
        })

    @property
    def latency(self):
        """Cycles from ``i`` to ``o`` (``cfg.mul_stages``)."""
        return self.cfg.mul_stages

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpack_a = ua = self._ua
        m.submodules.unpack_b = ub = self._ub
        m.d.comb += [ua.code.eq(self.i.a), ua.fmt.eq(self.i.fmt_a),
                     ub.code.eq(self.i.b), ub.fmt.eq(self.i.fmt_b)]
        n = self.latency
        valid, x = stage(m, n >= 2, self.i_valid, {"a": ua.o, "b": ub.o}, name="dec")
        a, b = x["a"], x["b"]

        p = Signal(self.out_layout)
        nan = a.is_nan | b.is_nan | (a.is_zero & b.is_inf) | (a.is_inf & b.is_zero)
        inf = ~nan & (a.is_inf | b.is_inf)
        m.d.comb += [
            p.sign.eq(a.sign ^ b.sign),
            p.sig.eq(a.sig * b.sig),
            p.exp.eq(a.exp + b.exp),
            p.is_nan.eq(nan),
            p.is_inf.eq(inf),
            p.is_zero.eq(~nan & ~inf & (a.is_zero | b.is_zero)),
        ]
        rest = n - 1 if n >= 2 else n
        for k in range(rest):
            valid, x = stage(m, True, valid, {"p": p}, name=f"mul{k}")
            p = x["p"]
        m.d.comb += [self.o_valid.eq(valid), self.o.eq(p)]
        return m
