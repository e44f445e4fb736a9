# SPDX-License-Identifier: Apache-2.0
"""One processing element of the weight-stationary systolic array."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Cat, Const, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.fused_add import FusedAdd
from rtl.fp.multiplier import ExactMultiplier
from rtl.fp.pipe import delay
from rtl.fp.unpack import exact_layout, select_exact, wider_exact_layout
from rtl.pipeline import signature_attr
from rtl.tensor.layouts import TensorLayouts
from rtl.tensor.dot import PackedDot
from rtl.tensor.sparse import tag_select
from rtl.tensor.splitmul import SplitMultiplier

__all__ = ["PE", "pe_layouts", "FP32_EXP_MASK"]

FP32_EXP_MASK = 0x7F800000


def pe_layouts(cfg: CoreConfig):
    """``(mv, ld, ps)`` layouts of the PE's moving, weight-load and partial-sum buses."""
    tl = TensorLayouts(cfg)
    mx = bool(cfg.mx_formats)
    mv = {"valid": 1, "first": 1, "tp": 1, "active": 1, "hit": 1,
          "fmt": tl.fmt_shape, "code": max(tl.code_width, tl.bus_width)}
    ld = {"valid": 1, "fmt": tl.fmt_shape, "code": tl.code_width,
          "col": unsigned(max(1, (cfg.pe_cols - 1).bit_length()))}
    if mx:
        mv.update({"mx": 1, "scale": 8})
        ld.update({"scale": 8})
    if tl.sparse:
        mv.update({"sp": 1, "wsel": range(max(2, len(tl.sparse_widths)))})
        ld.update({"tag": tl.tag_bits})
    if tl.fp32_split:
        mv.update({"part": 2, "last": 1})
    if tl.packed:
        mv.update({"dot": 1, "nel": 2})
    ps = {"valid": 1, "flag": 1, "value": 32}
    return data.StructLayout(mv), data.StructLayout(ld), data.StructLayout(ps)


class PE(wiring.Component):
    """A weight-stationary PE: ``ps_o = RNE_fp32(ps_i + w * x)`` (one rounding), or a bypass.

    The PE holds an *active* weight and a *shadow* weight. Weight-load beats travel right along
    ``ld_i -> ld_o`` (one register per PE); the PE whose ``col`` input equals the beat's ``col``
    latches it into the shadow. A moving beat with ``first`` set swaps shadow into active as it
    is used (the beat itself already multiplies by the new weight). Moving beats travel right
    along ``mv_i -> mv_o`` (one register); the partial sum travels down, ``ps_i`` (from the PE
    above) to ``ps_o`` through the fused multiply-add pipeline. The PE computes from the
    registered copies ``mv_o`` and ``ld_o``, one cycle after a beat enters: every PE
    alike, so the array's skews are those of a PE using ``mv_i`` directly, with one more cycle
    of latency.

    Modes, per moving beat:

    * dense (``tp = 0``, ``active = 1``): exact product of the weight code (``w.fmt``) and the
      moving code (``mv.fmt``), scaled by ``2**(ws + xs - 254)`` when ``mx`` (E8M0 scales; a
      scale of 0xFF makes the product NaN), added to ``ps_i`` with one RNE rounding.
    * inactive row (``active = 0``): the product is forced to ``-0`` (codes ``-0 x +0``), and
      ``RNE(p + (-0)) = p`` bit for bit for every FP32 ``p`` the chain can carry (canonical
      NaN included), so the sum passes unchanged and Inf/NaN of the moving lane never leak.
    * sparse (``sp = 1``, configs with ``cfg.sparsity``): ``code`` is the *group bus* of this
      row's N:M group (:func:`rtl.tensor.sparse.group_bus`) and the PE's stationary ``tag``
      selects the element its weight meets, at the element width ``wsel``
      (:func:`~rtl.tensor.sparse.tag_select`); otherwise as dense. The tag is loaded with the
      weight (``ld.tag``) and swapped with it.
    * FP32 in four passes (``cfg.fp32_passes == 4``, :attr:`TensorLayouts.fp32_split`): the
      multiplier is a :class:`~rtl.tensor.splitmul.SplitMultiplier` (12 x 12). A moving column
      with an FP32 operand arrives as four consecutive beats, ``part`` 0..3 (``first`` on part
      0 only), whose exact partial products are summed; only the ``last`` beat (part 3) goes to
      the fused adder, so the step is still ``RNE_fp32(ps_i + w * x)`` with one rounding, and
      ``ps_o.valid`` rises once per column. Other pairs are one beat (``part = 0``,
      ``last = 1``).
    * transpose (``tp = 1``): product forced to ``-0`` as well; the row whose ``hit`` is set
      replaces the addend by its weight code, zero-extended to 32 bits and *encoded* so that the
      adder cannot alter it: an FP32-NaN-shaped pattern (exponent field all ones) travels with
      its exponent field cleared and ``flag = 1`` (a subnormal or zero passes ``+(-0)``
      exactly); the bottom of the column restores the exponent field. ``flag`` travels down
      through a 1-bit delay line matching the FMA latency.

    Every register in the PE (FMA pipeline included) advances every cycle: the array never
    stalls (the engine holds a beat at issue when PSUM could not take its result), so no
    register pays for a clock enable.

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    col : In(unsigned)
        This PE's column index (a constant at instantiation).
    mv_i, mv_o : In / Out(mv layout)
        Moving bus in (from the left) and out (registered, to the right).
    ld_i, ld_o : In / Out(ld layout)
        Weight-load bus in and out (registered).
    ps_i, ps_o : In / Out(ps layout)
        Partial sum from above and to below. ``ps_i`` is used :attr:`mul_latency` enabled
        cycles after the ``mv_i`` beat it pairs with; ``ps_o`` follows ``ps_i`` by
        :attr:`row_skew` (the adder latency) and ``mv_i`` by :attr:`latency`
        (``ps_o.valid`` is the delayed ``mv_i.valid``).
    """

    class Signature(wiring.Signature):
        """The PE's members for ``cfg``, with its layouts (``mv_layout``, ``ld_layout``,
        ``ps_layout``, ``term_layout``) and latencies (``latency``, ``row_skew``,
        ``mul_latency``) as attributes: read them without building a PE."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PE")
            tl = TensorLayouts(cfg)
            self.mv_layout, self.ld_layout, self.ps_layout = pe_layouts(cfg)
            #: The packed dot unit's signature and registers (``None`` without packed modes).
            self.dot, self.dot_stages = None, 0
            if tl.packed:
                # mul_stages >= 2: mul_stages - 1 of the multiplier's registers (at most
                # PackedDot.MAX_STAGES) sit inside the dot unit (pipelined like the multiplier)
                self.dot = PackedDot.Signature(cfg)
                self.dot_stages = min(max(cfg.mul_stages - 1, 0), PackedDot.MAX_STAGES)
            if tl.fp32_split:
                # packed modes: the dot unit's exact sum goes through the split multiplier's
                # registers after it (alt_at), which are then wide enough for it
                self.mul = SplitMultiplier.Signature(
                    cfg, formats_a=tl.pe_formats, formats_b=tl.pe_formats,
                    scaled=bool(cfg.mx_formats),
                    alt_layout=self.dot.layout if tl.packed else None, alt_at=self.dot_stages)
            else:
                self.mul = ExactMultiplier.Signature(cfg, formats_a=tl.pe_formats,
                                                     formats_b=tl.pe_formats)
            term = self.mul.out_layout
            if cfg.mx_formats and not tl.fp32_split:
                ew = term["exp"].shape.width + 2    # + (ws + xs - 254) in [-254, 256]
                ew = max(ew, 11)
                term = exact_layout(term["sig"].width, signed(ew))
            self.mul_term_layout = term
            if tl.packed and not tl.fp32_split:
                # the dot unit's exact sum, delayed, shares the fused adder's term input
                term = wider_exact_layout(term, self.dot.layout)
            self.term_layout = term
            self.fadd = FusedAdd.Signature(cfg, term_layout=term)
            #: Cycles from ``mv_i`` to ``ps_o`` (multiplier + fused adder).
            # + 1: the PE computes from its registered copies of the buses (``mv_o``,
            # ``ld_o``), one cycle after they enter
            self.latency = 1 + self.mul.latency + self.fadd.latency
            #: Cycles from ``ps_i`` to ``ps_o`` (the fused adder): the moving skew
            #: between consecutive rows. ``ps_i`` is consumed ``mul_latency`` cycles after
            #: ``mv_i``.
            self.row_skew = self.fadd.latency
            self.mul_latency = 1 + self.mul.latency
            super().__init__({
                "col": In(self.ld_layout["col"].shape),
                "mv_i": In(self.mv_layout), "mv_o": Out(self.mv_layout),
                "ld_i": In(self.ld_layout), "ld_o": Out(self.ld_layout),
                "ps_i": In(self.ps_layout), "ps_o": Out(self.ps_layout),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.tl = TensorLayouts(cfg)
        sig = self.signature
        self.mv_layout, self.ld_layout, self.ps_layout = sig.mv_layout, sig.ld_layout, \
            sig.ps_layout
        self.term_layout = sig.term_layout
        self.mx = bool(cfg.mx_formats)

    latency = signature_attr("latency", "Cycles from ``mv_i`` to ``ps_o``.")
    row_skew = signature_attr("row_skew", "Cycles from ``ps_i`` to ``ps_o``.")
    mul_latency = signature_attr("mul_latency", "Cycles from ``mv_i`` to the use of "
                                                "``ps_i``.")

    def elaborate(self, platform):
        m = Module()
        tl = self.tl
        sig = self.signature
        if tl.fp32_split:
            m.submodules.mul = mul = SplitMultiplier(
                self.cfg, formats_a=tl.pe_formats, formats_b=tl.pe_formats, scaled=self.mx,
                alt_layout=sig.dot.layout if tl.packed else None, alt_at=sig.dot_stages)
        else:
            m.submodules.mul = mul = ExactMultiplier(self.cfg, formats_a=tl.pe_formats,
                                                     formats_b=tl.pe_formats)
        m.submodules.fadd = fadd = FusedAdd(self.cfg, term_layout=self.term_layout)
        mv, ld = self.mv_i, self.ld_i
        wl = data.StructLayout({"code": tl.code_width, "fmt": tl.fmt_shape,
                                **({"scale": 8} if self.mx else {}),
                                **({"tag": tl.tag_bits} if tl.sparse else {})})
        shadow = Signal(wl)
        active = Signal(wl)
        m.d.sync += [self.mv_o.eq(mv), self.ld_o.eq(ld)]
        # everything below works on the registered buses (the copies passed to the right): a
        # uniform one-cycle shift for every PE, so the array's skews are unchanged. The same
        # registers, the same paths (the operands came from the left PE's registers before),
        # but no logic hangs off the PE's inputs but ``ps_i``: a PE compiled on its own (a
        # Verilator hierarchical block, evaluated once per input change) evaluates its
        # products once per clock instead of once per input update.
        mv, ld = self.mv_o, self.ld_o
        with m.If(ld.valid & (ld.col == self.col)):
            m.d.sync += [shadow.code.eq(ld.code), shadow.fmt.eq(ld.fmt)]
            if self.mx:
                m.d.sync += shadow.scale.eq(ld.scale)
            if tl.sparse:
                m.d.sync += shadow.tag.eq(ld.tag)
        w = Signal(wl)
        m.d.comb += w.eq(Mux(mv.first, shadow, active))
        with m.If(mv.valid & mv.first):
            m.d.sync += active.eq(shadow)

        forced = ~mv.active | mv.tp
        f0 = tl.pe_formats[0]
        x_code = mv.code            # dense configs: exactly the dense PE
        if tl.sparse:
            x_code = Signal(tl.code_width)
            sel = tag_select(tl, mv.code, w.tag, mv.wsel, tl.code_width)
            m.d.comb += x_code.eq(Mux(mv.sp, sel, mv.code[:tl.code_width]))
        m.d.comb += [
            mul.i.valid.eq(mv.valid),
            mul.i.payload.a.eq(Mux(forced, 1 << (f0.width - 1), w.code)),
            mul.i.payload.fmt_a.eq(Mux(forced, 0, w.fmt)),
            mul.i.payload.b.eq(Mux(forced, 0, x_code)),
            mul.i.payload.fmt_b.eq(Mux(forced, 0, mv.fmt)),
        ]
        if tl.fp32_split:
            m.d.comb += [mul.i.payload.part.eq(mv.part), mul.i.payload.last.eq(mv.last)]
        # transpose hit: this PE's weight code, zero-extended and encoded, replaces the addend
        hit = mv.tp & mv.hit & mv.active
        # term (with the MX scale applied to its exponent), delayed operands aligned to mul.o
        term = Signal(self.signature.mul_term_layout)
        if self.mx and tl.fp32_split:
            # the split multiplier applies the scale in its first stage (off the adder's path)
            use_mx = Signal()
            m.d.comb += use_mx.eq(mv.mx & ~forced)
            m.d.comb += [
                mul.i.payload.adj.eq(Mux(use_mx, Cat(w.scale + mv.scale, Const(0, 1))
                                         .as_signed() - 254, 0)),
                mul.i.payload.adj_nan.eq(use_mx & ((w.scale == 0xFF) | (mv.scale == 0xFF))),
                term.eq(mul.o.payload),
            ]
        elif self.mx:
            use_mx = Signal()
            m.d.comb += use_mx.eq(mv.mx & ~forced)
            sc = Signal(data.StructLayout({"on": 1, "ws": 8, "xs": 8}))
            m.d.comb += sc.eq(Cat(use_mx, w.scale, mv.scale))
            scd = data.View(sc.shape(), delay(m, sc.as_value(), mul.latency, name="scale"))
            snan = scd.on & ((scd.ws == 0xFF) | (scd.xs == 0xFF))
            shift = Mux(scd.on, Cat(scd.ws + scd.xs, Const(0, 1)).as_signed() - 254, 0)
            prod = mul.o.payload
            m.d.comb += [
                term.sign.eq(prod.sign), term.sig.eq(prod.sig),
                term.exp.eq(prod.exp + shift),
                term.is_nan.eq(prod.is_nan | snan),
                term.is_inf.eq(prod.is_inf & ~snan),
                term.is_zero.eq(prod.is_zero & ~snan),
            ]
        else:
            m.d.comb += term.eq(mul.o.payload)
        if tl.packed:
            # packed step (double-rate FP8 / x4 MX): the exact sum of up to four products,
            # formed from the undelayed operands in sig.dot_stages registers, then through the
            # split multiplier's remaining registers (or delayed to meet the multiplier)
            m.submodules.dot = dot = PackedDot(self.cfg, stages=sig.dot_stages)
            use_dot = mv.dot & ~forced
            m.d.comb += [dot.a.eq(w.code), dot.b.eq(x_code), dot.fmt_a.eq(w.fmt),
                         dot.fmt_b.eq(mv.fmt), dot.nel.eq(mv.nel)]
            if self.mx:
                m.d.comb += [
                    dot.adj.eq(Mux(mv.mx, Cat(w.scale + mv.scale, Const(0, 1)).as_signed() - 254,
                                   0)),
                    dot.adj_nan.eq(mv.mx & ((w.scale == 0xFF) | (mv.scale == 0xFF))),
                ]
            use_d = delay(m, use_dot, dot.latency, name="dot_use")
            if tl.fp32_split:
                m.d.comb += [mul.alt.eq(dot.o), mul.alt_sel.eq(use_d)]
            else:
                dt = Signal(dot.o.shape())
                m.d.comb += dt.eq(dot.o)
                dd = delay(m, Cat(dt.as_value(), use_d), mul.latency - dot.latency, name="dot")
                dterm = data.View(dot.o.shape(), dd[:-1])
                term = select_exact(m, dd[-1], dterm, term, self.term_layout, name="dot_term")
        # the sum from above arrives when the product leaves the multiplier (rows are skewed
        # by the adder latency only); the transpose replacement is delayed to meet it
        def nan_shape(code):
            return code[23:31].all()

        def encode(code, flag):
            enc = Signal(32)
            m.d.comb += enc.eq(Mux(flag, code & (0xFFFFFFFF ^ FP32_EXP_MASK), code))
            return Cat(enc, flag)
        raw = Signal(32)
        m.d.comb += raw.eq(w.code)
        if mul.latency == 1:
            # one cycle after a valid beat, ``active`` holds the weight that beat used (its
            # ``first`` swapped it in, or it was already there): only the hit and the NaN-shape
            # flag are delayed, so the addend's path gains no logic level (at the presets'
            # depth; deeper pipelines delay the encoded code)
            enc_d = encode(active.code, delay(m, nan_shape(raw), 1, name="hit_flag"))
        else:
            enc_d = delay(m, encode(raw, nan_shape(raw)), mul.latency, name="hit_code")
        hit_d = delay(m, hit, mul.latency, name="hit")
        c_val = Mux(hit_d, enc_d[:32], self.ps_i.value)
        c_flag = Mux(hit_d, enc_d[32], self.ps_i.flag)
        m.d.comb += [
            fadd.i.valid.eq(mul.o.valid),
            fadd.i.payload.c.eq(c_val),
            fadd.i.payload.p.eq(term),
        ]
        flag_o = delay(m, c_flag, fadd.latency, name="flag")
        m.d.comb += [
            self.ps_o.valid.eq(fadd.o.valid),
            self.ps_o.value.eq(fadd.o.payload.result),
            self.ps_o.flag.eq(flag_o),
        ]
        return m
