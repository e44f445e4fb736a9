# SPDX-License-Identifier: Apache-2.0
"""Golden model of the packed modes (issue 13): double-rate FP8 (``matmul_fp8x2``) and x4 MX
(``matmul_mx_x4``), docs/tensor-engine.md "Packed modes".

Independent reference: ``ref_packed_chain``, the contract in scalar Python: element values from
``ref_decode`` (numpy / ml_dtypes), the exact ``p + sum of P products`` with
``fractions.Fraction`` and the RNE-to-FP32 ``rne_f32_bits`` of tests/golden/test_tensor.py.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from golden.tensor import (FP32_NEG_ZERO, PsumModel, matmul, matmul_fp8x2, matmul_mx_x4,
                           packed_step, round_fp32_exact)
from rtl.config import FORMATS, MX_FORMAT_NAMES, PRESETS
from tests.golden.test_tensor import (QNAN, ref_decode, random_codes_with_specials,
                                      random_finite_codes, rne_f32_bits)


def bits_val(b):
    return float(np.uint32(b).view(np.float32))


def hexdiff(got, want):
    bad = np.argwhere(got != want)
    m, n = bad[0]
    return (f"{len(bad)} mismatches, first at [{m},{n}]: got {int(got[m, n]):#010x} "
            f"want {int(want[m, n]):#010x}")


def ref_mx_values(codes, scales, elem, block):
    """Exact float64 scaled element values, decoded without golden (NaN scale -> NaN)."""
    v = ref_decode(codes, elem)
    sc = np.array([[math.nan if s == 0xFF else 2.0 ** (int(s) - 127) for s in row]
                   for row in scales])
    return v * np.repeat(sc, block, axis=0)[:len(v)]


def ref_step(p_bits, prods):
    """RNE_fp32(p + sum(prods)) with the sum exact; ``prods`` exact Python floats."""
    p = bits_val(p_bits)
    vals = [p, *prods]
    if any(math.isnan(v) for v in vals):
        return QNAN
    infs = {math.copysign(1.0, v) for v in vals if math.isinf(v)}
    if len(infs) == 2:
        return QNAN
    if infs:
        return 0x7F800000 if infs == {1.0} else 0xFF800000
    exact = sum((Fraction(v) for v in vals), Fraction(0))
    if exact == 0:
        all_neg_zero = all(v == 0 and math.copysign(1.0, v) < 0 for v in vals)
        return 0x80000000 if all_neg_zero else 0
    return rne_f32_bits(exact)


def ref_products(a, b):
    """Exact products of two float values (NaN for 0 * Inf), as a Python float."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if (math.isinf(a) and b == 0) or (math.isinf(b) and a == 0):
        return math.nan
    return a * b        # exact: at most 8 significant bits, well inside float64's range


def ref_packed_chain(sv, xv, P):
    """The packed chain: row r adds elements P*r .. P*r + P - 1 exactly, rounds once."""
    K, M = sv.shape
    N = xv.shape[1]
    out = np.empty((M, N), dtype=np.uint32)
    for m in range(M):
        for n in range(N):
            p = FP32_NEG_ZERO
            for r in range(0, K, P):
                p = ref_step(p, [ref_products(float(sv[k, m]), float(xv[k, n]))
                                 for k in range(r, min(K, r + P))])
            out[m, n] = p
    return out


FP8 = ("fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8")


def fp8_cfgs():
    return [PRESETS["small"], PRESETS["default"],
            PRESETS["small"].replace(cfp8_exp_bits=5, cfp8_bias=-20)]


@pytest.mark.parametrize("ci", range(3))
def test_fp8x2_every_pair_bit_exact_vs_fraction(seed, ci):
    cfg = fp8_cfgs()[ci]
    rng = np.random.default_rng(seed)
    P = cfg.fp8_pack
    assert P == 2
    for fs in FP8:
        for fx in FP8:
            f_s, f_x = cfg.fmt(fs), cfg.fmt(fx)
            K = int(rng.choice([1, 2, 3, P * cfg.pe_rows, rng.integers(1, P * cfg.pe_rows + 1)]))
            M, N = int(rng.integers(1, cfg.pe_cols + 1)), int(rng.integers(1, 6))
            gen = random_codes_with_specials if rng.random() < 0.5 else random_finite_codes
            s = gen(rng, f_s, (K, M))
            x = gen(rng, f_x, (K, N))
            got = matmul_fp8x2(s, fs, x, fx, cfg)
            want = ref_packed_chain(ref_decode(s, f_s), ref_decode(x, f_x), P)
            assert np.array_equal(got, want), f"seed={seed} {cfg.name} {fs}x{fx} K={K}: " \
                + hexdiff(got, want)


def test_fp8x2_cancellation_and_wide_spans():
    """Two products far apart that cancel the partial sum: only an exact sum gets these."""
    cfg = PRESETS["small"]
    e = FORMATS["fp8_e5m2"]
    big, tiny = 0x7B, 0x01               # 57344 and 2**-16 (the e5m2 extremes)
    nbig = big | 0x80
    # p = big*big, then step 2: tiny*tiny - big*big -> exactly 2**-32
    s = np.array([[big], [0x3C], [tiny], [nbig]], np.uint8)      # 0x3C = 1.0
    x = np.array([[big], [0x00], [tiny], [big]], np.uint8)
    got = matmul_fp8x2(s, "fp8_e5m2", x, "fp8_e5m2", cfg)
    assert got[0, 0] == 0x2F800000, hex(int(got[0, 0]))           # 2**-32
    want = ref_packed_chain(ref_decode(s, e), ref_decode(x, e), 2)
    assert got[0, 0] == want[0, 0]
    # the unpacked chain rounds twice and loses the 2**-32 against 57344**2
    assert matmul(s, "fp8_e5m2", x, "fp8_e5m2", cfg)[0, 0] != got[0, 0]


def test_packed_step_signed_zeros_and_specials():
    nz, pz = FP32_NEG_ZERO, 0
    assert packed_step(nz, -0.0, -0.0) == nz
    assert packed_step(nz, -0.0, 0.0) == pz
    assert packed_step(pz, -0.0, -0.0) == pz
    assert packed_step(nz, 1.0, -1.0) == pz              # exact cancellation is +0
    assert packed_step(nz, math.inf, -math.inf) == QNAN
    assert packed_step(0x7F800000, -math.inf) == QNAN
    assert packed_step(nz, math.inf, 1.0) == 0x7F800000
    assert packed_step(nz, math.nan, math.inf) == QNAN
    assert packed_step(0x3F800000) == 0x3F800000          # no products: p unchanged


def test_round_fp32_exact_matches_numpy(seed):
    """The golden's integer rounding against numpy's float64 -> float32 cast, on values that
    are exact in float64 (normal, subnormal, ties, overflow)."""
    rng = np.random.default_rng(seed)
    for _ in range(3000):
        sig = int(rng.integers(1, 1 << 53)) * (1 if rng.random() < 0.5 else -1)
        exp = int(rng.integers(-200, 90))
        v = math.ldexp(sig, exp)
        with np.errstate(over="ignore"):
            want = int(np.float64(v).astype(np.float32).view(np.uint32))
        assert round_fp32_exact(sig, exp) == want, f"seed={seed} {sig}*2**{exp}"


def test_packed_p1_equals_the_dense_chain(seed):
    """P = 1 (one product a step) must give the dense golden's bits: two implementations of the
    same rounding (round-to-odd float64 vs the exact integer sum)."""
    from golden.arith import mul_exact
    step = np.frompyfunc(packed_step, 2, 1)
    cfg = PRESETS["small"]
    rng = np.random.default_rng(seed)
    for fs, fx in [("fp32", "fp32"), ("bf16", "fp8_e5m2"), ("fp16", "fp16")]:
        f_s, f_x = cfg.fmt(fs), cfg.fmt(fx)
        s = random_codes_with_specials(rng, f_s, (4, 4))
        x = random_codes_with_specials(rng, f_x, (4, 6))
        p = np.full((4, 6), FP32_NEG_ZERO, dtype=np.uint32)
        for k in range(4):
            p = step(p, mul_exact(s[k][:, None], f_s, x[k][None, :], f_x)).astype(np.uint32)
        assert np.array_equal(p, matmul(s, fs, x, fx, cfg)), f"seed={seed}"


def mx_cfgs():
    return [PRESETS["small"], PRESETS["default"], PRESETS["default"].replace(mx_block=8),
            PRESETS["small"].replace(mx_block=4)]


@pytest.mark.parametrize("ci", range(4))
def test_mx_x4_every_pair_bit_exact_vs_fraction(seed, ci):
    cfg = mx_cfgs()[ci]
    rng = np.random.default_rng(seed)
    P, blk = cfg.mx_pack, cfg.mx_block
    assert P == 4
    for sf in cfg.mx_formats:
        for xf in cfg.mx_formats:
            es, ex = FORMATS[MX_FORMAT_NAMES[sf]], FORMATS[MX_FORMAT_NAMES[xf]]
            K = int(rng.choice([1, 3, 5, P * cfg.pe_rows, rng.integers(1, P * cfg.pe_rows + 1)]))
            nb = -(-K // blk)
            M, N = int(rng.integers(1, cfg.pe_cols + 1)), int(rng.integers(1, 5))
            gen = random_codes_with_specials if rng.random() < 0.5 else random_finite_codes
            s = gen(rng, es, (K, M))
            x = gen(rng, ex, (K, N))
            lo, hi = (0, 255) if rng.random() < 0.3 else (110, 145)
            ss = rng.integers(lo, hi, (nb, M), dtype=np.uint8)
            xs = rng.integers(lo, hi, (nb, N), dtype=np.uint8)
            got = matmul_mx_x4(s, ss, sf, x, xs, xf, cfg)
            want = ref_packed_chain(ref_mx_values(s, ss, es, blk),
                                    ref_mx_values(x, xs, ex, blk), P)
            assert np.array_equal(got, want), f"seed={seed} {cfg.name} blk={blk} {sf}x{xf} " \
                f"K={K}: " + hexdiff(got, want)


def test_mx_x4_nan_scale_and_zero_elements():
    cfg = PRESETS["small"]
    z = np.zeros((4, 1), np.uint8)
    got = matmul_mx_x4(z, np.array([[0xFF]], np.uint8), "mxfp4", z,
                       np.array([[127]], np.uint8), "mxfp4", cfg)
    assert got[0, 0] == QNAN


def test_packed_rejects(seed):
    cfg = PRESETS["small"]
    s = np.zeros((9, 1), np.uint8)
    with pytest.raises(ValueError, match=r"stationary_codes K \(axis 0\) must be in \[1, 8\]"):
        matmul_fp8x2(s, "fp8_e5m2", s, "fp8_e5m2", cfg)
    with pytest.raises(ValueError, match="8-bit format"):
        matmul_fp8x2(s[:2].astype(np.uint16), "bf16", s[:2], "fp8_e5m2", cfg)
    with pytest.raises(ValueError, match="not available"):
        matmul_fp8x2(s[:2], "fp8_e5m2", s[:2], "fp8_e5m2", PRESETS["fp8_only"])
    with pytest.raises(ValueError, match=r"s_codes K \(axis 0\) must be in \[1, 16\]"):
        z = np.zeros((17, 1), np.uint8)
        matmul_mx_x4(z, np.zeros((1, 1), np.uint8), "mxfp4", z, np.zeros((1, 1), np.uint8),
                     "mxfp4", cfg)
    with pytest.raises(ValueError, match="not available"):
        z = np.zeros((2, 1), np.uint8)
        matmul_mx_x4(z, np.zeros((1, 1), np.uint8), "mxfp4", z, np.zeros((1, 1), np.uint8),
                     "mxfp4", cfg.replace(mx_block=2))
    m = PsumModel(cfg)
    before = m.state.copy()
    with pytest.raises(ValueError):
        m.matmul_fp8x2(0, False, s, "fp8_e5m2", s, "fp8_e5m2")
    assert np.array_equal(m.state, before)
