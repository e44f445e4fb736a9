# SPDX-License-Identifier: Apache-2.0
"""FP32 addend + exact term, rounded once to FP32 (RNE): the adder half of the fused MAC."""

from amaranth.hdl import Module, Shape, Signal, Mux, Cat, Const, signed
from amaranth.lib import data

from rtl.config import FP32, check_config
from rtl.fp.pipe import stage
from rtl.fp.unpack import Unpack
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["FusedAdd", "lzc", "shl_top"]

FP32_QNAN = 0x7FC00000
FP32_INF = 0x7F800000

#: Cut points of the pipeline registers for ``add_stages`` = 0..6 (5 also cuts between the
#: leading-zero count and the normalizing shift, 6 also between the exponent difference and
#: the alignment shift).
_CUTS = {0: (), 1: ("out",), 2: ("add", "out"), 3: ("align", "add", "out"),
         4: ("align", "add", "norm", "out"), 5: ("align", "add", "lzc", "norm", "out"),
         6: ("diff", "align", "add", "lzc", "norm", "out")}


def lzc(m, value, *, name="lzc", nonzero=False):
    """Leading-zero count of ``value`` (a tree of muxes); ``len(value)`` when it is zero.

    The tree has no adders: ``value`` is padded at its LSB end to a power of two, so each
    level's count is its upper or lower half's with one bit on top, and a zero ``value`` is
    the tree's all-zero flag selecting ``len(value)``. With ``nonzero=True`` that last mux is
    left out: the count is only defined for a nonzero ``value`` (any number when it is zero)."""
    n = len(value)
    p2 = 1 << max(1, (n - 1).bit_length())
    v = Cat(Const(0, p2 - n), value)

    def rec(v):
        if len(v) == 2:
            return ~v[1], ~v[1] & ~v[0]          # (count, all zero)
        h = len(v) // 2
        hi_cnt, hi_zero = rec(v[h:])
        lo_cnt, lo_zero = rec(v[:h])
        return Cat(Mux(hi_zero, lo_cnt, hi_cnt), hi_zero), hi_zero & lo_zero
    cnt, zero = rec(v)
    out = Signal(range(len(value) + 1), name=name)
    m.d.comb += out.eq(cnt if nonzero else Mux(zero, n, cnt))
    return out


def shl_top(m, value, amount, keep, *, name="shl"):
    """``(value << amount)`` truncated to ``len(value)`` bits, of which only the top ``keep``
    bits are formed; the rest are ORed into a sticky bit. Returns ``(top, sticky)``.

    A left shifter from the largest step down: after the step of ``2**k`` the remaining shift is
    below ``2**k``, so only the top ``keep + 2**k - 1`` bits can still reach the kept ones and
    the others are ORed into the sticky bit there. About a third of the multiplexers of a full
    ``len(value)``-bit shifter when ``keep`` is small."""
    n = len(value)
    if not 1 <= keep <= n:
        raise ValueError(f"keep must be in [1, {n}], not {keep!r}")
    cur = value
    sticky = Const(0, 1)
    for k in reversed(range(len(amount))):
        step = 1 << k
        lvl = Signal(len(cur), name=f"{name}_s{k}")
        m.d.comb += lvl.eq(Mux(amount[k], cur << step, cur))
        w = min(len(cur), keep + step - 1)
        drop = len(cur) - w
        if drop:
            sticky = sticky | lvl[:drop].any()
        cur = lvl[drop:]
    top, st = Signal(keep, name=f"{name}_top"), Signal(name=f"{name}_sticky")
    m.d.comb += [top.eq(cur), st.eq(sticky)]
    return top, st


class FusedAdd(Pipeline):
    """``result = RNE_fp32(c + p)`` for an FP32 addend ``c`` and an exact term ``p``.

    One rounding, IEEE 754 binary32: subnormals in and out, overflow to ±Inf, canonical NaN
    ``0x7FC00000`` (NaN input, ``Inf - Inf``), an exact zero sum of opposite signs is ``+0``,
    ``(-0) + (-0) = -0`` (contract §2, §5).

    The datapath is a single-path FMA adder: the term's significand sits at a fixed place in a
    window of ``G + W + 27`` bits (``W = len(p.sig)``, ``G = 26`` guard positions below it) and
    ``c`` is shifted right into it (its bits shifted out are ORed into the window's LSB, a
    round-to-odd that is exact for the later rounding because the term lies on an even grid and
    the rounding point is then >= 2 positions up); ``c`` more than 2 bits above the term's top is
    clamped there. Then sign-magnitude add, leading-zero count, a normalizing left shift
    (shortened for subnormal results), and RNE with the hidden-bit carry into the exponent.
    Correct for any ``W`` (48 for FP32 x FP32) and any subnormal, unnormalized term.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``add_stages`` (the latency, 0..6 pipeline registers).
    term_layout : StructLayout, keyword-only
        :func:`rtl.fp.unpack.exact_layout` of the term (e.g. ``ExactMultiplier.out_layout``).

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``c`` (``unsigned(32)``, FP32 bits) and ``p`` (``term_layout``).
    o : Out(stream.Signature(out_layout, always_ready=True))
        ``result`` (``unsigned(32)``, FP32 bits); ``o.valid`` is ``i.valid`` delayed by
        ``latency``.

    Latency ``cfg.add_stages``; one input per cycle, no back-pressure. Registers sit after the
    add (2 stages), after the alignment (3), after the normalizing shift (4), between the
    leading-zero count and that shift (5), between the exponent difference and the alignment
    shift (6), and always at the output.
    """

    G = 26

    class Signature(PipelineSignature):
        """Layouts and latency (``cfg.add_stages``) of a :class:`FusedAdd`."""

        def __init__(self, cfg, *, term_layout):
            check_config(cfg, "FusedAdd")
            if not isinstance(term_layout, data.StructLayout) or \
                    {n for n, _ in term_layout} != {"sign", "sig", "exp", "is_zero", "is_inf",
                                                     "is_nan"}:
                raise TypeError(f"term_layout must be an rtl.fp.unpack.exact_layout, "
                                f"not {term_layout!r}")
            width = term_layout["sig"].width
            if not 1 <= width <= 80:
                raise ValueError(f"term_layout 'sig' width must be in [1, 80], not {width}")
            self.term_layout = term_layout
            super().__init__(data.StructLayout({"c": 32, "p": term_layout}),
                             data.StructLayout({"result": 32}), latency=cfg.add_stages)

    def __init__(self, cfg, *, term_layout):
        super().__init__(self.Signature(cfg, term_layout=term_layout))
        self.cfg = cfg
        self.term_layout = term_layout
        self.W = term_layout["sig"].width
        self.P_MAX = self.G + self.W + 2     # highest LSB position of c in the window
        self.T = self.P_MAX + 25              # window width (c's 24 bits + carry)

    def elaborate(self, platform):
        m = Module()
        cuts = _CUTS[self.latency]
        G, W, P_MAX, T = self.G, self.W, self.P_MAX, self.T
        m.submodules.unpack_c = uc = Unpack((FP32,))
        m.d.comb += uc.code.eq(self.i.payload.c)
        c, p = uc.o, self.i.payload.p
        # internal exponent width: every value of d, base and eb = base - lz (lz < 128)
        # below, from the extremes of the two exponent shapes
        def extremes(shape):
            if shape.signed:
                return -(1 << (shape.width - 1)), (1 << (shape.width - 1)) - 1
            return 0, (1 << shape.width) - 1
        (plo, phi), (clo, chi) = extremes(p.exp.shape()), extremes(c.exp.shape())
        base_lo = min(clo + T + 126 - P_MAX, plo + T + 126 - G)
        base_hi = max(chi + T + 126 - P_MAX, phi + T + 126 - G)
        vals = (W + 2 + plo - chi, W + 2 + phi - clo, P_MAX + 24, base_lo - 128, base_hi)
        ew = Shape.cast(range(min(min(vals), -1), max(vals) + 1)).width     # signed

        # --- specials and alignment --------------------------------------------------------
        nan = c.is_nan | p.is_nan | (c.is_inf & p.is_inf & (c.sign != p.sign))
        inf_sign = Mux(c.is_inf, c.sign, p.sign)
        # the special results travel as 3 bits (NaN; else Inf or zero, and a sign), not as 32:
        # a zero term with a nonzero c goes through the datapath, which returns c exactly
        # (c is aligned at its highest place, below; ``sig`` of a zero term is 0)
        inf = c.is_inf | p.is_inf
        special = Signal(data.StructLayout({"nan": 1, "inf": 1, "sign": 1}))
        m.d.comb += [special.nan.eq(nan), special.inf.eq(inf),
                     special.sign.eq(Mux(inf, inf_sign, c.sign & p.sign))]
        is_special = nan | inf | (p.is_zero & c.is_zero)

        d = Signal(signed(ew))      # right shift of c from its highest place P_MAX
        m.d.comb += d.eq(Mux(p.is_zero, -1, W + 2 + p.exp - c.exp))
        dc = Signal(range(P_MAX + 25))
        with m.If(d < 0):
            m.d.comb += dc.eq(0)
        with m.Elif(d > P_MAX + 24):
            m.d.comb += dc.eq(P_MAX + 24)
        with m.Else():
            m.d.comb += dc.eq(d)
        # base + T + 126, base = the exponent of window position 0: the normalization below
        # needs it in that form only (no adder after the leading-zero count)
        base = Signal(signed(ew))
        m.d.comb += base.eq(Mux(d < 0, c.exp + (T + 126 - P_MAX), p.exp + (T + 126 - G)))

        valid, y = stage(m, "diff" in cuts, self.i.valid,
                         {"c_sig": c.sig, "dc": dc, "p_sig": p.sig, "c_sign": c.sign,
                          "p_sign": p.sign, "base": base, "special": special,
                          "is_special": is_special},
                         name="diff")
        full = Signal(P_MAX + 48)
        m.d.comb += full.eq((y["c_sig"] << (P_MAX + 24)) >> y["dc"])
        c_al = Signal(T - 1)
        m.d.comb += c_al.eq(full[24:] | full[:24].any())
        p_al = Signal(G + W)
        m.d.comb += p_al.eq(y["p_sig"] << G)
        special, is_special, base = y["special"], y["is_special"], y["base"]

        valid, x = stage(m, "align" in cuts, valid,
                         {"c_al": c_al, "p_al": p_al, "c_sign": y["c_sign"],
                          "p_sign": y["p_sign"], "base": base, "special": special, "is_special": is_special},
                         name="align")

        # --- sign-magnitude add ------------------------------------------------------------
        # One adder and an incrementer: y0 = p + c' and y1 = y0 + 1, c' = c (same signs) or its
        # T+1-bit ones' complement (opposite signs). Same signs: |sum| = y0 (< 2**T, bit T
        # clear). Opposite signs: y0 = p - c - 1 (mod 2**(T+1)), whose bit T is set iff p <= c;
        # then |p - c| = c - p = ~y0, else p - c = y1. No negation after a subtract; the
        # incrementer (an AND chain) costs about half of a second adder.
        mag = Signal(T)
        sign = Signal()
        sub = Signal()
        m.d.comb += sub.eq(x["c_sign"] != x["p_sign"])
        cc = Signal(T + 1)
        m.d.comb += cc.eq(x["c_al"] ^ Mux(sub, (1 << (T + 1)) - 1, 0))
        y0, y1 = Signal(T + 1), Signal(T + 1)
        m.d.comb += [y0.eq(x["p_al"] + cc),
                     y1.eq(y0 + 1)]
        le = sub & y0[T]
        m.d.comb += [mag.eq(Mux(le, ~y0[:T], Mux(sub, y1[:T], y0[:T]))),
                     sign.eq(Mux(le, x["c_sign"], x["p_sign"]))]

        valid, x = stage(m, "add" in cuts, valid,
                         {"mag": mag, "sign": sign, "base": x["base"],
                          "special": x["special"], "is_special": x["is_special"]},
                         name="add")

        # --- normalize ---------------------------------------------------------------------
        mag = x["mag"]
        # (a zero sum gives some count: the result is then 0 through ``zero``)
        lz = lzc(m, mag, nonzero=True)
        b1 = x["base"]                  # base + T + 126 (see above)
        # The MSB's exponent is e_msb = base + T - 1 - lz; the result is normal iff
        # e_msb >= -126, i.e. lz < b1, and its biased exponent is then e_msb + 127 = b1 - lz.
        normal = lz < b1
        # Left shift that puts the rounding point at position T-24: ``lz`` for a normal result,
        # less for a subnormal one, base + T - 24 + 149 = b1 - 1. It is never negative: c's LSB
        # exponent is >= -149, so when the term is below c's range the window is anchored on c
        # (d < 0) and base >= -149 - P_MAX; otherwise base >= -149 - (W + 2) - G; both give
        # s >= T - 24 - P_MAX = 1.
        s = Signal(range(T + 1))
        m.d.comb += s.eq(Mux(normal, lz, b1 - 1))
        eb = Signal(signed(ew))
        m.d.comb += eb.eq(Mux(normal, b1 - lz, 1))

        valid, x = stage(m, "lzc" in cuts, valid,
                         {"mag": mag, "s": s, "eb": eb, "sign": x["sign"], "zero": mag == 0,
                          "special": x["special"], "is_special": x["is_special"]},
                         name="lzc")
        # the rounding reads the top 25 bits of the shifted sum (significand and guard) and
        # the OR of the rest: the shifter forms only those
        top, st = shl_top(m, x["mag"], x["s"], 25, name="nrm")

        valid, x = stage(m, "norm" in cuts, valid,
                         {"top": top, "st": st, "eb": x["eb"], "sign": x["sign"],
                          "zero": x["zero"], "special": x["special"],
                          "is_special": x["is_special"]},
                         name="norm")

        # --- round -------------------------------------------------------------------------
        sig = x["top"][1:]
        guard = x["top"][0]
        sticky = x["st"]
        up = guard & (sticky | sig[0])
        packed = Signal(signed(ew + 25))
        m.d.comb += packed.eq(((x["eb"] - 1) << 23) + sig + up)
        result = Signal(32)
        sp = x["special"]
        with m.If(x["is_special"]):
            m.d.comb += result.eq(Mux(sp.nan, FP32_QNAN,
                                      Cat(Mux(sp.inf, Const(FP32_INF, 31), 0), sp.sign)))
        with m.Elif(x["zero"]):
            m.d.comb += result.eq(0)
        with m.Elif(packed >= FP32_INF):
            m.d.comb += result.eq(Cat(Const(FP32_INF, 31), x["sign"]))
        with m.Else():
            m.d.comb += result.eq(Cat(packed[:31], x["sign"]))

        valid, x = stage(m, "out" in cuts, valid, {"result": result}, name="out")
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.result.eq(x["result"])]
        return m
