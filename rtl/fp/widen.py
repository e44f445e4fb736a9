# SPDX-License-Identifier: Apache-2.0
"""Decode (widen) a narrow format's code to exact FP32 bits (contract §2, §5 "Decode")."""

from amaranth.hdl import Module, Signal, signed, Cat, Mux
from amaranth.lib import data

from rtl.config import E8M0, check_config
from rtl.fp.convert import resolve_formats, default_convert_formats
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["WidenToFP32", "default_widen_formats"]

_SIG = 24


def default_widen_formats(cfg):
    """Formats a config decodes: :func:`~rtl.fp.convert.default_convert_formats`, plus
    ``e8m0`` when MX is enabled."""
    fmts = default_convert_formats(cfg)
    return fmts + ((E8M0,) if cfg.mx_formats else ())


class WidenToFP32(Pipeline):
    """Widen the code of a format chosen per element at run time to its exact FP32 bits.

    Every format is an FP32 subset, so this is exact: subnormal codes are normalised (or stay
    FP32 subnormals when below 2**-126), ±0 and ±Inf keep their sign, NaN codes give
    ``S.11111111.10...0`` (sign kept, payload dropped). ``E8M0`` (MX scale) gives
    ``2**(c - 127)`` (``c = 0`` is the FP32 subnormal ``2**-127``) and ``0xFF`` gives
    ``0x7FC00000``.

    Pipeline: 2 register stages (unpack; normalise/pack), one element per cycle, no stalls;
    ``o.valid`` follows ``i.valid`` by :attr:`latency` cycles.

    Parameters
    ----------
    cfg : CoreConfig
        Resolves format names (``"cfp8"``).
    formats : sequence of str, FPFormat or E8M0, keyword-only, optional
        Selectable source formats (``"e8m0"`` allowed); ``i.fmt`` indexes this tuple.
        Default: :func:`default_widen_formats`. An ``i.fmt`` beyond the tuple selects the last.

    Members
    -------
    i : In(stream.Signature(StructLayout({"code": widest width, "fmt": range(len(formats))}),
            always_ready=True))
        The code in its low ``width`` bits (higher bits ignored) and the format index.
    o : Out(stream.Signature(StructLayout({"x": 32}), always_ready=True))
        FP32 bits.
    """

    class Signature(PipelineSignature):
        """Layouts and latency (2) of a :class:`WidenToFP32`; attributes ``formats`` and
        ``code_width``."""

        def __init__(self, cfg, *, formats=None):
            if formats is None:
                formats = default_widen_formats(check_config(cfg, "WidenToFP32"))
            self.formats = resolve_formats(cfg, formats, "WidenToFP32", allow_e8m0=True)
            self.code_width = max(f.width for f in self.formats)
            super().__init__(data.StructLayout({"code": self.code_width,
                                                "fmt": range(len(self.formats))}),
                             data.StructLayout({"x": 32}), latency=2)

    def __init__(self, cfg, *, formats=None):
        super().__init__(self.Signature(cfg, formats=formats))
        self.formats = self.signature.formats
        self.cfg = cfg
        self.code_width = self.signature.code_width

    def elaborate(self, platform):
        m = Module()
        c = self.i.payload.code
        # ---- stage 1: per-format unpack into sign, class, 24-bit significand, exponent -------
        # value = sig / 2**23 * 2**pexp (sig's MSB at bit 23 for a normal code).
        s1 = Signal(data.StructLayout({"valid": 1, "sgn": 1, "nan": 1, "inf": 1, "zero": 1,
                                       "sig": _SIG, "pexp": signed(10)}))
        sgn, nan, inf, zero = Signal(), Signal(), Signal(), Signal()
        sig, pexp = Signal(_SIG), Signal(signed(10))
        last = len(self.formats) - 1
        with m.Switch(self.i.payload.fmt):
            for k, f in enumerate(self.formats):
                with (m.Default() if k == last else m.Case(k)):
                    if f is E8M0:
                        m.d.comb += [nan.eq(c[:8] == f.nan_code), sig.eq(1 << (_SIG - 1)),
                                     pexp.eq(c[:8] - f.bias)]
                        continue
                    mb, eb = f.man_bits, f.exp_bits
                    e, mm = c[mb:mb + eb], c[:mb]
                    top = (1 << eb) - 1
                    m.d.comb += [sgn.eq(c[f.width - 1]), zero.eq((e == 0) & (mm == 0)),
                                 sig.eq(Cat(mm, e != 0) << (_SIG - 1 - mb)),
                                 pexp.eq(Mux(e == 0, 1, e) - f.bias)]
                    if f.specials == "ieee":
                        m.d.comb += [inf.eq((e == top) & (mm == 0)),
                                     nan.eq((e == top) & (mm != 0))]
                    elif f.specials == "fn":
                        m.d.comb += nan.eq((e == top) & (mm == (1 << mb) - 1))
        m.d.sync += s1.valid.eq(self.i.valid)
        m.d.sync += [s1.sgn.eq(sgn), s1.nan.eq(nan), s1.inf.eq(inf), s1.zero.eq(zero),
                     s1.sig.eq(sig), s1.pexp.eq(pexp)]

        # ---- stage 2: normalise (leading-zero count), denormalise below 2**-126, pack ------
        lz = Signal(range(_SIG))
        for k in range(_SIG):            # the highest set bit wins (last assignment)
            with m.If(s1.sig[k]):
                m.d.comb += lz.eq(_SIG - 1 - k)
        norm = Signal(_SIG)
        m.d.comb += norm.eq(s1.sig << lz)
        e_un = Signal(signed(11))        # unbiased exponent of the leading one
        m.d.comb += e_un.eq(s1.pexp - lz)
        sub_sh = Signal(range(_SIG + 1))  # right shift into the FP32 subnormal range
        m.d.comb += sub_sh.eq(Mux(e_un < -126 - _SIG, _SIG, -126 - e_un))
        bits = Signal(32)
        with m.If(e_un >= -126):
            m.d.comb += bits.eq(Cat(norm[:23], (e_un + 127)[:8]))
        with m.Else():                   # FP32 subnormal; exact for FP32-subset formats
            m.d.comb += bits.eq((norm >> sub_sh)[:23])
        with m.If(s1.zero):
            m.d.comb += bits.eq(0)
        with m.If(s1.inf):
            m.d.comb += bits.eq(0x7F800000)
        with m.If(s1.nan):
            m.d.comb += bits.eq(0x7FC00000)
        m.d.sync += self.o.valid.eq(s1.valid)
        m.d.sync += self.o.payload.x.eq(Cat(bits[:31], s1.sgn))
        return m
