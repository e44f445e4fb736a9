# SPDX-License-Identifier: Apache-2.0
"""The PE multiplier of ``fp32_passes = 4``: a 12 x 12 multiplier that forms the exact FP32
product from its four hi/lo partial products over four consecutive cycles."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Const, signed
from amaranth.lib import data
from amaranth.lib.wiring import In

from rtl.config import check_config
from rtl.fp.multiplier import ExactMultiplier
from rtl.fp.pipe import stage
from rtl.fp.unpack import Unpack, exact_layout, select_exact, wider_exact_layout
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["SplitMultiplier", "SPLIT_BITS", "PART_ORDER"]

#: Bits of one operand half: the significand of every format but FP32 fits (TF32 and FP16 have
#: 11 bits, BF16 8, the FP8s at most 5), so those formats need only part 0.
SPLIT_BITS = 12
#: Parts of an FP32 product in issue order: ``part`` bit 1 selects the high half of ``a``,
#: bit 0 the high half of ``b``; part 0 (lo x lo) must come first (it clears the sum).
PART_ORDER = (0, 1, 2, 3)


class SplitMultiplier(Pipeline):
    """Exact product ``a * b`` (as :class:`~rtl.fp.multiplier.ExactMultiplier`) built from
    ``SPLIT_BITS x SPLIT_BITS`` partial products.

    The significands are split as ``A = Ah * 2**12 + Al`` (exact). Input beat ``part`` = p
    multiplies ``(Ah if p & 2 else Al) * (Bh if p & 1 else Bl)``, shifts it by ``12 * (number
    of high halves)`` and adds it to the running sum, which part 0 restarts. A beat with
    ``last = 1`` delivers the sum as the exact product on ``o`` (``o.valid`` only then): for an
    FP32 operand the four parts 0, 1, 2, 3 of one product on consecutive cycles give
    ``Al*Bl + (Al*Bh + Ah*Bl) * 2**12 + Ah*Bh * 2**24 = A * B`` exactly; a narrower pair
    (significands of at most 12 bits) needs part 0 alone with ``last = 1``. Nothing is rounded.

    Parameters
    ----------
    cfg : CoreConfig
        ``mul_stages`` (the latency).
    formats_a, formats_b : tuple of FPFormat or str, keyword-only
    scaled : bool, keyword-only
        Add the inputs ``adj`` (signed 10 bits, the MX scale exponent ``ws + xs - 254``) to the
        product's exponent and make it NaN when ``adj_nan`` (a 0xFF scale), inside the first
        pipeline stage; the output exponent is 2 bits wider (at least 11).
    alt_layout : StructLayout or None, keyword-only
        An :func:`~rtl.fp.unpack.exact_layout` of an *alternate term* (the PE's packed dot
        unit) that a beat can deliver instead of its product, through the multiplier's own
        registers: the output layout is then wide enough for both (``sig`` and ``exp`` the
        wider of the two), and the members ``alt`` and ``alt_sel`` are added.
    alt_at : int, keyword-only
        Cycles after a beat's input at which its ``alt`` and ``alt_sel`` arrive; in
        ``[1 if latency >= 2 else 0, latency]`` (they replace the product at the input of the
        register of that time, or at ``o`` when it is ``latency``).

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``ExactMultiplier`` input fields plus ``part`` (2 bits) and ``last`` (1 bit). The parts
        of one product arrive in order, on consecutive *valid* beats (idle cycles between them
        are allowed: they leave the running sum unchanged).
    o : Out(stream.Signature(out_layout, always_ready=True))
        The ``ExactMultiplier`` output layout; valid for ``last`` beats only.
    alt : In(alt_layout)
        With ``alt_layout``: the alternate term, ``alt_at`` cycles after its beat's input.
    alt_sel : In(1)
        With ``alt_layout``: the beat delivers ``alt`` (it must have ``part = 0`` and
        ``last = 1``), at the same time as ``alt``.

    Latency ``cfg.mul_stages``: with 0 the sum is combinational (a separate register holds the
    running sum); with 1 or more the first register after the multiply holds it; with 2 or more
    a register also sits after the decode.
    """

    class Signature(PipelineSignature):
        """Layouts and latency of a :class:`SplitMultiplier`."""

        def __init__(self, cfg, *, formats_a=None, formats_b=None, scaled=False,
                     alt_layout=None, alt_at=0):
            check_config(cfg, "SplitMultiplier")
            ex = ExactMultiplier.Signature(cfg, formats_a=formats_a, formats_b=formats_b)
            self.formats_a, self.formats_b = ex.formats_a, ex.formats_b
            self.sig_width = ex.sig_width
            for arg, fs in (("formats_a", ex.formats_a), ("formats_b", ex.formats_b)):
                if max(f.man_bits for f in fs) + 1 > 2 * SPLIT_BITS:
                    raise ValueError(f"{arg} significands must fit {2 * SPLIT_BITS} bits")
            fields = {**{n: f.shape for n, f in ex.in_layout}, "part": 2, "last": 1}
            out_layout = ex.out_layout
            self.scaled = bool(scaled)
            if self.scaled:
                # MX: + (ws + xs - 254) in [-254, 256] on the exponent, NaN for a 0xFF scale
                fields.update({"adj": signed(10), "adj_nan": 1})
                ew = max(ex.out_layout["exp"].shape.width + 2, 11)
                out_layout = exact_layout(ex.sig_width, signed(ew))
            #: The product's layout (``out_layout`` without an alternate term).
            self.prod_layout = out_layout
            self.alt_layout, self.alt_at = alt_layout, alt_at
            members = {}
            if alt_layout is not None:
                if not isinstance(alt_layout, data.StructLayout) or \
                        {n for n, _ in alt_layout} != {n for n, _ in out_layout}:
                    raise TypeError(f"alt_layout must be an rtl.fp.unpack.exact_layout, "
                                    f"not {alt_layout!r}")
                n = cfg.mul_stages
                lo = 1 if n >= 2 else 0
                if isinstance(alt_at, bool) or not isinstance(alt_at, int) or \
                        not lo <= alt_at <= n:
                    raise ValueError(f"alt_at must be in [{lo}, {n}], not {alt_at!r}")
                out_layout = wider_exact_layout(out_layout, alt_layout)
                members = {"alt": In(alt_layout), "alt_sel": In(1)}
            super().__init__(data.StructLayout(fields), out_layout, latency=cfg.mul_stages,
                             members=members)

    def __init__(self, cfg, *, formats_a=None, formats_b=None, scaled=False, alt_layout=None,
                 alt_at=0):
        super().__init__(self.Signature(cfg, formats_a=formats_a, formats_b=formats_b,
                                        scaled=scaled, alt_layout=alt_layout, alt_at=alt_at))
        self.scaled = self.signature.scaled
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
        fields = {"a": ua.o, "b": ub.o, "part": i.part, "last": i.last}
        if self.scaled:
            fields.update({"adj": i.adj, "adj_nan": i.adj_nan})
        valid, x = stage(m, n >= 2, self.i.valid, fields, name="dec")
        a, b, part = x["a"], x["b"], x["part"]
        H = SPLIT_BITS

        def half(sig, hi):
            w = len(sig)
            lo_v = sig[:min(H, w)]
            if w <= H:
                return Mux(hi, 0, lo_v)
            return Mux(hi, sig[H:], lo_v)

        # the running sum has no clock enable (an enable flop costs half a flop more): a beat
        # that is not valid multiplies a zero half and does not restart the sum, so the
        # register reloads the sum it holds
        pp = Signal(2 * H)
        m.d.comb += pp.eq(Mux(valid, half(a.sig, part[1]), 0) * half(b.sig, part[0]))
        W = self.sig_width
        shifted = Signal(W)
        m.d.comb += shifted.eq(Mux(part == 0, pp, Mux(part == 3, pp << (2 * H), pp << H)))
        p = Signal(self.signature.prod_layout)
        total = Signal(W)
        nan = a.is_nan | b.is_nan | (a.is_zero & b.is_inf) | (a.is_inf & b.is_zero)
        exp = a.exp + b.exp
        if self.scaled:
            # the MX scaling is applied here, before the pipeline register, so it is not on
            # the path into the fused adder's alignment
            nan = nan | x["adj_nan"]
            exp = exp + x["adj"]
        inf = ~nan & (a.is_inf | b.is_inf)
        m.d.comb += [
            p.sign.eq(a.sign ^ b.sign),
            p.sig.eq(total),
            p.exp.eq(exp),
            p.is_nan.eq(nan),
            p.is_inf.eq(inf),
            p.is_zero.eq(~nan & ~inf & (a.is_zero | b.is_zero)),
        ]
        rest = n - 1 if n >= 2 else n
        out_valid = valid & x["last"]
        # the alternate term replaces the product at the time ``alt_at`` (the product is
        # formed at t0): at the input of the register of that time, or at ``o``
        t0 = 1 if n >= 2 else 0

        def merge(p, t, *, gate=False):
            if self.signature.alt_layout is None or t != self.signature.alt_at:
                return p
            # into the running sum: only a valid beat's term replaces it
            sel = self.alt_sel & valid if gate else self.alt_sel
            return select_exact(m, sel, self.alt, p, self.out_layout, name="alt_term")

        # idle cycles between the parts of a product (a source that drops valid) reload the
        # running sum unchanged (see ``pp``)
        if rest == 0:
            acc = Signal(W, name="acc", reset_less=True)
            m.d.sync += acc.eq(total)
            p = merge(p, t0)
        else:
            # the first register after the multiply is the running sum (with the alternate
            # term merged at its input, the wider register holds that term too)
            p = merge(p, t0, gate=True)
            r = Signal(p.shape(), name="mul0_p", reset_less=True)
            v = Signal(name="mul0_valid")
            m.d.sync += r.eq(p)
            m.d.sync += v.eq(out_valid)
            acc = r.sig[:W]
            out_valid, p = v, r
            for k in range(1, rest):
                p = merge(p, t0 + k)
                out_valid, y = stage(m, True, out_valid, {"p": p}, name=f"mul{k}")
                p = y["p"]
            p = merge(p, n)
        m.d.comb += total.eq(Mux((part == 0) & valid, Const(0, W), acc) + shifted)
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.eq(p)]
        return m
