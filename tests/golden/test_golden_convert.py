# SPDX-License-Identifier: Apache-2.0
"""golden.formats.convert_rne (FP32 -> narrower, RNE) against ml_dtypes, numpy float16, Berkeley
SoftFloat and an exact fractions.Fraction implementation of contract §3.

Documented differences (contract §7) are asserted *as differences*: e4m3fn overflow/Inf saturate
here (NaN in ml_dtypes), e2m1 NaN -> +0 here (-0 for +NaN in ml_dtypes), NaN payloads dropped.
"""

import math
from fractions import Fraction

import ml_dtypes as md
import numpy as np
import pytest
import softfloatpy as sf

from golden.formats import (FP32_QNAN, convert_rne, convert_rne_bits, decode, f32_bits,
                            is_nan_code)
from rtl.config import (BF16, FP4_E2M1, FP8_E4M3, FP8_E4M3FN, FP8_E5M2, FP16, FP32, TF32,
                        cfp8_format)

REFS = [
    (BF16, md.bfloat16), (FP16, np.float16), (FP8_E5M2, md.float8_e5m2),
    (FP8_E4M3, md.float8_e4m3), (FP8_E4M3FN, md.float8_e4m3fn), (FP4_E2M1, md.float4_e2m1fn),
    (cfp8_format(3, 3), md.float8_e3m4),
]
IDS = [f.name + ("" if f.name != "cfp8" else "_e3m4") for f, _ in REFS]
CFP8_STD = {3: (md.float8_e3m4, 3), 4: (md.float8_e4m3, 7), 5: (md.float8_e5m2, 15)}
N_FAST = 10_000_000
N_FULL = 100_000_000
CHUNK = 1_000_000


# --- reference helpers -------------------------------------------------------------------------

def ref_codes(x, dtype):
    with np.errstate(invalid="ignore", over="ignore"):
        r = x.astype(dtype)
    return r.view(np.uint16 if r.dtype.itemsize == 2 else np.uint8).astype(np.uint32)


def check_vs_ref(x, fmt, dtype, what):
    """convert_rne(x) == reference codes except for the documented differences.

    Returns the number of elements in each documented difference class."""
    mine = convert_rne(x, fmt).astype(np.uint32)
    ref = ref_codes(x, dtype)
    w = fmt.width
    sign = np.signbit(x).astype(np.uint32) << (w - 1)
    nan_in = np.isnan(x)
    counts = {"nan": int(nan_in.sum())}
    # NaN: canonical code with the sign kept (IEEE / fn); +0 for e2m1
    if fmt.specials == "none":
        assert np.all(mine[nan_in] == 0), f"{what}: e2m1 NaN must give +0"
        # documented difference: ml_dtypes gives -0 for +NaN, +0 for -NaN
        assert np.all(ref[nan_in] == (sign[nan_in] ^ (1 << (w - 1)))), what
    else:
        assert np.all(mine[nan_in] == (sign[nan_in] | fmt.nan_code)), what
        assert np.all(is_nan_code(ref[nan_in], fmt)), what
        assert np.all((ref[nan_in] & (1 << (w - 1))) == sign[nan_in]), f"{what}: NaN sign"
        counts["nan_payload_differs"] = int((ref[nan_in] != mine[nan_in]).sum())
    fin = ~nan_in
    diff = fin & (mine != ref)
    if fmt is FP8_E4M3FN:
        # documented difference: |x| > 464 (rounds above 448; 464 itself ties to even 448) and
        # ±Inf saturate here, NaN there
        with np.errstate(invalid="ignore"):
            over = fin & (np.abs(x.astype(np.float64)) > 464.0)
        assert np.array_equal(diff, over), (
            f"{what}: differences outside the overflow set, e.g. x={x[diff != over][:4]!r}")
        assert np.all(mine[over] == (sign[over] | 0x7E)), what
        assert np.all(ref[over] == (sign[over] | 0x7F)), what
        counts["e4m3fn_saturate_vs_nan"] = int(over.sum())
    else:
        assert not diff.any(), (f"{what}: {diff.sum()} mismatches, e.g. x={x[diff][:4]!r} "
                                f"mine={mine[diff][:4]} ref={ref[diff][:4]}")
    return counts


def random_inputs(rng, n, fmt):
    """Mix of: uniform FP32 bit patterns (every exponent, Inf, NaN, subnormals); values spread
    over the format's exponent range +-3 with random mantissas; and the same with only the top
    ``man_bits + 2`` mantissa bits set (so ties and near-ties are frequent)."""
    k = n // 3
    u = rng.integers(0, 1 << 32, n - 2 * k, dtype=np.uint32)
    lo = max(fmt.emin - fmt.man_bits - 3, -149)
    hi = min(fmt.emax + 2, 127)
    out = [u.view(np.float32)]
    for keep in (23, fmt.man_bits + 2):
        e = rng.integers(lo, hi + 1, k)
        m = rng.integers(0, 1 << 23, k, dtype=np.int64) >> (23 - keep) << (23 - keep)
        s = np.where(rng.random(k) < 0.5, -1.0, 1.0)
        with np.errstate(over="ignore"):
            v = (s * np.ldexp(1.0 + m / 2.0 ** 23, e)).astype(np.float32)
        out.append(v)
    return np.concatenate(out)


# --- exact reference of contract §3, written from the text with Fractions -----------------------

def frac_encode(v, fmt):
    """Code magnitude of the non-negative representable Fraction ``v``."""
    if v == 0:
        return 0
    E = math.floor(math.log2(v))
    while Fraction(2) ** E > v:
        E -= 1
    while Fraction(2) ** (E + 1) <= v:
        E += 1
    if E < fmt.emin:
        c = v / Fraction(2) ** (fmt.emin - fmt.man_bits)
        assert c.denominator == 1
        return int(c)
    m = v / Fraction(2) ** (E - fmt.man_bits) - (1 << fmt.man_bits)
    assert m.denominator == 1 and 0 <= m < (1 << fmt.man_bits)
    return ((E + fmt.bias) << fmt.man_bits) | int(m)


def frac_convert(xbits, fmt, rand=None):
    """Contract §3 with exact rational arithmetic, for one FP32 bit pattern."""
    xbits = int(xbits)
    s = xbits >> 31
    sgn = s << (fmt.width - 1)
    ex, man = (xbits >> 23) & 0xFF, xbits & 0x7FFFFF
    if ex == 0xFF and man:
        return 0 if fmt.specials == "none" else sgn | fmt.nan_code
    if ex == 0xFF:
        return sgn | (fmt.inf_code if fmt.overflow == "inf" else fmt.max_finite_code)
    a = Fraction(man, 1 << 23) * Fraction(2) ** -126 if ex == 0 else \
        Fraction((1 << 23) | man, 1 << 23) * Fraction(2) ** (ex - 127)
    if a == 0:
        return sgn
    E = math.floor(math.log2(a))
    while Fraction(2) ** E > a:
        E -= 1
    while Fraction(2) ** (E + 1) <= a:
        E += 1
    q = Fraction(2) ** (max(E, fmt.emin) - fmt.man_bits)
    I = math.floor(a / q)
    F = a / q - I
    if rand is None:
        up = F > Fraction(1, 2) or (F == Fraction(1, 2) and I % 2 == 1)
    else:
        up = math.floor(F * 2 ** 32) + int(rand) >= 2 ** 32
    v = (I + up) * q
    if v > Fraction(fmt.max_finite):
        return sgn | (fmt.inf_code if fmt.overflow == "inf" else fmt.max_finite_code)
    return sgn | frac_encode(v, fmt)


FRAC_FORMATS = [f for f, _ in REFS] + [TF32, FP32] + [
    cfp8_format(e, b) for e, b in ((3, -121), (3, 146), (4, -113), (4, 146), (4, 9),
                                   (5, -97), (5, 148), (5, 13))]


@pytest.mark.parametrize("fmt", FRAC_FORMATS, ids=[f"{f.name}-e{f.exp_bits}b{f.bias}"
                                                   for f in FRAC_FORMATS])
def test_convert_rne_vs_fraction(fmt, seed):
    rng = np.random.default_rng(seed)
    x = random_inputs(rng, 3000, fmt)
    bits = f32_bits(x)
    mine = convert_rne(x, fmt)
    for i in range(x.size):
        want = frac_convert(bits[i], fmt)
        assert int(mine[i]) == want, (f"seed={seed} {fmt} x={x[i]!r} ({int(bits[i]):#010x}): "
                                      f"{int(mine[i]):#x} != {want:#x}")


# --- specials and thresholds ---------------------------------------------------------------------

def special_inputs(fmt):
    mx = fmt.max_finite
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    ms = fmt.min_subnormal
    vals = [0.0, 1.0, 1.5, 2.0 ** fmt.emin, 2.0 ** fmt.emin - ms, ms, ms / 2, 3 * ms / 2, 2 * ms,
            mx, mx - ulp_top, mx - ulp_top / 2, mx + ulp_top / 2, mx + ulp_top, 2 * mx,
            1.0 + 2.0 ** -(fmt.man_bits + 1), 1.0 + 3 * 2.0 ** -(fmt.man_bits + 1),
            2.0 ** -149, 3.4028234663852886e38, 1e30]
    xs = []
    with np.errstate(over="ignore"):
        for v in vals:
            f = np.float32(v)
            xs += [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(0))]
    x = np.array(xs, dtype=np.float32)
    x = np.concatenate([x, -x])
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFA00000,
                     0x7F800000, 0xFF800000, 0x00000001, 0x80000001], dtype=np.uint32)
    return np.concatenate([x, nans.view(np.float32)])


@pytest.mark.parametrize("fmt,dtype", REFS, ids=IDS)
def test_convert_rne_specials_vs_ref(fmt, dtype):
    x = special_inputs(fmt)
    check_vs_ref(x, fmt, dtype, f"{fmt.name} specials")


def test_convert_rne_known_answers():
    """Hand-computed expectations from the contract (independent of every library)."""
    def c(v, fmt):
        return int(convert_rne(np.array([v], dtype=np.float32), fmt)[0])
    assert c(464.0, FP8_E4M3FN) == 0x7E           # tie between 448 and (480): even = 448
    assert c(464.00003, FP8_E4M3FN) == 0x7E       # overflow saturates (ml_dtypes: NaN)
    assert c(463.99997, FP8_E4M3FN) == 0x7E
    assert c(-np.inf, FP8_E4M3FN) == 0xFE
    assert c(np.inf, FP8_E4M3) == 0x78 and c(248.0, FP8_E4M3) == 0x78   # 240 + ulp/2 -> Inf
    assert c(247.99998, FP8_E4M3) == 0x77
    assert c(61440.0, FP8_E5M2) == 0x7C and c(61439.996, FP8_E5M2) == 0x7B
    assert c(np.nan, FP4_E2M1) == 0 and c(-np.nan, FP4_E2M1) == 0
    assert c(np.inf, FP4_E2M1) == 0x7 and c(-1e9, FP4_E2M1) == 0xF
    assert c(5.0, FP4_E2M1) == 0x6 and c(2.5, FP4_E2M1) == 0x4 and c(0.25, FP4_E2M1) == 0
    assert c(0.75, FP4_E2M1) == 0x2 and c(-0.25, FP4_E2M1) == 0x8
    assert c(2.0 ** -10, FP8_E4M3FN) == 0 and c(1.5 * 2.0 ** -10, FP8_E4M3FN) == 1
    assert c(-np.float32(2.0 ** -149), BF16) == 0x8000
    assert c(np.nan, BF16) == 0x7FC0 and c(-np.nan, FP16) == 0xFE00
    assert c(-np.nan, FP8_E4M3FN) == 0xFF
    # 65520 = fp16 max + ulp/2 -> Inf; just below -> max
    assert c(65520.0, FP16) == 0x7C00 and c(65519.996, FP16) == 0x7BFF
    # a subnormal rounding up to the smallest normal, and carry into the next binade
    assert c(2.0 ** -6 - 2.0 ** -11, FP8_E4M3FN) == 0x08
    assert c(1.9999, FP8_E4M3FN) == 0x40


# --- random, every format --------------------------------------------------------------------------

def _random_vs_ref(fmt, dtype, n, seed):
    rng = np.random.default_rng(seed)
    totals = {}
    done = 0
    while done < n:
        m = min(CHUNK, n - done)
        x = random_inputs(rng, m, fmt)
        for k, v in check_vs_ref(x, fmt, dtype, f"seed={seed} {fmt.name}").items():
            totals[k] = totals.get(k, 0) + v
        done += m
    return totals


@pytest.mark.parametrize("fmt,dtype", REFS, ids=IDS)
def test_convert_rne_random_vs_ref(fmt, dtype, seed):
    totals = _random_vs_ref(fmt, dtype, N_FAST, seed)
    assert totals["nan"] > 0                      # the NaN path was exercised
    if fmt is FP8_E4M3FN:
        assert totals["e4m3fn_saturate_vs_nan"] > 0


@pytest.mark.full
@pytest.mark.parametrize("fmt,dtype", REFS, ids=IDS)
def test_convert_rne_random_vs_ref_full(fmt, dtype, seed):
    _random_vs_ref(fmt, dtype, N_FULL, seed)


def _cfp8_biases():
    out = []
    for e in (3, 4, 5):
        lo, hi = (1 << e) - 2 - 127, 150 - (7 - e)
        std = CFP8_STD[e][1]
        for b in sorted({lo, std - 3, std + 2, 9, 13, hi}):
            if lo <= b <= hi and b != std:
                out.append((e, b))
    return out


@pytest.mark.parametrize("exp_bits,bias", _cfp8_biases())
def test_convert_rne_cfp8_other_bias(exp_bits, bias, seed):
    """cfp8 with bias b: convert(x) == ml_dtypes(x * 2**(b - std_bias)) wherever that scaling
    is exact in FP32."""
    fmt = cfp8_format(exp_bits, bias)
    dtype, std = CFP8_STD[exp_bits]
    rng = np.random.default_rng(seed)
    x = np.concatenate([random_inputs(rng, 300_000, fmt), special_inputs(fmt)])
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        y64 = x.astype(np.float64) * 2.0 ** (bias - std)
        y = y64.astype(np.float32)
        exact = (y.astype(np.float64) == y64) | ~np.isfinite(x)
    assert exact.mean() > 0.5, f"seed={seed}: too few exactly scalable inputs"
    mine = convert_rne(x[exact], fmt)
    ref = ref_codes(y[exact], dtype)
    bad = mine != ref
    # NaN payloads may differ; NaN-ness and sign must not
    xn = np.isnan(x[exact])
    assert np.all(is_nan_code(ref[xn], fmt)) and np.all(mine[xn] == ((np.signbit(x[exact][xn])
                                                                       .astype(np.uint32) << 7)
                                                                      | fmt.nan_code))
    bad &= ~xn
    assert not bad.any(), (f"seed={seed} cfp8 e{exp_bits} bias {bias}: x={x[exact][bad][:4]!r} "
                           f"mine={mine[bad][:4]} ref={ref[bad][:4]}")


# --- midpoints -----------------------------------------------------------------------------------

def midpoint_inputs(fmt):
    """The exact midpoint of every pair of adjacent non-negative values of ``fmt`` (and between
    max and max + ulp, the overflow threshold) and its two FP32 neighbours, both signs."""
    codes = np.arange(fmt.max_finite_code + 1, dtype=np.uint32)
    v = decode(codes, fmt).astype(np.float64)
    assert np.all(np.diff(v) > 0)
    top = fmt.max_finite + 2.0 ** (fmt.emax - fmt.man_bits)
    v = np.append(v, top)
    mid64 = (v[:-1] + v[1:]) / 2
    mid = mid64.astype(np.float32)
    assert np.array_equal(mid.astype(np.float64), mid64)          # midpoints are FP32 values
    up = np.nextafter(mid, np.float32(np.inf))
    dn = np.nextafter(mid, np.float32(0))
    x = np.concatenate([mid, up, dn])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("fmt,dtype", REFS, ids=IDS)
def test_convert_rne_midpoints_vs_ref(fmt, dtype):
    x = midpoint_inputs(fmt)
    check_vs_ref(x, fmt, dtype, f"{fmt.name} midpoints")
    # and the ties really go to even
    mid = x[: x.size // 6]
    codes = convert_rne(mid, fmt)
    assert np.all(codes[:-1] % 2 == 0), fmt.name


# --- TF32 and FP32 ---------------------------------------------------------------------------------

def tf32_ref(bits):
    """Independent TF32 RNE: integer add-and-shift on the FP32 bits (finite inputs)."""
    b = bits.astype(np.uint64)
    r = (b + 0xFFF + ((b >> 13) & 1)) >> 13
    return r.astype(np.uint32)


def test_convert_tf32_random(seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([random_inputs(rng, 2_000_000, TF32), special_inputs(TF32),
                        midpoint_inputs(BF16)])
    bits = f32_bits(x)
    mine = convert_rne(x, TF32)
    nan = np.isnan(x)
    ref = tf32_ref(bits)
    assert np.array_equal(mine[~nan], ref[~nan]), f"seed={seed}"
    assert np.all(mine[nan] == ((bits[nan] >> 13) & 0x40000) | 0x3FE00), f"seed={seed}"
    assert np.all(decode(mine[~nan], TF32) == decode(ref[~nan], TF32))


def test_convert_fp32_identity(seed):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, 1 << 32, 1_000_000, dtype=np.uint32)
    mine = convert_rne_bits(u, FP32)
    nan = np.isnan(u.view(np.float32))
    assert np.array_equal(mine[~nan], u[~nan]), f"seed={seed}"
    assert np.all(mine[nan] == (u[nan] & 0x80000000) | FP32_QNAN), f"seed={seed}"


def test_convert_dtype_and_input_checks():
    x = np.array([1.0], dtype=np.float32)
    assert convert_rne(x, FP4_E2M1).dtype == np.uint8
    assert convert_rne(x, BF16).dtype == np.uint16
    assert convert_rne(x, TF32).dtype == np.uint32
    assert convert_rne(np.array([0.5, 2.0]), FP8_E5M2).tolist() == [0x38, 0x40]   # exact f64 ok
    with pytest.raises(ValueError, match="exactly representable in FP32"):
        convert_rne(np.array([0.1]), BF16)
    with pytest.raises(TypeError, match="use the \\*_bits variant"):
        convert_rne(np.array([1], dtype=np.uint32), BF16)
    with pytest.raises(ValueError, match=r"bits must be in \[0, 4294967295\]"):
        convert_rne_bits(np.array([1 << 32]), BF16)


# --- Berkeley SoftFloat: FP32 -> FP16 / BF16 ---------------------------------------------------------

def _softfloat_conv(bits, fn):
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    F = sf.Float32.from_bytes
    raw = bits.astype(">u4").tobytes()
    return np.array([int.from_bytes(fn(F(raw[4 * i:4 * i + 4])).to_bytes(), "big")
                     for i in range(bits.size)], dtype=np.uint32)


def _check_vs_softfloat(x, fmt, fn, what):
    bits = f32_bits(x)
    ref = _softfloat_conv(bits, fn)
    mine = convert_rne(x, fmt).astype(np.uint32)
    nan = np.isnan(x)
    assert np.all(is_nan_code(ref[nan], fmt)), what          # SoftFloat NaN: compare NaN-ness
    bad = (~nan) & (mine != ref)
    assert not bad.any(), f"{what}: x={x[bad][:4]!r} mine={mine[bad][:4]} sf={ref[bad][:4]}"


@pytest.mark.parametrize("fmt,fn", [(FP16, sf.f32_to_f16), (BF16, sf.f32_to_bf16)],
                         ids=["fp16", "bf16"])
def test_convert_vs_softfloat(fmt, fn, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([random_inputs(rng, 300_000, fmt), special_inputs(fmt),
                        midpoint_inputs(fmt)])
    _check_vs_softfloat(x, fmt, fn, f"seed={seed} {fmt.name}")


@pytest.mark.full
@pytest.mark.parametrize("fmt,fn", [(FP16, sf.f32_to_f16), (BF16, sf.f32_to_bf16)],
                         ids=["fp16", "bf16"])
def test_convert_vs_softfloat_full(fmt, fn, seed):
    rng = np.random.default_rng(seed)
    for _ in range(10):
        _check_vs_softfloat(random_inputs(rng, 1_000_000, fmt), fmt, fn,
                            f"seed={seed} {fmt.name}")
