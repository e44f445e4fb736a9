# SPDX-License-Identifier: Apache-2.0
"""The packed-mode dot unit of the PE (issue 13): the exact sum of up to four narrow products.

Double-rate FP8 (``cfg.fp8_pack = 2``) and x4 MX (``cfg.mx_pack = 4``) put ``P`` consecutive K
elements in one PE step: the weight code and the moving lane each hold ``P`` codes, element j at
bits ``[j * w, (j + 1) * w)`` (``w`` = the format's width: 8 for FP8, 4 for FP4). The step adds
the *exact* sum of the ``P`` products to the partial sum and rounds once, in the PE's fused
adder (docs/tensor-engine.md, "Packed modes"). This unit forms that sum as one exact term.

Every product of an element pair lies on the grid of its pair's smallest LSB exponent
``base_a + base_b`` (``base_f = 1 - bias - man_bits``, the LSB exponent of a subnormal): product
j is ``sig_a * sig_b * 2**(off_a + off_b)`` above it, with ``off = max(exponent field, 1) - 1``.
So the sum needs no exponent comparison: each product is shifted left by its own ``off_a +
off_b`` (at most ``2 * (largest exponent field - 1)``: 58 for E5M2) into a fixed-point window,
and the signed products are added. The window (:attr:`PackedDot.Signature.sig_width`, 66 bits
for E5M2 x E5M2 x 4) holds every sum exactly.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Cat, Const, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.pipe import stage
from rtl.fp.unpack import exact_layout

__all__ = ["PackedDot", "dot_formats", "MAX_SLOTS"]

#: Products per step the unit can add (x4 MX).
MAX_SLOTS = 4


def dot_formats(tl):
    """``{pe format index: FPFormat}`` of the formats a packed step can hold (the enabled dense
    8-bit formats when ``fp8_pack``, the MX element formats when ``mx_pack``)."""
    cfg = tl.cfg
    names = set()
    if cfg.fp8_pack:
        names |= {f.name for f in cfg.fp8_formats}
    if cfg.mx_pack:
        names |= {f.name for f in cfg.mx_element_formats.values()}
    return {i: f for i, f in enumerate(tl.pe_formats) if f.name in names}


def _max_field(f):
    """Largest exponent field of a finite code of ``f``."""
    return (1 << f.exp_bits) - (2 if f.specials == "ieee" else 1)


def _base(f):
    return 1 - f.bias - f.man_bits


class PackedDot(wiring.Component):
    """Exact ``sum_j a_j * b_j * 2**adj`` over the active slots ``j <= nel`` (combinational).

    Parameters
    ----------
    cfg : CoreConfig
    stages : int, keyword-only
        Pipeline registers inside the unit, 0..3 (:attr:`latency`): 1 puts one after the
        decoded products and shift amounts (before the shift-and-sum), 2 also one after the
        carry-save pair (before the two carry chains), 3 also one after the slot decoders
        (before the products). The PE uses ``min(mul_stages - 1, MAX_STAGES)`` of its
        multiplier's ``mul_stages`` registers here, so the dot unit is pipelined like the
        multiplier instead of only delayed after it, and delays the term by the rest.

    Members
    -------
    a, b : In(code_width)
        Packed codes of the weight and of the moving lane (slot j at ``[j*w, (j+1)*w)``).
    fmt_a, fmt_b : In(fmt_shape)
        PE format indices (:attr:`TensorLayouts.pe_formats`); each must be a
        :func:`dot_formats` index (the engine checks it).
    nel : In(2)
        Active slots minus one: slots ``j > nel`` do not participate (a -0 product).
    adj : In(signed(10))
        Added to the term's exponent (MX: ``ws + xs - 254``; 0 otherwise).
    adj_nan : In(1)
        The term is NaN (a 0xFF MX scale).
    o : Out(exact_layout(sig_width, exp_shape))
        The exact sum: NaN if a slot is NaN (NaN operand, ``0 x Inf``), Infs of both signs meet
        or ``adj_nan``; else Inf if a slot is Inf; else ``sign``/``sig``/``exp`` of the sum
        (``is_zero`` when it is 0: ``sign`` is 1 only when every active product is a -0, and
        every slot inactive gives -0). Latency ``stages``.
    """

    class Signature(wiring.Signature):
        """Members for ``cfg``, with ``formats`` (:func:`dot_formats`), ``sig_width`` and
        ``exp_shape`` of the output term."""

        def __init__(self, cfg: CoreConfig):
            from rtl.tensor.layouts import TensorLayouts
            check_config(cfg, "PackedDot")
            tl = TensorLayouts(cfg)
            self.formats = fm = dot_formats(tl)
            if not fm:
                raise ValueError(f"PackedDot needs cfg.fp8_pack or cfg.mx_pack (cfg {cfg.name!r})")
            fs = list(fm.values())
            def smax(f):
                return (1 << (f.man_bits + 1)) - 1
            omax = max(_max_field(f) - 1 for f in fs)
            self.shift_max = 2 * omax
            # the largest exact sum of any format pair: MAX_SLOTS maximal products at the
            # pair's largest offset
            self.sig_width = max((MAX_SLOTS * smax(f) * smax(g) << (_max_field(f) - 1 +
                                  _max_field(g) - 1)).bit_length() for f in fs for g in fs)
            bmin, bmax = min(_base(f) for f in fs), max(_base(f) for f in fs)
            lo, hi = 2 * bmin - 254, 2 * bmax + 256
            ew = max(lo.bit_length(), hi.bit_length()) + 1
            self.exp_shape = signed(ew)
            self.layout = exact_layout(self.sig_width, self.exp_shape)
            super().__init__({
                "a": In(tl.code_width), "b": In(tl.code_width),
                "fmt_a": In(tl.fmt_shape), "fmt_b": In(tl.fmt_shape),
                "nel": In(2), "adj": In(signed(10)), "adj_nan": In(1),
                "o": Out(self.layout),
            })

    #: Cut points of the pipeline registers for ``stages`` = 0..:attr:`MAX_STAGES`.
    CUTS = {0: (), 1: ("A",), 2: ("A", "S"), 3: ("D", "A", "S")}
    #: Most registers the unit can hold.
    MAX_STAGES = max(CUTS)

    def __init__(self, cfg: CoreConfig, *, stages=0):
        if not isinstance(stages, int) or isinstance(stages, bool):
            raise TypeError(f"PackedDot stages must be an int, not {stages!r}")
        if stages not in self.CUTS:
            raise ValueError(f"PackedDot stages must be in [0, {self.MAX_STAGES}], "
                             f"not {stages!r}")
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.stages = stages
        #: Cycles from the inputs to ``o``.
        self.latency = stages

    def _decode(self, m, code, fmt, j, name):
        """Slot ``j`` of ``code`` decoded under the format index ``fmt``.

        The format only selects raw fields (a multiplexer per bit): the exponent field, the
        mantissa with its hidden bit (right-aligned) and two per-format flags; zero, Inf and NaN
        are then formed once from the selected fields. ``off`` is ``max(field, 1)``, one more
        than the subnormal-aligned offset, so no decrementer: the shift uses ``off_a + off_b``
        and the window drops its two low bits (always zero)."""
        fs = self.signature.formats
        sig_w = max(f.man_bits + 1 for f in fs.values())
        off_w = max(1, (self.signature.shift_max // 2 + 1).bit_length())
        lay = data.StructLayout({"sign": 1, "off": off_w, "sig": sig_w, "zero": 1, "inf": 1,
                                 "nan": 1})
        d = Signal(lay, name=f"{name}{j}")
        e = Signal(off_w, name=f"{name}{j}_e")
        top = Signal(name=f"{name}{j}_top")      # the field is the format's all-ones
        spc = Signal(2, name=f"{name}{j}_spc")  # 1: IEEE Inf/NaN, 2: fn NaN (mantissa all ones)
        sig = Signal(sig_w, name=f"{name}{j}_sig")
        man0 = Signal(name=f"{name}{j}_man0")
        with m.Switch(fmt):
            for i, f in fs.items():
                with m.Case(i):
                    M, EB, w = f.man_bits, f.exp_bits, f.width
                    c = code[j * w:(j + 1) * w] if (j + 1) * w <= len(code) else Const(0, w)
                    ef, man = c[M:M + EB], c[:M]
                    m.d.comb += [d.sign.eq(c[w - 1]), e.eq(ef), sig.eq(Cat(man, ef.any())),
                                 top.eq(ef.all()), man0.eq(man == 0)]
                    if f.specials == "ieee":
                        m.d.comb += spc.eq(1)
                    elif f.specials == "fn":
                        m.d.comb += spc.eq(Cat(0, man.all()))
        sub = e == 0
        m.d.comb += [
            d.off.eq(Cat(e[0] | sub, e[1:])),
            d.sig.eq(sig),
            d.zero.eq(sub & man0),
            d.inf.eq(spc[0] & top & man0),
            d.nan.eq(top & ((spc[0] & ~man0) | spc[1])),
        ]
        return d

    def _base(self, m, fmt, name):
        """LSB exponent of a subnormal of the format ``fmt`` selects (a per-format constant)."""
        base = Signal(self.signature.exp_shape, name=name)
        with m.Switch(fmt):
            for i, f in self.signature.formats.items():
                with m.Case(i):
                    m.d.comb += base.eq(_base(f))
        return base

    def elaborate(self, platform):
        m = Module()
        W = self.signature.sig_width
        n = W + 1          # the sum's width: |total| < 2**W, all arithmetic below mod 2**n
        nans, pinf, ninf, zeros, zsigns = [], [], [], [], []
        cuts = self.CUTS[self.stages]
        # stage D: the slot decoders (registered with 3 stages)
        vd = {}
        for j in range(MAX_SLOTS):
            vd[f"a{j}"] = self._decode(m, self.a, self.fmt_a, j, "a")
            vd[f"b{j}"] = self._decode(m, self.b, self.fmt_b, j, "b")
            on = Signal(name=f"on{j}")
            m.d.comb += on.eq(self.nel >= j) if j else on.eq(1)
            vd[f"on{j}"] = on
        vd["exp"] = Signal(self.signature.exp_shape, name="exp_a")
        m.d.comb += vd["exp"].eq(self._base(m, self.fmt_a, "base_a")
                                 + self._base(m, self.fmt_b, "base_b") + self.adj)
        vd["adj_nan"] = self.adj_nan
        _, d = stage(m, "D" in cuts, Const(1), vd, name="dotD")
        # stage A: products, shift amounts, flags (registered with 1 or more stages)
        def signed_product(prod, sgn, j):
            """``prod`` negated when ``sgn``: two's complement in one more bit, whose top bit
            is 0 for a zero product of either sign, so the window needs no negation."""
            sp = Signal(len(prod) + 1, name=f"sprod{j}")
            m.d.comb += sp.eq((Cat(prod, 0) ^ Mux(sgn, (1 << len(sp)) - 1, 0)) + sgn)
            return sp
        # the negation's carry chain goes where the shorter stage is: behind the products when
        # stage B ends at the adder (no S register), in front of the shifters when it ends at
        # the S register (2 or more stages; docs/tensor-engine.md has the Fmax of each)
        neg_in_a = "S" not in cuts
        va = {"exp": d["exp"], "adj_nan": d["adj_nan"]}
        for j in range(MAX_SLOTS):
            a, b, on = d[f"a{j}"], d[f"b{j}"], d[f"on{j}"]
            prod = Signal(2 * len(a.sig), name=f"prod{j}")
            # the partial products added in LUTs: faster than an ECP5 DSP for 5 x 5 bits; an
            # inactive slot's product is 0 here (10 bits), not its shifted term (the window)
            m.d.comb += prod.eq(Mux(on, sum(Mux(b.sig[i], a.sig << i, 0)
                                            for i in range(len(b.sig))), 0))
            sh = Signal(len(a.off) + 1, name=f"shamt{j}")
            m.d.comb += sh.eq(a.off + b.off)
            sgn = Signal(name=f"sgn{j}")
            m.d.comb += sgn.eq(on & (a.sign ^ b.sign))
            if neg_in_a:
                prod = signed_product(prod, sgn, j)
            va.update({f"on{j}": on, f"sgn{j}": sgn, f"prod{j}": prod,
                       f"sh{j}": sh, f"az{j}": a.zero, f"bz{j}": b.zero,
                       f"nan{j}": on & (a.nan | b.nan | (a.zero & b.inf) | (a.inf & b.zero)),
                       f"inf{j}": on & (a.inf | b.inf)})
        _, x = stage(m, "A" in cuts, Const(1), va, name="dotA")
        # stage B: shift into the window, exact signed sum, magnitude; one carry chain deep.
        # Each slot enters as its two's complement product shifted left (sign above, zeros
        # below: no per-bit negation of the window). A row of -1 (all ones) and three rows of
        # full adders (the first, with the constant, only an XNOR and an OR per bit) leave the
        # pair (s, c) with s + c = total - 1. One adder then gives y0 = total - 1, so -total
        # = ~y0 and total = y0 + 1 (an incrementer), and total == 0 iff y0 is all ones.
        terms = []
        for j in range(MAX_SLOTS):
            on, sgn = x[f"on{j}"], x[f"sgn{j}"]
            shifted = Signal(n, name=f"sh{j}")
            # off_a + off_b is the subnormal-aligned shift plus 2: drop the window's two
            # low bits (always zero)
            sp = x[f"prod{j}"] if neg_in_a else signed_product(x[f"prod{j}"], sgn, j)
            m.d.comb += shifted.eq((sp.as_signed() << x[f"sh{j}"])[2:n + 2])
            terms.append(shifted)
            nans.append(x[f"nan{j}"])
            pinf.append(x[f"inf{j}"] & ~sgn)
            ninf.append(x[f"inf{j}"] & sgn)
            zeros.append(~on | x[f"az{j}"] | x[f"bz{j}"])
            zsigns.append(~on | sgn)
        ta, tb, tc, td = terms
        def fa(x, y, z):
            return x ^ y ^ z, Cat(Const(0, 1), ((x & y) | (x & z) | (y & z))[:n - 1])
        s1, c1 = ~(ta ^ tb), Cat(Const(0, 1), (ta | tb)[:n - 1])    # ta + tb - 1
        s2, c2 = fa(s1, c1, tc)
        s, c = Signal(n, name="sum_s"), Signal(n, name="sum_c")
        m.d.comb += [Cat(s, c).eq(Cat(*fa(s2, c2, td)))]
        any_p, any_n = Cat(*pinf).any(), Cat(*ninf).any()
        vs = {"s": s, "c": c, "exp": x["exp"], "any_n": any_n,
              "nan": Cat(*nans).any() | (any_p & any_n) | x["adj_nan"],
              "inf_any": any_p | any_n,
              "zsign": Cat(*zeros).all() & Cat(*zsigns).all()}
        # stage S: the carry-save pair, the flags (registered with 2 or more stages)
        _, y = stage(m, "S" in cuts, Const(1), vs, name="dotS")
        s, c = y["s"], y["c"]
        # y0 = s + c = total - 1 (mod 2**n, n = W + 1 bits hold every total - 1)
        y0 = Signal(n, name="sum_y0")
        m.d.comb += y0.eq(s + c)
        is0 = Signal(name="is0")
        # total == 0 <=> s + c = -1 (mod 2**n) <=> s ^ c is all ones (x + y = -1 iff y = ~x):
        # no carry chain
        m.d.comb += is0.eq((s ^ c).all())
        total = Signal(n, name="total")
        m.d.comb += total.eq(y0 + 1)
        mag_n = Signal(W, name="mag_n")
        m.d.comb += mag_n.eq(~y0[:W])
        nan = y["nan"]
        inf = ~nan & y["inf_any"]
        neg = y0[n - 1] & ~is0
        zero = ~nan & ~inf & is0
        o = self.o
        m.d.comb += [
            o.sig.eq(Mux(neg, mag_n, total[:W])),
            o.exp.eq(y["exp"]),
            o.is_nan.eq(nan),
            o.is_inf.eq(inf),
            o.is_zero.eq(zero),
            o.sign.eq(Mux(inf, y["any_n"], Mux(zero, y["zsign"], neg))),
        ]
        return m
