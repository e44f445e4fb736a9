# SPDX-License-Identifier: Apache-2.0
"""XORWOW PRNG (contract §4) and stochastic rounding (contract §3)."""

import math
from fractions import Fraction

import numpy as np
import pytest

from golden.formats import convert_rne, convert_sr, convert_sr_bits, decode, f32_bits
from golden.prng import (XorWow, XorWowLanes, convert_sr_stream, xorwow_lane_state,
                         xorwow_lane_states)
from rtl.config import (BF16, DEFAULT, FP4_E2M1, FP8_E4M3, FP8_E4M3FN, FP8_E5M2, FP16, TF32,
                        cfp8_format)

SR_FORMATS = [BF16, FP16, FP8_E5M2, FP8_E4M3, FP8_E4M3FN, FP4_E2M1, cfp8_format(3, 3),
              cfp8_format(4, 9), TF32]
SR_IDS = [f"{f.name}-b{f.bias}" for f in SR_FORMATS]


# --- an independent XORWOW written straight from the contract text -------------------------------

def naive_xorwow(seed, lane, n):
    M = 2 ** 32
    h = (seed + lane * 0x9E3779B9) % M
    h ^= h >> 16
    h = (h * 0x85EBCA6B) % M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) % M
    h ^= h >> 16
    x, y, z, w, v, d = h ^ 123456789, 362436069, 521288629, 88675123, 5783321, 6615241
    out = []
    for _ in range(n):
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = ((v ^ (v << 4)) ^ (t ^ (t << 1))) % M
        d = (d + 362437) % M
        out.append((v + d) % M)
    return out


def test_fmix32_known_answers():
    # MurmurHash3 fmix32 reference values (from the C reference implementation)
    from golden.prng import fmix32
    assert fmix32(0) == 0
    assert fmix32(1) == 0x514E28B7
    assert fmix32(0xFFFFFFFF) == 0x81F16F39


@pytest.mark.parametrize("seed,lane", [(DEFAULT.sr_seed, 0), (DEFAULT.sr_seed, 1),
                                       (DEFAULT.sr_seed, 127), (1, 0), (0xFFFFFFFF, 5)])
def test_xorwow_known_answer(seed, lane):
    want = naive_xorwow(seed, lane, 5000)
    g = XorWow(seed, lane)
    assert [g.next() for _ in range(20)] == want[:20]
    assert XorWow(seed, lane).next_n(5000).tolist() == want
    s = xorwow_lane_state(seed, lane)
    assert s[1:] == (362436069, 521288629, 88675123, 5783321, 6615241)


def test_xorwow_next_n_long_matches_next(seed):
    s = seed & 0xFFFFFFFF
    a, b = XorWow(s, 3), XorWow(s, 3)
    n = 250_007                                 # not a multiple of the chunking
    fast = a.next_n(n)
    slow = naive_xorwow(s, 3, n)
    assert fast.tolist() == slow, f"seed={seed}"
    b.jump(n)
    assert a.state == b.state, f"seed={seed}"
    assert a.next() == b.next()


def test_xorwow_lanes_and_reset():
    lanes = XorWowLanes(DEFAULT.sr_seed, 16)
    out = lanes.next_n(50)
    for k in range(16):
        assert out[:, k].tolist() == naive_xorwow(DEFAULT.sr_seed, k, 50)
    st = xorwow_lane_states(DEFAULT.sr_seed, [0, 7])
    assert tuple(int(v) for v in st[1]) == xorwow_lane_state(DEFAULT.sr_seed, 7)
    lanes.reset()
    assert np.array_equal(lanes.next(), out[0])
    g = XorWow(9, 2)
    first = g.next_n(10)
    g.reset()
    assert np.array_equal(g.next_n(10), first)


def test_xorwow_bad_args():
    with pytest.raises(ValueError, match=r"seed must be in \[0, 4294967295\]"):
        XorWow(1 << 32)
    with pytest.raises(ValueError, match="lane must be a non-negative integer"):
        XorWow(1, -1)


# --- SR: exact reference from the contract text ----------------------------------------------------

def _frac_parts(xbits, fmt):
    """(|x| as Fraction, quantum q) for a finite nonzero FP32 bit pattern."""
    ex, man = (xbits >> 23) & 0xFF, xbits & 0x7FFFFF
    a = (Fraction(man) if ex == 0 else Fraction((1 << 23) | man)) * \
        Fraction(2) ** ((-149) if ex == 0 else (ex - 150))
    E = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** E > a:
        E -= 1
    return a, Fraction(2) ** (max(E, fmt.emin) - fmt.man_bits)


def _frac_sr(xbits, fmt, r):
    """§3 SR with Fractions for one FP32 bit pattern and PRNG word ``r``; returns the code."""
    xbits = int(xbits)
    s = xbits >> 31
    sgn = s << (fmt.width - 1)
    ex, man = (xbits >> 23) & 0xFF, xbits & 0x7FFFFF
    if ex == 0xFF and man:
        return 0 if fmt.specials == "none" else sgn | fmt.nan_code
    if ex == 0xFF:
        return sgn | (fmt.inf_code if fmt.overflow == "inf" else fmt.max_finite_code)
    if ex == 0 and man == 0:
        return sgn
    a, q = _frac_parts(xbits, fmt)
    I = math.floor(a / q)
    F = a / q - I
    v = (I + (math.floor(F * 2 ** 32) + r >= 2 ** 32)) * q
    if v > Fraction(fmt.max_finite):
        return sgn | (fmt.inf_code if fmt.overflow == "inf" else fmt.max_finite_code)
    # encode v by searching the code whose decoded value equals v (independent of the encoder)
    return sgn | _value_to_code(fmt)[v]


_V2C = {}


def _value_to_code(fmt):
    if fmt not in _V2C:
        codes = np.arange(fmt.max_finite_code + 1, dtype=np.uint32)
        _V2C[fmt] = {Fraction(float(v)): int(c) for c, v in zip(codes, decode(codes, fmt))}
    return _V2C[fmt]


def _inputs(rng, n, fmt):
    lo = max(fmt.emin - fmt.man_bits - 3, -149)
    hi = min(fmt.emax + 1, 127)
    e = rng.integers(lo, hi + 1, n)
    m = rng.integers(0, 1 << 23, n)
    s = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    with np.errstate(over="ignore"):
        return (s * np.ldexp(1.0 + m / 2.0 ** 23, e)).astype(np.float32)


@pytest.mark.parametrize("fmt", [f for f in SR_FORMATS if f is not TF32],
                         ids=[i for f, i in zip(SR_FORMATS, SR_IDS) if f is not TF32])
def test_sr_vs_fraction(fmt, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([_inputs(rng, 2000, fmt),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fmt.max_finite],
                                 dtype=np.float32)])
    r = rng.integers(0, 1 << 32, x.size, dtype=np.uint32)
    bits = f32_bits(x)
    # a third of the R values sit exactly on the decision edge: 2**32 - F32 (up) or one less
    edge = rng.random(x.size) < 0.33
    for i in np.nonzero(edge & np.isfinite(x) & (x != 0))[0]:
        a, q = _frac_parts(int(bits[i]), fmt)
        f32 = math.floor((a / q - math.floor(a / q)) * 2 ** 32)
        r[i] = min(2 ** 32 - f32 - int(rng.integers(0, 2)), 2 ** 32 - 1)
    mine = convert_sr(x, fmt, r)
    for i in range(x.size):
        ri = int(r[i])
        want = _frac_sr(bits[i], fmt, ri)
        assert int(mine[i]) == want, (f"seed={seed} {fmt.name} x={x[i]!r} R={ri:#x}: "
                                      f"{int(mine[i]):#x} != {want:#x}")


def test_sr_threshold_exact():
    """R = 2**32 - F32 rounds up, R = 2**32 - F32 - 1 rounds down (bf16, x = 1 + 2**-9 + 2**-23:
    F = (2**-9 + 2**-23) / 2**-7 = 0.25 + 2**-16, F32 = 2**30 + 2**16)."""
    x = np.array([1.0 + 2.0 ** -9 + 2.0 ** -23] * 2, dtype=np.float32)
    f32 = 2 ** 30 + 2 ** 16
    r = np.array([2 ** 32 - f32, 2 ** 32 - f32 - 1], dtype=np.uint32)
    assert convert_sr(x, BF16, r).tolist() == [0x3F81, 0x3F80]
    assert convert_sr(-x, BF16, r).tolist() == [0xBF81, 0xBF80]
    # tiny value far below the quantum: F32 truncates to 0 -> never rounds up
    t = np.array([2.0 ** -149], dtype=np.float32)
    assert convert_sr(t, FP8_E4M3FN, np.array([0xFFFFFFFF], np.uint32)).tolist() == [0]
    # F32 = 1: rounds up only for R = 2**32 - 1
    t = np.array([2.0 ** -41] * 2, dtype=np.float32)             # 2**-41 / 2**-9 = 2**-32
    assert convert_sr(t, FP8_E4M3FN, np.array([0xFFFFFFFF, 0xFFFFFFFE], np.uint32)).tolist() \
        == [1, 0]


@pytest.mark.parametrize("fmt", SR_FORMATS, ids=SR_IDS)
def test_sr_neighbours_and_exact(fmt, seed):
    """SR only ever gives the RNE result's two bracketing neighbours; exact values never move."""
    rng = np.random.default_rng(seed)
    x = _inputs(rng, 200_000, fmt)
    x = x[np.abs(x.astype(np.float64)) <= fmt.max_finite]
    r = rng.integers(0, 1 << 32, x.size, dtype=np.uint32)
    v = decode(convert_sr(x, fmt, r), fmt).astype(np.float64)
    down = decode(convert_sr(x, fmt, np.zeros_like(r)), fmt).astype(np.float64)     # truncate
    up = decode(convert_sr(x, fmt, np.full_like(r, 0xFFFFFFFF)), fmt).astype(np.float64)
    xd = x.astype(np.float64)
    assert np.all(np.abs(down) <= np.abs(xd)) and np.all(np.abs(up) >= np.abs(xd)), f"seed={seed}"
    assert np.all((v == down) | (v == up)), f"seed={seed}"
    rne = decode(convert_rne(x, fmt), fmt).astype(np.float64)
    assert np.all((rne == down) | (rne == up)), f"seed={seed}"
    exact = down == xd
    assert np.all(up[exact] == xd[exact]) and np.all(v[exact] == xd[exact]), f"seed={seed}"
    # exactly representable inputs are fixed points for every R
    codes = np.arange(fmt.max_finite_code + 1, dtype=np.uint32) if fmt.width <= 16 else \
        rng.integers(0, fmt.max_finite_code + 1, 100_000).astype(np.uint32)
    vals = decode(codes, fmt)
    rr = rng.integers(0, 1 << 32, codes.size, dtype=np.uint32)
    assert np.array_equal(convert_sr(vals, fmt, rr), codes), f"seed={seed}"


@pytest.mark.parametrize("fmt,x", [(BF16, 1.0 + 2.0 ** -9), (BF16, -5.3 * 2.0 ** -133),
                                   (FP16, 1000.3), (FP8_E5M2, 0.3), (FP8_E4M3FN, 0.07),
                                   (FP8_E4M3FN, 2.0 ** -12), (FP4_E2M1, 2.6), (FP4_E2M1, -0.2),
                                   (FP8_E4M3, 239.0)])
def test_sr_unbiased(fmt, x, seed):
    """Mean of (SR(x) - x) over N = 400k PRNG draws is zero: z = mean / (sigma / sqrt(N)),
    sigma**2 = ulp**2 * F * (1 - F); |z| < 5 (false-alarm probability < 6e-7)."""
    n = 400_000
    xs = np.full(n, x, dtype=np.float32)
    codes = convert_sr_stream(xs, fmt, seed & 0xFFFFFFFF or 1, lane=seed % 128)
    v = decode(codes, fmt).astype(np.float64)
    xd = float(np.float32(x))
    lo, hi = v.min(), v.max()
    assert lo < xd < hi, f"seed={seed}: both neighbours must occur ({lo}, {hi})"
    ulp = hi - lo
    F = (abs(xd) - min(abs(lo), abs(hi))) / ulp
    sigma = ulp * math.sqrt(F * (1 - F))
    z = (v - xd).mean() / (sigma / math.sqrt(n))
    assert abs(z) < 5, f"seed={seed} {fmt.name} x={x}: z={z:.2f}"
    # fraction of round-ups matches F
    p_up = np.mean(np.abs(v) == max(abs(lo), abs(hi)))
    assert abs(p_up - F) < 5 * math.sqrt(F * (1 - F) / n), f"seed={seed}: {p_up} vs {F}"


def test_sr_reproducible_and_seed_dependent(seed):
    rng = np.random.default_rng(seed)
    x = _inputs(rng, 50_000, BF16)
    s = seed & 0xFFFFFFFF or 1
    a = convert_sr_stream(x, BF16, s, lane=0)
    b = convert_sr_stream(x, BF16, s, lane=0)
    c = convert_sr_stream(x, BF16, s ^ 1, lane=0)
    d = convert_sr_stream(x, BF16, s, lane=1)
    assert np.array_equal(a, b), f"seed={seed}"
    assert not np.array_equal(a, c) and not np.array_equal(a, d), f"seed={seed}"
    assert (a != c).mean() > 0.2, f"seed={seed}"


def test_sr_prng_advances_once_per_element():
    """One draw per element, specials included: element i uses output i of the lane."""
    x = np.array([np.nan, 0.0, np.inf, 1.0 + 2.0 ** -9, -0.0, 1.0 + 2.0 ** -9] * 100,
                 dtype=np.float32)
    g = XorWow(DEFAULT.sr_seed, 2)
    got = convert_sr_stream(x, BF16, g)
    r = np.array(naive_xorwow(DEFAULT.sr_seed, 2, x.size), dtype=np.uint32)
    assert np.array_equal(got, convert_sr(x, BF16, r))
    h = XorWow(DEFAULT.sr_seed, 2)
    h.jump(x.size)
    assert g.state == h.state
    # SR with 2-D input draws in C order
    x2 = x.reshape(20, 30)
    assert np.array_equal(convert_sr_stream(x2, BF16, DEFAULT.sr_seed, 2).reshape(-1), got)


def test_sr_rand_checks():
    x = np.ones(3, dtype=np.float32)
    with pytest.raises(ValueError, match="rand must have the shape of x"):
        convert_sr(x, BF16, np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match=r"rand must be in \[0, 4294967295\]"):
        convert_sr_bits(f32_bits(x), BF16, np.array([0, 0, 1 << 32]))
