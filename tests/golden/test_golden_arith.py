# SPDX-License-Identifier: Apache-2.0
"""Exact multiplier, FP32 adder and fused MAC (contract §5) against numpy, Berkeley SoftFloat
(f32_add, f32_mulAdd) and exact fractions.Fraction arithmetic."""

import math
from fractions import Fraction

import ml_dtypes as md
import numpy as np
import pytest
import softfloatpy as sf

from golden.arith import add_fp32, fma_fp32, mul_exact
from golden.formats import FP32_QNAN, decode, decode_bits, f32_bits
from rtl.config import (BF16, FP4_E2M1, FP8_E4M3, FP8_E4M3FN, FP8_E5M2, FP16, FP32, TF32,
                        cfp8_format)

FMTS = [BF16, FP16, FP8_E5M2, FP8_E4M3, FP8_E4M3FN, FP4_E2M1, cfp8_format(3, 3),
        cfp8_format(5, 13), TF32, FP32]
ML = {BF16: md.bfloat16, FP16: np.float16, FP8_E5M2: md.float8_e5m2, FP8_E4M3: md.float8_e4m3,
      FP8_E4M3FN: md.float8_e4m3fn, FP4_E2M1: md.float4_e2m1fn}


def _sf_bits(f):
    return int.from_bytes(f.to_bytes(), "big")


def _F(u):
    return sf.Float32.from_bytes(int(u).to_bytes(4, "big"))


def rand_bits(rng, n):
    """FP32 bit patterns: uniform, subnormal-heavy, and exponents near 0."""
    k = n // 3
    u = rng.integers(0, 1 << 32, n - 2 * k, dtype=np.uint32)
    sub = (rng.integers(0, 1 << 24, k, dtype=np.uint32)
           | (rng.integers(0, 2, k, dtype=np.uint32) << 31))
    e = rng.integers(100, 154, k).astype(np.uint32) << 23
    mid = e | rng.integers(0, 1 << 23, k, dtype=np.uint32) | \
        (rng.integers(0, 2, k, dtype=np.uint32) << 31)
    return np.concatenate([u, sub, mid]).astype(np.uint32)


def rand_codes(rng, fmt, n):
    if fmt is FP32:
        return rand_bits(rng, n)
    return rng.integers(0, 1 << fmt.width, n).astype(np.uint32)


def frac(bits):
    """Exact Fraction of an FP32 bit pattern (finite)."""
    return Fraction(float(np.uint32(bits).view(np.float32)))


def frac_to_f32_bits(v, neg_zero=False):
    """RNE of a Fraction to FP32 bits (subnormals, overflow to Inf), written from IEEE 754."""
    if v == 0:
        return 0x80000000 if neg_zero else 0
    s = 0x80000000 if v < 0 else 0
    a = abs(v)
    E = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** E > a:
        E -= 1
    q = Fraction(2) ** (max(E, -126) - 23)
    I = math.floor(a / q)
    F = a / q - I
    if F > Fraction(1, 2) or (F == Fraction(1, 2) and I % 2):
        I += 1
    r = I * q
    if r >= Fraction(2) ** 128:
        return s | 0x7F800000
    return s | int(np.float32(float(r)).view(np.uint32))


# --- multiplier ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fa,fb", [(FP8_E4M3FN, FP8_E5M2), (FP8_E5M2, FP8_E5M2),
                                   (FP8_E4M3, FP8_E4M3FN), (FP4_E2M1, FP8_E4M3FN),
                                   (FP4_E2M1, FP4_E2M1)],
                         ids=lambda f: f.name)
def test_mul_exact_all_pairs(fa, fb):
    """Every code pair: product equals the float64 product of the ml_dtypes values; NaN rules."""
    a = np.repeat(np.arange(1 << fa.width, dtype=np.uint32), 1 << fb.width)
    b = np.tile(np.arange(1 << fb.width, dtype=np.uint32), 1 << fa.width)
    p = mul_exact(a, fa, b, fb)
    with np.errstate(invalid="ignore"):
        va = a.astype(np.uint8).view(ML[fa]).astype(np.float64)
        vb = b.astype(np.uint8).view(ML[fb]).astype(np.float64)
        want = va * vb
    nan = np.isnan(va) | np.isnan(vb) | (np.isinf(va) & (vb == 0)) | (np.isinf(vb) & (va == 0))
    assert np.array_equal(np.isnan(p), nan)
    ok = ~nan
    assert np.array_equal(p[ok], want[ok])
    assert np.array_equal(np.signbit(p[ok]), np.signbit(va[ok]) ^ np.signbit(vb[ok]))


@pytest.mark.parametrize("fmt", [BF16, FP16, TF32, FP32, cfp8_format(4, 9)], ids=lambda f: f.name)
def test_mul_exact_vs_fraction(fmt, seed):
    rng = np.random.default_rng(seed)
    a, b = rand_codes(rng, fmt, 3000), rand_codes(rng, fmt, 3000)
    p = mul_exact(a, fmt, b, fmt)
    va, vb = decode(a, fmt), decode(b, fmt)
    for i in range(a.size):
        if not (np.isfinite(va[i]) and np.isfinite(vb[i])):
            continue
        assert Fraction(float(p[i])) == Fraction(float(va[i])) * Fraction(float(vb[i])), \
            f"seed={seed} {fmt.name} {int(a[i]):#x}*{int(b[i]):#x}"


# --- FP32 adder --------------------------------------------------------------------------------------

def test_add_fp32_vs_numpy(seed):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        a, b = rand_bits(rng, 1_000_000), rand_bits(rng, 1_000_000)
        b[::7] = a[::7] ^ 0x80000000                                    # exact cancellation
        got = add_fp32(a, b)
        with np.errstate(invalid="ignore", over="ignore"):
            want = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
        nan = np.isnan(want.view(np.float32))
        assert np.array_equal(got[~nan], want[~nan]), f"seed={seed}"
        assert np.all(got[nan] == FP32_QNAN), f"seed={seed}"


def test_add_fp32_vs_softfloat(seed):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    rng = np.random.default_rng(seed)
    a, b = rand_bits(rng, 200_000), rand_bits(rng, 200_000)
    b[::5] = (a[::5] ^ 0x80000000) + rng.integers(0, 3, a[::5].size).astype(np.uint32)
    got = add_fp32(a, b)
    for i in range(a.size):
        r = sf.f32_add(_F(a[i]), _F(b[i]))
        if r.is_nan():
            assert got[i] == FP32_QNAN, f"seed={seed}"
        else:
            assert got[i] == _sf_bits(r), (f"seed={seed} {int(a[i]):#010x}+{int(b[i]):#010x}: "
                                           f"{int(got[i]):#010x} != {_sf_bits(r):#010x}")


def test_add_fp32_specials():
    P0, N0, PI, NI, N = 0, 0x80000000, 0x7F800000, 0xFF800000, 0xFFC00001
    one, m1, mx = 0x3F800000, 0xBF800000, 0x7F7FFFFF
    cases = [(P0, N0, P0), (N0, N0, N0), (P0, P0, P0), (one, m1, P0), (m1, one, P0),
             (PI, NI, FP32_QNAN), (PI, one, PI), (NI, NI, NI), (N, one, FP32_QNAN),
             (0x7F800001, one, FP32_QNAN), (mx, mx, PI), (mx, 0x73000000, PI),
             (mx, 0x72FFFFFF, mx), (0x00000001, 0x80000001, P0), (0x00000001, 0x00000001, 2)]
    a, b, want = (np.array(c, dtype=np.uint32) for c in zip(*cases))
    assert add_fp32(a, b).tolist() == want.tolist()


# --- fused MAC -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FMTS, ids=lambda f: f"{f.name}-b{f.bias}")
def test_fma_vs_softfloat(fmt, seed):
    """fma_fp32(c, a, b) == SoftFloat f32_mulAdd(a, b, c) with a, b widened to FP32."""
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    rng = np.random.default_rng(seed)
    n = 60_000
    a, b = rand_codes(rng, fmt, n), rand_codes(rng, fmt, n)
    ab, bb = decode_bits(a, fmt), decode_bits(b, fmt)
    c = rand_bits(rng, n)
    with np.errstate(all="ignore"):
        prod = (ab.view(np.float32).astype(np.float64) * bb.view(np.float32).astype(np.float64))
        # half of the accumulators cancel most of the product (tests the single rounding)
        near = (-prod).astype(np.float32).view(np.uint32)
    pick = rng.random(n) < 0.5
    c = np.where(pick, near + rng.integers(-2, 3, n).astype(np.uint32), c).astype(np.uint32)
    got = fma_fp32(c, a, fmt, b, fmt)
    for i in range(n):
        r = sf.f32_mul_add(_F(ab[i]), _F(bb[i]), _F(c[i]))
        if r.is_nan():
            assert got[i] == FP32_QNAN, f"seed={seed}"
        else:
            assert got[i] == _sf_bits(r), (
                f"seed={seed} {fmt.name} c={int(c[i]):#010x} a={int(a[i]):#x} b={int(b[i]):#x}: "
                f"{int(got[i]):#010x} != {_sf_bits(r):#010x}")


@pytest.mark.parametrize("fa,fb", [(FP8_E4M3FN, FP8_E5M2), (BF16, FP8_E4M3), (FP4_E2M1, FP16)],
                         ids=lambda f: f.name)
def test_fma_mixed_formats_vs_softfloat(fa, fb, seed):
    rng = np.random.default_rng(seed)
    n = 30_000
    a, b, c = rand_codes(rng, fa, n), rand_codes(rng, fb, n), rand_bits(rng, n)
    got = fma_fp32(c, a, fa, b, fb)
    ab, bb = decode_bits(a, fa), decode_bits(b, fb)
    for i in range(n):
        r = sf.f32_mul_add(_F(ab[i]), _F(bb[i]), _F(c[i]))
        want = FP32_QNAN if r.is_nan() else _sf_bits(r)
        assert got[i] == want, f"seed={seed} {fa.name}x{fb.name} case {i}"


def _hard_cases(rng, n):
    """(c, a, b) FP32 bit triples whose exact c + a*b is an FP32 midpoint, or within far less
    than one float64 ulp of one (so TwoSum's error term decides), plus exact cancellations."""
    cs, as_, bs = [], [], []
    for _ in range(n):
        kind = rng.integers(0, 6)
        e = int(rng.integers(-140, 120))
        m = int(rng.integers(1 << 23, 1 << 24))
        r = Fraction(m) * Fraction(2) ** (e - 23)                     # an FP32 value r
        if e < -126:                                                  # make r a valid subnormal
            r = Fraction(int(rng.integers(1, 1 << 23))) * Fraction(2) ** -149
        ulp = Fraction(2) ** (max(e, -126) - 23) if e >= -126 else Fraction(2) ** -149
        half = ulp / 2                                                # a power of two
        sgn = 1 if rng.random() < 0.5 else -1
        c = sgn * r
        if kind == 0:      # exact tie: a = half, b = 1
            a, b = half * sgn, Fraction(1)
        elif kind == 1:    # tie minus 2**-46 relative: a = half (1 + 2**-23), b = 1 - 2**-23
            a, b = half * (1 + Fraction(1, 2 ** 23)) * sgn, 1 - Fraction(1, 2 ** 23)
        elif kind == 2:    # tie plus 2**-46 relative: a = half (1 + 2**-23), b = 1 + 2**-23
            a, b = half * (1 + Fraction(1, 2 ** 23)) * sgn, 1 + Fraction(1, 2 ** 23)
        elif kind == 3:    # negative product towards the tie below
            a, b = -half * (1 + Fraction(1, 2 ** 23)) * sgn, 1 - Fraction(1, 2 ** 23)
        elif kind == 4:    # exact cancellation -> +0
            a, b = -c, Fraction(1)
        else:              # large product, tiny accumulator just off a tie
            a = Fraction(int(rng.integers(1 << 23, 1 << 24))) * Fraction(2) ** int(
                rng.integers(-30, 30))
            b = Fraction(1)
            c = sgn * Fraction(2) ** int(rng.integers(-149, -60))
        if half < Fraction(2) ** -149 or abs(a) < Fraction(2) ** -149 * (2 ** 23 + 1) \
                and kind in (1, 2, 3):
            a, b = sgn * Fraction(2) ** -149, Fraction(1)
        cs.append(c)
        as_.append(a)
        bs.append(b)
    to_bits = [lambda v: int(np.float32(float(v)).view(np.uint32))] * 3
    C = np.array([to_bits[0](v) for v in cs], dtype=np.uint32)
    A = np.array([to_bits[1](v) for v in as_], dtype=np.uint32)
    B = np.array([to_bits[2](v) for v in bs], dtype=np.uint32)
    return C, A, B


def _frac_part(v):
    """Fractional part of |v| in units of its FP32 quantum (1/2 = exact tie)."""
    a = abs(v)
    E = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** E > a:
        E -= 1
    q = Fraction(2) ** (max(E, -126) - 23)
    return a / q - math.floor(a / q)


def test_fma_hard_ties_vs_fraction(seed):
    rng = np.random.default_rng(seed)
    C, A, B = _hard_cases(rng, 4000)
    got = fma_fp32(C, A, FP32, B, FP32)
    n_tie = n_near = 0
    for i in range(C.size):
        fc, fa, fb = frac(C[i]), frac(A[i]), frac(B[i])
        exact = fc + fa * fb
        neg_zero = (C[i] == 0x80000000) and ((A[i] ^ B[i]) >> 31) and (fa * fb == 0)
        want = frac_to_f32_bits(exact, neg_zero)
        if exact != 0:
            F = _frac_part(exact)
            n_tie += F == Fraction(1, 2)
            n_near += F != Fraction(1, 2) and abs(F - Fraction(1, 2)) < Fraction(1, 2 ** 30)
        assert got[i] == want, (f"seed={seed} case {i}: c={int(C[i]):#010x} a={int(A[i]):#010x} "
                                f"b={int(B[i]):#010x}: {int(got[i]):#010x} != {want:#010x}")
    assert n_tie > 400 and n_near > 800, f"seed={seed}: only {n_tie} ties, {n_near} near-ties"


def test_fma_specials():
    P0, N0, PI, NI = 0, 0x80000000, 0x7F800000, 0xFF800000
    one, m1, mx, two = 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0x40000000
    # (c, a, b, want) with a, b FP32 codes
    cases = [
        (P0, N0, one, P0), (N0, N0, one, N0), (N0, P0, one, P0), (N0, N0, m1, P0),
        (N0, P0, m1, N0), (one, m1, one, P0), (m1, one, one, P0), (P0, PI, P0, FP32_QNAN),
        (one, N0, NI, FP32_QNAN), (PI, m1, PI, FP32_QNAN), (NI, one, NI, NI),
        (0x7FC00001, one, one, FP32_QNAN), (one, 0xFFFFFFFF, one, FP32_QNAN),
        (mx, mx, two, PI), (mx, two, 0x73000000, PI), (NI, mx, mx, NI),
        (0x00000001, 0x00000001, 0x3F000000, 0x00000002),     # 2**-149 + 2**-150 -> tie, even
        (0x00000003, 0x00000001, 0x3F000000, 0x00000004),     # 3*2**-149 + 2**-150 -> 4
    ]
    c, a, b, want = (np.array(v, dtype=np.uint32) for v in zip(*cases))
    got = fma_fp32(c, a, FP32, b, FP32)
    assert got.tolist() == want.tolist(), [hex(int(g)) for g in got]


def test_fma_fp8_products_with_fp32_accumulator():
    """Known answers at 2**24 (FP32 spacing 2): 2**24 + 1*1 is a tie -> even 2**24;
    (2**24 + 2) + 1*1 is a tie -> even 2**24 + 4; 2**24 + 1.125*1 -> 2**24 + 2."""
    c = f32_bits(np.array([2.0 ** 24, 2.0 ** 24 + 2, 2.0 ** 24], dtype=np.float32))
    a = np.array([0x38, 0x38, 0x39], dtype=np.uint8)          # 1.0, 1.0, 1.125 in e4m3fn
    b = np.array([0x38, 0x38, 0x38], dtype=np.uint8)          # 1.0
    got = fma_fp32(c, a, FP8_E4M3FN, b, FP8_E4M3FN).view(np.float32)
    assert got.tolist() == [2.0 ** 24, 2.0 ** 24 + 4, 2.0 ** 24 + 2]
