# SPDX-License-Identifier: Apache-2.0
"""Exact floating-point multiplier: any pair of enabled formats, no rounding."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data

from rtl.config import check_config
from rtl.fp.pipe import stage
from rtl.fp.unpack import Unpack, check_formats, exact_layout, exp_range
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["ExactMultiplier"]


class ExactMultiplier(Pipeline):
    """Exact product ``a * b`` of a code of ``formats_a[fmt_a]`` and one of ``formats_b[fmt_b]``.

    Every format is an FP32 subset, so the product is exact in ``sig_width_a + sig_width_b``
    significand bits (48 for FP32 x FP32). Specials (contract §5): NaN if either input is NaN or
    for ``0 x Inf``; otherwise Inf if either is Inf; otherwise zero if either is zero; the sign
    is always the XOR of the input signs.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``mul_stages`` (the latency).
    formats_a, formats_b : tuple of FPFormat or str, keyword-only
        Formats selectable at run time for each operand (default ``cfg.dense_formats``).

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``a`` (``unsigned(max width of formats_a)``), ``b`` (likewise), ``fmt_a``
        (``range(len(formats_a))``, index into ``formats_a``; zero bits for one format),
        ``fmt_b``.
    o : Out(stream.Signature(out_layout, always_ready=True))
        :func:`~rtl.fp.unpack.exact_layout`: ``sign``, ``sig`` (``unsigned(sig_width_a +
        sig_width_b)``), ``exp`` (signed exponent of ``sig``'s LSB), ``is_zero``, ``is_inf``,
        ``is_nan``; value ``(-1)**sign * sig * 2**exp``.

    Latency is ``cfg.mul_stages`` cycles, one input per cycle, no back-pressure (the registers
    load every cycle). With 2 or more stages the first register sits after the decode.
    """

    class Signature(PipelineSignature):
        """Layouts and latency of an :class:`ExactMultiplier` (attributes ``formats_a``,
        ``formats_b``, ``sig_width``, ``in_layout``, ``out_layout``, ``latency``)."""

        def __init__(self, cfg, *, formats_a=None, formats_b=None):
            self.cfg = check_config(cfg, "ExactMultiplier")
            self.formats_a = check_formats(
                "formats_a", cfg.dense_formats if formats_a is None else formats_a, cfg)
            self.formats_b = check_formats(
                "formats_b", cfg.dense_formats if formats_b is None else formats_b, cfg)
            ua, ub = Unpack.Signature(self.formats_a), Unpack.Signature(self.formats_b)
            lo = (min(exp_range(f)[0] for f in self.formats_a)
                  + min(exp_range(f)[0] for f in self.formats_b))
            hi = (max(exp_range(f)[1] for f in self.formats_a)
                  + max(exp_range(f)[1] for f in self.formats_b))
            self.sig_width = ua.sig_width + ub.sig_width
            in_layout = data.StructLayout({
                "a": ua.code_width, "b": ub.code_width,
                "fmt_a": range(len(self.formats_a)), "fmt_b": range(len(self.formats_b)),
            })
            out_layout = exact_layout(self.sig_width, range(min(lo, -1), hi + 1))
            super().__init__(in_layout, out_layout, latency=cfg.mul_stages)

    def __init__(self, cfg, *, formats_a=None, formats_b=None):
        super().__init__(self.Signature(cfg, formats_a=formats_a, formats_b=formats_b))
        self.cfg = cfg
        self.formats_a, self.formats_b = self.signature.formats_a, self.signature.formats_b
        self.sig_width = self.signature.sig_width

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpack_a = ua = Unpack(self.formats_a)
        m.submodules.unpack_b = ub = Unpack(self.formats_b)
        i = self.i.payload
        m.d.comb += [ua.code.eq(i.a), ua.fmt.eq(i.fmt_a),
                     ub.code.eq(i.b), ub.fmt.eq(i.fmt_b)]
        n = self.latency
        valid, x = stage(m, n >= 2, self.i.valid, {"a": ua.o, "b": ub.o}, name="dec")
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
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(p)]
        return m
