# SPDX-License-Identifier: Apache-2.0
"""Packed modes of the PE (issue 13) in Amaranth's simulator: double-rate FP8 (two FP8 codes
per lane) and x4 MX (four element codes per lane, one scale pair), interleaved with ordinary
beats, against ``golden.tensor.packed_step`` (the exact sum of the step's products, one
rounding; checked against a Fraction chain in tests/golden/test_tensor_packed_golden.py).

Every expected value comes from the golden model; the slot layout (element j at bits
``[j * w, (j + 1) * w)``) and the ``nel`` rule (slots ``j > nel`` do not participate) from
docs/tensor-engine.md "Packed modes".
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from golden.arith import fma_fp32, mul_exact
from golden.formats import decode, decode_e8m0
from golden.tensor import mx_product, packed_step
from rtl.config import get_preset
from rtl.tensor.layouts import TensorLayouts
from tests.test_tensor_units import (Bench, mixed_codes, rand_codes, rand_fp32, results, run_pe,
                                     schedule, n_parts)

SMALL = get_preset("small")
FP8 = ("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8")


@pytest.fixture(scope="module")
def pe_bench():
    from rtl.tensor.pe import PE
    return Bench(PE(SMALL))


def pack(codes, w):
    v = 0
    for j, c in enumerate(codes):
        v |= int(c) << (j * w)
    return v


def _check(pe_bench, beats, want, seed, what):
    got = np.array([v for v, _ in results(run_pe(pe_bench, schedule(pe_bench.dut, beats)))],
                   dtype=np.uint32)
    want = np.array(want, dtype=np.uint32)
    assert len(got) == len(want), f"{what}: {len(got)} results, {len(want)} expected"
    bad = np.flatnonzero(got != want)
    assert not len(bad), (f"seed={seed} {what}: {len(bad)} mismatches, first beat {bad[0]}: "
                          f"got {hex(got[bad[0]])} want {hex(want[bad[0]])}")


def _ld(beats, ld):
    if beats:
        beats[-1]["ld"] = ld
    else:
        beats.append({"mv": {}, "ld": ld})


def test_pe_fp8_double_rate(pe_bench, seed):
    """Two FP8 products per beat, every FP8 pair, specials included, nel = 0 (second slot
    holds a random code, NaN/Inf included, that must not matter) and 1; dense beats between
    packed ones reuse the PE as before."""
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 21])
    beats, want = [], []
    for fw in FP8:
        for fx in FP8:
            Fw, Fx = SMALL.fmt(fw), SMALL.fmt(fx)
            n = 12
            w = mixed_codes(rng, Fw, 2 * n).reshape(n, 2)
            x = mixed_codes(rng, Fx, 2 * n).reshape(n, 2)
            c = rand_fp32(rng, n)
            nel = (rng.random(n) < 0.8).astype(int)
            for i in range(n):
                _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index(fw),
                            "code": pack(w[i], 8)})
                beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "dot": 1,
                                     "nel": int(nel[i]), "fmt": tl.fmt_index(fx),
                                     "code": pack(x[i], 8)}, "c": c[i]})
                prods = [float(mul_exact(w[i, j], Fw, x[i, j], Fx)) for j in range(nel[i] + 1)]
                want.append(packed_step(c[i], *prods))
            # an ordinary beat in between: the low code only, one rounding
            _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index(fw), "code": int(w[0, 0])})
            beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "fmt": tl.fmt_index(fx),
                                 "code": int(x[0, 0])}, "c": c[0],
                          "parts": n_parts(tl, fw, fx)})
            want.append(int(fma_fp32(c[:1], w[:1, 0], Fw, x[:1, 0], Fx)[0]))
    _check(pe_bench, beats, want, seed, "fp8 x2")


def test_pe_mx_x4(pe_bench, seed):
    """Four MX element products per beat under one scale pair (wide scales, NaN scales),
    every element pair, nel 0..3 (unused slots hold random codes)."""
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 22])
    els = [SMALL.mx_element_formats[m] for m in SMALL.mx_formats]
    beats, want = [], []
    for ew in els:
        for ex in els:
            n = 12
            w = mixed_codes(rng, ew, 4 * n).reshape(n, 4)
            x = mixed_codes(rng, ex, 4 * n).reshape(n, 4)
            ws = rng.choice([0, 1, 127, 100, 160, 254, 255, 120, 134], n)
            xs = rng.choice([0, 1, 127, 100, 160, 254, 120, 134, 128], n)
            c = rand_fp32(rng, n)
            nel = rng.choice([0, 1, 2, 3, 3, 3], n)
            for i in range(n):
                _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index(ew),
                            "code": pack(w[i], ew.width), "scale": int(ws[i])})
                beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "dot": 1, "mx": 1,
                                     "nel": int(nel[i]), "fmt": tl.fmt_index(ex),
                                     "code": pack(x[i], ex.width), "scale": int(xs[i])},
                              "c": c[i]})
                sv = decode(w[i], ew).astype(np.float64) * decode_e8m0(np.uint32(ws[i]))
                xv = decode(x[i], ex).astype(np.float64) * decode_e8m0(np.uint32(xs[i]))
                prods = [float(mx_product(sv[j], xv[j])) for j in range(nel[i] + 1)]
                want.append(packed_step(c[i], *prods))
    _check(pe_bench, beats, want, seed, "mx x4")


@pytest.mark.parametrize("mul_stages,add_stages", [(0, 1), (2, 6), (3, 6), (4, 6)])
def test_pe_packed_other_depths(seed, mul_stages, add_stages):
    """The dot term meets the partial sum at every pipeline depth: FP8 x2 and MX x4 beats
    (the MX ones with NaN scales) with mul_stages 0, 2, 3 and 4 (the dot unit with 0..3 of
    its own registers), against golden.tensor.packed_step."""
    from rtl.tensor.pe import PE
    cfg = SMALL.replace(mul_stages=mul_stages, add_stages=add_stages)
    tl = TensorLayouts(cfg)
    bench = Bench(PE(cfg))
    rng = np.random.default_rng([seed, 24, mul_stages])
    beats, want = [], []
    e5, e4 = cfg.fmt("fp8_e5m2"), cfg.fmt("fp8_e4m3fn")
    for i in range(40):
        mx = i % 2
        P = 4 if mx else 2
        w = mixed_codes(rng, e5, P)
        x = mixed_codes(rng, e4, P)
        nel = int(rng.integers(0, P))
        ws, xs = (int(rng.choice([120, 127, 134, 255, 1])), int(rng.choice([126, 130, 0])))
        c = rand_fp32(rng, 1)[0]
        ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(e5), "code": pack(w, 8)}
        mv = {"valid": 1, "active": 1, "first": 1, "dot": 1, "nel": nel,
              "fmt": tl.fmt_index(e4), "code": pack(x, 8)}
        if mx:
            ld["scale"], mv["mx"], mv["scale"] = ws, 1, xs
            sv = decode(w, e5).astype(np.float64) * decode_e8m0(np.uint32(ws))
            xv = decode(x, e4).astype(np.float64) * decode_e8m0(np.uint32(xs))
            prods = [float(mx_product(sv[j], xv[j])) for j in range(nel + 1)]
        else:
            prods = [float(mul_exact(w[j], e5, x[j], e4)) for j in range(nel + 1)]
        if i % 3 == 2:          # an ordinary beat in between: the dot term must not be used
            ld = {"valid": 1, "col": 0, "fmt": tl.fmt_index(e5), "code": int(w[0])}
            mv = {"valid": 1, "active": 1, "first": 1, "fmt": tl.fmt_index(e4),
                  "code": int(x[0])}
            exp = int(fma_fp32(np.array([c]), w[:1], e5, x[:1], e4)[0])
        else:
            exp = packed_step(c, *prods)
        _ld(beats, ld)
        beats.append({"mv": mv, "c": c})
        want.append(exp)
    _check(bench, beats, want, seed, f"depths {mul_stages}/{add_stages}")


@pytest.mark.parametrize("mul_stages", [0, 1, 2])
def test_pe_fp32_parts_with_idle_dot_beats(seed, mul_stages):
    """Idle cycles between the parts of FP32 columns whose garbage fields ask for the dot term
    (``dot = 1``, some with ``part = 0``) change nothing: the split multiplier's running sum has
    no clock enable, so an idle beat must neither restart it nor replace it by the dot term.
    Packed beats in between; every result against golden."""
    from rtl.tensor.pe import PE
    cfg = SMALL.replace(mul_stages=mul_stages)
    tl = TensorLayouts(cfg)
    bench = Bench(PE(cfg))
    rng = np.random.default_rng([seed, 27, mul_stages])
    F, e5 = cfg.fmt("fp32"), cfg.fmt("fp8_e5m2")
    beats, want = [], []
    for i in range(24):
        c = rand_fp32(rng, 1)[0]
        if i % 4 == 3:
            w, x = mixed_codes(rng, e5, 2), mixed_codes(rng, e5, 2)
            _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index(e5), "code": pack(w, 8)})
            beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "dot": 1, "nel": 1,
                                 "fmt": tl.fmt_index(e5), "code": pack(x, 8)}, "c": c})
            want.append(packed_step(c, *[float(mul_exact(w[j], e5, x[j], e5))
                                         for j in range(2)]))
            continue
        w, x = (int(v) for v in rand_codes(rng, F, (2,), p_wild=0.3))
        _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index(F), "code": w})
        beats.append({"mv": {"valid": 1, "active": 1, "first": 1, "fmt": tl.fmt_index(F),
                             "code": x}, "c": c, "parts": 4,
                      "gaps": {int(j): int(rng.integers(1, 3)) for j in rng.choice(3, 2)}})
        want.append(int(fma_fp32(np.array([c], np.uint32), np.array([w]), F, np.array([x]),
                                 F)[0]))
    steps = schedule(bench.dut, beats)
    for st in steps:
        mv = st.get("mv")
        if mv is not None and "valid" in mv and not mv["valid"]:
            mv.update({"dot": 1, "nel": 3, "active": 1})   # an idle beat asking for the dot
    got = [v for v, _ in results(run_pe(bench, steps))]
    assert got == want, (f"seed={seed} mul_stages={mul_stages}: got {[hex(v) for v in got]} "
                         f"want {[hex(v) for v in want]}")


def test_pe_packed_inactive_row_passes(pe_bench, seed):
    """A packed beat with ``active = 0`` passes the addend unchanged, whatever its codes."""
    tl = TensorLayouts(SMALL)
    rng = np.random.default_rng([seed, 23])
    c = rand_fp32(rng, 20)
    beats = []
    for i in range(20):
        _ld(beats, {"valid": 1, "col": 0, "fmt": tl.fmt_index("fp8_e5m2"),
                    "code": int(rng.integers(0, 1 << 32))})
        beats.append({"mv": {"valid": 1, "active": 0, "first": 1, "dot": 1, "nel": 3,
                             "fmt": tl.fmt_index("fp8_e5m2"),
                             "code": int(rng.integers(0, 1 << 32))}, "c": c[i]})
    want = [int(v) if (int(v) & 0x7F800000) != 0x7F800000 or not int(v) & 0x7FFFFF
            else 0x7FC00000 for v in c]
    _check(pe_bench, beats, want, seed, "inactive packed")


@pytest.mark.parametrize("change,fp8,mx", [({"mx_block": 2}, 2, 0),
                                           ({"formats": ("bf16", "fp8_e4m3")}, 2, 0),
                                           ({"formats": ("fp32", "bf16")}, 0, 4),
                                           ({"formats": ("bf16",), "mx_formats": ()}, 0, 0),
                                           ({"packed_modes": False}, 0, 0)])
def test_packed_modes_follow_config(change, fp8, mx):
    """``fp8_pack`` / ``mx_pack`` follow the documented rules (an FP8 format and a 16-bit lane;
    MX, a 32-bit lane and ``mx_block % 4 == 0``), and the engine elaborates with either mode
    alone (the ``pk`` field exists only with a packed mode)."""
    from amaranth.hdl import Fragment
    from rtl.tensor.engine import TensorEngine
    cfg = SMALL.replace(**change, sparse_patterns=())
    assert (cfg.fp8_pack, cfg.mx_pack) == (fp8, mx)
    tl = TensorLayouts(cfg)
    assert ("pk" in {n for n, _ in tl.cmd}) == bool(fp8 or mx)
    assert tl.k_max == cfg.pe_rows * max(1, fp8, mx)
    Fragment.get(TensorEngine(cfg, use_instances=True), None)     # the top; PEs by name


def test_packed_modes_off_leaves_the_pe_as_before():
    """``packed_modes = False``: no dot unit, no ``dot``/``nel`` on the moving bus, the fused
    adder's term as wide as the multiplier's (48 bits), ``k`` up to ``pe_rows``."""
    from rtl.tensor.pe import PE
    on, off = PE.Signature(SMALL), PE.Signature(SMALL.replace(packed_modes=False))
    assert {"dot", "nel"} <= {n for n, _ in on.mv_layout}
    assert not {"dot", "nel"} & {n for n, _ in off.mv_layout}
    assert off.term_layout["sig"].width == 48 < on.term_layout["sig"].width
    assert (on.latency, on.row_skew) == (off.latency, off.row_skew)
    assert TensorLayouts(SMALL.replace(packed_modes=False)).k_max == SMALL.pe_rows


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_packed_dot_stages_checked():
    """``PackedDot(stages=...)`` takes 0..3 registers and says which field is wrong."""
    from rtl.tensor.dot import PackedDot
    assert [PackedDot(SMALL, stages=k).latency for k in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"stages must be in \[0, 3\], not 4"):
        PackedDot(SMALL, stages=4)
    with pytest.raises(TypeError, match="stages must be an int, not True"):
        PackedDot(SMALL, stages=True)
    # the half-built units of the errors live in reference cycles of their tracebacks: free
    # them here, where their unused-elaboratable warnings are ignored, not in a later test
    gc.collect()


def test_split_multiplier_alt_term_signature():
    """The split multiplier carries the dot unit's term through its own registers (``alt``):
    its output is wide enough for both terms, and a bad ``alt_layout`` or ``alt_at`` is
    rejected by name and range."""
    from rtl.fp.unpack import exact_layout
    from rtl.tensor.dot import PackedDot
    from rtl.tensor.pe import PE
    from rtl.tensor.splitmul import SplitMultiplier
    from amaranth.hdl import signed
    tl = TensorLayouts(SMALL)
    dot = PackedDot.Signature(SMALL)
    kw = dict(formats_a=tl.pe_formats, formats_b=tl.pe_formats, scaled=True)
    plain = SplitMultiplier.Signature(SMALL, **kw)
    sig = SplitMultiplier.Signature(SMALL, alt_layout=dot.layout, alt_at=0, **kw)
    assert sig.out_layout["sig"].width == max(plain.out_layout["sig"].width, dot.sig_width)
    assert sig.out_layout["exp"].width == max(plain.out_layout["exp"].width,
                                              dot.exp_shape.width)
    assert sig.prod_layout == plain.out_layout and "alt" in sig.members
    assert "alt" not in plain.members
    assert PE.Signature(SMALL).term_layout == sig.out_layout
    for cfg, at, lo in ((SMALL, -1, 0), (SMALL, SMALL.mul_stages + 1, 0),
                        (SMALL.replace(mul_stages=3), 0, 1)):
        with pytest.raises(ValueError, match=rf"alt_at must be in \[{lo}, {cfg.mul_stages}\]"):
            SplitMultiplier.Signature(cfg, alt_layout=dot.layout, alt_at=at, **kw)
    with pytest.raises(TypeError, match="alt_layout must be an rtl.fp.unpack.exact_layout"):
        SplitMultiplier.Signature(SMALL, alt_layout=signed(8), **kw)
    with pytest.raises(ValueError, match="alt_at must be in"):
        SplitMultiplier.Signature(SMALL, alt_layout=exact_layout(8, signed(10)), alt_at=True,
                                  **kw)


def _dot_expected(ca, cb, fa, fb, nel, adj, adj_nan):
    """The dot unit's term from golden's exact products and fractions: ``("nan",)``,
    ``("inf", sign)``, ``("zero", sign)`` or ``("num", sign, |sum|)``; the special and
    zero-sign rules are those of ``golden.tensor.packed_step``, without its rounding."""
    from fractions import Fraction
    q = mul_exact(np.array(ca[:nel + 1]), fa, np.array(cb[:nel + 1]), fb)
    nan = bool(adj_nan) or bool(np.isnan(q).any())
    pinf, ninf = bool((q == np.inf).any()), bool((q == -np.inf).any())
    if nan or (pinf and ninf):
        return ("nan",)
    if pinf or ninf:
        return ("inf", int(ninf))
    total = sum((Fraction(float(v)) for v in q), Fraction(0)) * Fraction(2) ** adj
    if total == 0:
        return ("zero", int(bool((q == 0).all() and (np.signbit(q)).all())))
    return ("num", int(total < 0), abs(total))


def test_packed_dot_exact_term(seed):
    """The dot unit alone (no registers) against exact fractions: its term is the exact sum of
    the active slots' products, every format pair of the small preset, every ``nel``, random
    codes (specials included) with a third of the steps holding cancelling pairs, random MX
    exponent adjustments and NaN scales. This checks the sum before any rounding: an error in
    its low bits that the fused adder's rounding would hide shows here."""
    from fractions import Fraction
    from amaranth.sim import Simulator
    from rtl.tensor.dot import PackedDot, dot_formats
    dut = PackedDot(SMALL)
    fm = dot_formats(TensorLayouts(SMALL))
    rng = np.random.default_rng([seed, 25])
    pairs = [(i, k) for i in fm for k in fm]
    fails = []

    async def tb(ctx):
        for it in range(40 * len(pairs)):
            ia, ib = pairs[it % len(pairs)]
            fa, fb = fm[ia], fm[ib]
            ca = [int(c) for c in rng.integers(0, 1 << fa.width, 4)]
            cb = [int(c) for c in rng.integers(0, 1 << fb.width, 4)]
            if it % 3 == 0:          # slot 1 cancels slot 0 (and slot 3 slot 2)
                ca[1], cb[1] = ca[0] ^ (1 << (fa.width - 1)), cb[0]
                ca[3], cb[3] = ca[2] ^ (1 << (fa.width - 1)), cb[2]
            nel = int(rng.integers(0, 4))
            adj = int(rng.integers(-254, 255)) if it % 2 else 0
            adj_nan = int(rng.random() < 0.02)
            ctx.set(dut.a, pack(ca, fa.width))
            ctx.set(dut.b, pack(cb, fb.width))
            ctx.set(dut.fmt_a, ia)
            ctx.set(dut.fmt_b, ib)
            ctx.set(dut.nel, nel)
            ctx.set(dut.adj, adj)
            ctx.set(dut.adj_nan, adj_nan)
            want = _dot_expected(ca, cb, fa, fb, nel, adj, adj_nan)
            o = {k: ctx.get(getattr(dut.o, k)) for k in ("sign", "sig", "exp", "is_zero",
                                                         "is_inf", "is_nan")}
            if o["is_nan"]:
                got = ("nan",)
            elif o["is_inf"]:
                got = ("inf", o["sign"])
            elif o["is_zero"]:
                got = ("zero", o["sign"])
            else:
                got = ("num", o["sign"], Fraction(o["sig"]) * Fraction(2) ** o["exp"])
            if got != want:
                fails.append((it, fa.name, fb.name, [hex(c) for c in ca], [hex(c) for c in cb],
                              nel, adj, adj_nan, got, want))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    assert not fails, f"seed={seed}: {len(fails)} wrong terms, first {fails[0]}"
