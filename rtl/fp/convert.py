# SPDX-License-Identifier: Apache-2.0
"""FP32 -> narrower format conversion with RNE or stochastic rounding (contract §2-§3)."""

from amaranth.hdl import Module, Signal, signed, Cat, Mux, Const
from amaranth.lib import data

from rtl.config import FPFormat, E8M0, check_config
from rtl.fp.prng import XorWow
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["ConvertFromFP32", "resolve_formats", "default_convert_formats"]

#: Fraction bits kept below the quantum: 32 for stochastic rounding + 1 so RNE sees the
#: complete fraction whenever it can be >= 1/2 (see ``ConvertFromFP32``).
_FRAC = 33
_SIG = 24                          # FP32 significand with the implicit bit
_SHIFT_MAX = _SIG + _FRAC          # any larger shift leaves I = 0 and F32 = 0


def resolve_formats(cfg, formats, owner, *, allow_e8m0=False):
    """``formats`` (names or :class:`FPFormat`) as a tuple of format objects, validated."""
    check_config(cfg, owner)
    if isinstance(formats, (str, FPFormat)) or not hasattr(formats, "__iter__"):
        raise TypeError(f"{owner} formats must be a sequence of format names or FPFormat, "
                        f"not {formats!r}")
    out = []
    for f in formats:
        if allow_e8m0 and (f is E8M0 or f == "e8m0"):
            f = E8M0
        elif isinstance(f, str):
            f = cfg.fmt(f)
        elif not isinstance(f, FPFormat):
            raise TypeError(f"{owner} formats entries must be format names or FPFormat, "
                            f"not {f!r}")
        if f is not E8M0 and not f.is_fp32_subset:
            raise ValueError(f"{owner} formats entries must be FP32 subsets, not {f!r}")
        out.append(f)
    if not out:
        raise ValueError(f"{owner} formats must not be empty, not {formats!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{owner} formats must not repeat a format, not {formats!r}")
    return tuple(out)


def default_convert_formats(cfg):
    """The conversion targets a config needs: its dense formats except FP32, then the MX
    element formats not already among them."""
    fmts = [f for f in cfg.dense_formats if f.name != "fp32"]
    for f in cfg.mx_element_formats.values():
        if f not in fmts:
            fmts.append(f)
    return tuple(fmts)


class ConvertFromFP32(Pipeline):
    """Convert FP32 bits to the code of a format chosen per element at run time.

    Implements ``docs/number-formats.md`` §2-§3 bit for bit: RNE or stochastic rounding (SR),
    subnormals kept, sign of zero kept, overflow to ±Inf (``overflow="inf"``) or ±max finite
    (``"saturate"``), NaN to the destination's canonical NaN with the sign kept (``+0`` for a
    format without NaN), Inf to ±Inf or ±max.

    Pipeline: 3 register stages (unpack/align amount, shift, round/pack); one element per
    cycle, no stalls; ``o.valid`` follows ``i.valid`` by :attr:`latency` cycles. The lane's
    :class:`~rtl.fp.prng.XorWow` advances exactly once per valid element with ``sr = 1``
    (whatever its value, NaN/Inf/zero included), in element order, so bubbles do not change
    results; RNE elements do not advance it. Reset restores the seed state.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``sr_seed`` and resolves format names (``"cfp8"``).
    formats : sequence of str or FPFormat, keyword-only, optional
        Selectable destination formats; ``i.fmt`` indexes this tuple. Default:
        :func:`default_convert_formats`. An ``i.fmt`` beyond the tuple selects the last format.
    lane : int
        PRNG lane (seed decorrelation, contract §4).

    Members
    -------
    i : In(stream.Signature(StructLayout({"x": 32, "fmt": range(len(formats)), "sr": 1}),
            always_ready=True))
        ``x``: FP32 bits; ``fmt``: destination index; ``sr``: 0 = RNE, 1 = stochastic.
    o : Out(stream.Signature(StructLayout({"code": widest format width}), always_ready=True))
        The code, zero-extended above the selected format's width.
    """

    class Signature(PipelineSignature):
        """Layouts and latency (3) of a :class:`ConvertFromFP32`; attributes ``formats`` and
        ``code_width``."""

        def __init__(self, cfg, *, formats=None):
            if formats is None:
                formats = default_convert_formats(check_config(cfg, "ConvertFromFP32"))
            self.formats = resolve_formats(cfg, formats, "ConvertFromFP32")
            self.code_width = max(f.width for f in self.formats)
            super().__init__(
                data.StructLayout({"x": 32, "fmt": range(len(self.formats)), "sr": 1}),
                data.StructLayout({"code": self.code_width}), latency=3)

    def __init__(self, cfg, *, formats=None, lane=0):
        if isinstance(lane, bool) or not isinstance(lane, int) or lane < 0:
            raise ValueError(f"ConvertFromFP32 lane must be an integer >= 0, not {lane!r}")
        super().__init__(self.Signature(cfg, formats=formats))
        self.formats = self.signature.formats
        self.cfg, self.lane = cfg, lane
        self.code_width = self.signature.code_width
        #: FP32 subnormal inputs need a leading-zero count only if some format has normals
        #: below 2**-126.
        self._need_lzc = any(f.emin < -126 for f in self.formats)

    def _cases(self, m, sel):
        """``m.Switch(sel)`` with one case per format; the last is the default."""
        last = len(self.formats) - 1
        with m.Switch(sel):
            for k, f in enumerate(self.formats):
                with (m.Default() if k == last else m.Case(k)):
                    yield f

    def elaborate(self, platform):
        m = Module()
        m.submodules.prng = prng = XorWow(self.cfg.sr_seed, self.lane)
        nf = len(self.formats)

        # ---- stage 1: unpack, classify, quantum exponent and alignment shift ---------------
        x = self.i.payload.x
        sgn, ef, man = x[31], x[23:31], x[:23]
        ex = Signal(signed(12))         # floor(log2|x|) for finite nonzero x (clamped below)
        lsb = Signal(signed(12))        # log2 of the FP32 significand's LSB
        m.d.comb += lsb.eq(Mux(ef == 0, 1, ef) - 150)
        if self._need_lzc:
            bitlen = Signal(range(24))
            for k in range(23):
                with m.If(man[k]):
                    m.d.comb += bitlen.eq(k + 1)
            m.d.comb += ex.eq(Mux(ef == 0, bitlen - 150, ef - 127))
        else:
            # Every format's emin >= -126: an FP32 subnormal is below every normal range, so
            # any exponent < -126 gives the same quantum (the format's emin).
            m.d.comb += ex.eq(Mux(ef == 0, -127, ef - 127))
        shift = Signal(range(_SHIFT_MAX + 1))
        bexp = Signal(range(1 << 10))   # biased exponent field - 1 of the quantum's binade
        for f in self._cases(m, self.i.payload.fmt):
            eq = Mux(ex > f.emin, ex, f.emin)          # max(E, emin)
            sh = eq - f.man_bits - lsb                 # >= 0 for every FP32 subset format
            m.d.comb += [shift.eq(Mux(sh > _SHIFT_MAX, _SHIFT_MAX, sh)),
                         bexp.eq(eq + f.bias - 1)]

        s1 = Signal(data.StructLayout({
            "valid": 1, "sr": 1, "fmt": range(nf), "sgn": 1, "nan": 1, "inf": 1,
            "sig": _SIG, "shift": range(_SHIFT_MAX + 1), "bexp": range(1 << 10)}))
        m.d.sync += s1.valid.eq(self.i.valid)
        m.d.sync += [s1.sr.eq(self.i.payload.sr), s1.fmt.eq(self.i.payload.fmt), s1.sgn.eq(sgn),
                     s1.nan.eq((ef == 0xFF) & (man != 0)), s1.inf.eq((ef == 0xFF) & (man == 0)),
                     s1.sig.eq(Cat(man, ef != 0)), s1.shift.eq(shift), s1.bexp.eq(bexp)]

        # ---- stage 2: align: integer part I and the top _FRAC bits of the fraction F ---------
        # shift >= 23 - M for the selected format (E >= emin, LSB exponent <= E - 23), so
        # I < 2**(M + 1): the integer part needs the widest mantissa + 1 bits, not all 24.
        int_bits = max(f.man_bits for f in self.formats) + 1
        aligned = (Cat(Const(0, _FRAC), s1.sig) >> s1.shift)[:int_bits + _FRAC]
        s2 = Signal(data.StructLayout({
            "valid": 1, "sr": 1, "fmt": range(nf), "sgn": 1, "nan": 1, "inf": 1,
            "int": int_bits, "frac": _FRAC, "bexp": range(1 << 10)}))
        m.d.sync += s2.valid.eq(s1.valid)
        m.d.sync += [s2.sr.eq(s1.sr), s2.fmt.eq(s1.fmt), s2.sgn.eq(s1.sgn), s2.nan.eq(s1.nan),
                     s2.inf.eq(s1.inf), s2.int.eq(aligned[_FRAC:]), s2.frac.eq(aligned[:_FRAC]),
                     s2.bexp.eq(s1.bexp)]

        # ---- stage 3: round (RNE or SR), pack, overflow and specials -----------------------
        # When the shift discards bits beyond frac, F < 2**-(_FRAC - _SIG) < 1/2: RNE rounds
        # down whatever they are, and floor(F * 2**32) ignores them.
        frac, i_int = s2.frac, s2.int
        rne_up = frac[-1] & ((frac[:-1] != 0) | i_int[0])
        f32 = frac[1:]                                          # floor(F * 2**32)
        sr_up = (f32 + prng.value)[32]                          # F32 + R >= 2**32
        m.d.comb += prng.next.eq(s2.valid & s2.sr)
        rounded = Signal(int_bits + 1)
        m.d.comb += rounded.eq(i_int + Mux(s2.sr, sr_up, rne_up))

        code = Signal(self.code_width)
        for f in self._cases(m, s2.fmt):
            w = f.width
            mag = Signal(w + 24, name=f"mag_{f.name}")  # >= any (bexp << M) + rounded
            m.d.comb += mag.eq((s2.bexp << f.man_bits) + rounded)
            over = mag > f.max_finite_code
            big = f.inf_code if f.overflow == "inf" else f.max_finite_code
            res = Signal(w - 1, name=f"res_{f.name}")
            sgn = Signal(name=f"sgn_{f.name}")
            m.d.comb += [res.eq(Mux(over, big, mag)), sgn.eq(s2.sgn)]
            with m.If(s2.inf):
                m.d.comb += res.eq(f.inf_code if f.specials == "ieee" else f.max_finite_code)
            with m.If(s2.nan):
                if f.nan_code is None:
                    m.d.comb += [res.eq(0), sgn.eq(0)]          # no NaN: +0 (contract §2)
                else:
                    m.d.comb += res.eq(f.nan_code)
            m.d.comb += code.eq(Cat(res, sgn))

        m.d.sync += self.o.valid.eq(s2.valid)
        m.d.sync += self.o.payload.code.eq(code)
        return m
