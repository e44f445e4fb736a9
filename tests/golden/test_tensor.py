# SPDX-License-Identifier: Apache-2.0
"""Tests of the tensor-engine golden model (golden/tensor.py, docs/tensor-engine.md).

Independent references used here (none of them calls golden.arith):
- ``ref_decode``: element values through numpy / ml_dtypes views (tf32 through an FP32 mask).
- ``ref_chain``: the contract's FMA chain in scalar Python with ``fractions.Fraction`` for the
  exact ``p + a*b`` and an RNE-to-FP32 written here (``rne_f32_bits``).
- numpy float64 matmul, within the documented per-element error bound (``fp32_chain_bound``).
"""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from golden.mx import mx_dequantize, mx_quantize
from golden.tensor import (FP32_NEG_ZERO, PsumModel, matmul, matmul_mx, psum_update, transpose,
                           transpose_formats)
from rtl.config import FORMATS, MX_FORMAT_NAMES, PRESETS

QNAN = 0x7FC00000
U = 2.0 ** -24                      # unit roundoff of FP32 under RNE
WIDE = ("fp32", "tf32")


# --- independent references ----------------------------------------------------------------------

_ML = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8_e5m2": ml_dtypes.float8_e5m2,
       "fp8_e4m3": ml_dtypes.float8_e4m3, "fp8_e4m3fn": ml_dtypes.float8_e4m3fn,
       "fp4_e2m1": ml_dtypes.float4_e2m1fn}
#: ml_dtypes type and standard bias of a cfp8 format with e exponent bits (IEEE-style specials).
_CFP8 = {3: (ml_dtypes.float8_e3m4, 3), 4: (ml_dtypes.float8_e4m3, 7), 5: (ml_dtypes.float8_e5m2, 15)}


def ref_decode(codes, fmt):
    """float64 values of ``codes`` in ``fmt`` without golden.formats (NaN for any NaN code)."""
    with np.errstate(invalid="ignore"):         # NaN codes widen quietly
        return _ref_decode(np.asarray(codes).astype(np.uint64), fmt)


def _ref_decode(c, fmt):
    if fmt.name == "fp32":
        return c.astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt.name == "tf32":
        return (c << np.uint64(13)).astype(np.uint32).view(np.float32).astype(np.float64)
    if fmt.name == "cfp8":
        t, std_bias = _CFP8[fmt.exp_bits]
        v = c.astype(np.uint8).view(t).astype(np.float64)
        return v * 2.0 ** (std_bias - fmt.bias)
    t = _ML[fmt.name]
    raw = c.astype(np.uint16 if np.dtype(t).itemsize == 2 else np.uint8)
    return raw.view(t).astype(np.float64)


def rne_f32_bits(x):
    """FP32 bits of the nonzero rational ``x`` rounded to nearest even (overflow -> Inf)."""
    s = 0x80000000 if x < 0 else 0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()      # floor(log2 a) is e or e-1
    if a < Fraction(2) ** e:
        e -= 1
    qe = max(e, -126) - 23
    n = a / Fraction(2) ** qe
    i = n.numerator // n.denominator
    f = n - i
    if f > Fraction(1, 2) or (f == Fraction(1, 2) and i % 2 == 1):
        i += 1
    v = Fraction(i) * Fraction(2) ** qe
    if v > Fraction((1 << 24) - 1) * Fraction(2) ** 104:
        return s | 0x7F800000
    return s | int(np.float32(float(v)).view(np.uint32))


def _bits_val(b):
    return float(np.uint32(b).view(np.float32))


def ref_fma(p_bits, a, b):
    """Bits of RNE_fp32(p + a*b): ``p_bits`` FP32 bits, ``a``/``b`` exact Python floats."""
    p = _bits_val(p_bits)
    if math.isnan(p) or math.isnan(a) or math.isnan(b):
        return QNAN
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return QNAN
        prod_inf = math.copysign(1.0, a) * math.copysign(1.0, b)
        if math.isinf(p) and math.copysign(1.0, p) != prod_inf:
            return QNAN
        return 0x7F800000 if prod_inf > 0 else 0xFF800000
    if math.isinf(p):
        return p_bits
    exact = Fraction(p) + Fraction(a) * Fraction(b)
    if exact == 0:
        p_neg = math.copysign(1.0, p) < 0
        prod_neg = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
        if p == 0 and a * b == 0 and p_neg and prod_neg:
            return 0x80000000                   # (-0) + (-0)
        return 0                                # exact zero sum under RNE is +0
    return rne_f32_bits(exact)


def ref_chain(sv, xv):
    """The contract's chain, element by element: sv [K, M], xv [K, N] exact float64 values."""
    K, M = sv.shape
    N = xv.shape[1]
    out = np.empty((M, N), dtype=np.uint32)
    for m in range(M):
        for n in range(N):
            p = FP32_NEG_ZERO
            for k in range(K):
                p = ref_fma(p, float(sv[k, m]), float(xv[k, n]))
            out[m, n] = p
    return out


def fp32_chain_bound(sv, xv):
    """Per-element bound on |R - S.T @ X (float64 matmul)| for finite, non-overflowing data.

    Each of the K fused steps rounds once: relative error <= u = 2**-24 of a partial sum whose
    magnitude is <= sum_k |S_k X_k|, plus <= 2**-150 absolute in FP32's subnormal range. So
    |R - exact| <= gamma_K * sum|S X| + K * 2**-150 with gamma_K = K u / (1 - K u); the float64
    reference adds <= K * 2**-53 (1 + 2**-50) * sum|S X| of its own.
    """
    K = sv.shape[0]
    absum = np.abs(sv).T @ np.abs(xv)
    gamma = K * U / (1 - K * U)
    return (gamma + K * 2.0 ** -53 * (1 + 2.0 ** -50)) * absum + K * 2.0 ** -150


# --- input generators ----------------------------------------------------------------------------

def random_finite_codes(rng, fmt, shape, exp_window=None):
    """Uniform random finite codes of ``fmt``; 8-bit-exponent formats keep the exponent field in
    ``exp_window`` (so sums neither overflow nor vanish), with ~6% subnormal/zero codes."""
    M, EB = fmt.man_bits, fmt.exp_bits
    top = (1 << EB) - 1
    s = rng.integers(0, 2, shape, dtype=np.uint64)
    man = rng.integers(0, 1 << M, shape, dtype=np.uint64)
    if exp_window is None and EB == 8:
        exp_window = (127 - 20, 127 + 20)
    if exp_window is None:
        e = rng.integers(0, top + (fmt.specials != "ieee"), shape, dtype=np.uint64)
    else:
        e = rng.integers(exp_window[0], exp_window[1] + 1, shape, dtype=np.uint64)
        e = np.where(rng.random(shape) < 0.06, np.uint64(0), e)
    if fmt.specials == "fn":   # S.1..1.1..1 is NaN: turn it into max finite
        man = np.where((e == top) & (man == (1 << M) - 1), np.uint64((1 << M) - 2), man)
    codes = (s << np.uint64(EB + M)) | (e << np.uint64(M)) | man
    assert np.all(np.isfinite(ref_decode(codes, fmt)))
    return codes.astype(np.uint32 if fmt.width > 16 else (np.uint16 if fmt.width > 8 else np.uint8))


def random_codes_with_specials(rng, fmt, shape, p_special=0.08):
    """Finite codes (wide exponent range) mixed with zeros, Inf and NaN codes (with payloads)."""
    codes = random_finite_codes(rng, fmt, shape, exp_window=(60, 190) if fmt.exp_bits == 8
                                else None).astype(np.uint64)
    M, EB = fmt.man_bits, fmt.exp_bits
    top = np.uint64(((1 << EB) - 1) << M)
    sign = np.uint64(1 << (EB + M))
    r = rng.random(shape)
    pay = rng.integers(1, 1 << M, shape, dtype=np.uint64)
    if fmt.specials == "ieee":
        codes = np.where(r < p_special / 3, top, codes)                              # +Inf
        codes = np.where((r >= p_special / 3) & (r < 2 * p_special / 3), top | pay, codes)
    elif fmt.specials == "fn":
        codes = np.where(r < p_special / 2, top | np.uint64((1 << M) - 1), codes)
    codes = np.where((r >= 2 * p_special / 3) & (r < p_special), np.uint64(0), codes)
    codes = np.where(rng.random(shape) < 0.5, codes ^ sign, codes)  # random signs of specials
    return codes.astype(np.uint32 if fmt.width > 16 else (np.uint16 if fmt.width > 8 else np.uint8))


def pairs(cfg):
    """Every allowed (fmt_s, fmt_x) pair of ``cfg``."""
    return [(a, b) for a in cfg.formats for b in cfg.formats if (a in WIDE) == (b in WIDE)]


def random_shape(rng, cfg):
    """A shape (K, M, N) within cfg's limits, often ragged (1, or below the array size)."""
    def dim(hi, cap):
        c = rng.random()
        if c < 0.2:
            return 1
        if c < 0.4:
            return min(hi, cap)
        return int(rng.integers(1, min(hi, cap) + 1))
    return dim(cfg.pe_rows, 1 << 30), dim(cfg.pe_cols, 1 << 30), dim(cfg.psum_bank_fp32, 24)


def _hexdiff(got, want):
    bad = np.argwhere(got != want)
    m, n = bad[0]
    return (f"{len(bad)} mismatches, first at [{m},{n}]: got {int(got[m, n]):#010x} "
            f"want {int(want[m, n]):#010x}")


# --- dense matmul: bit-exact against the Fraction chain --------------------------------------------

def test_fp32_bit_exact_vs_fraction_chain(seed):
    cfg = PRESETS["default"]
    fmt = cfg.fmt("fp32")
    rng = np.random.default_rng(seed)
    for trial in range(12):
        K, M, N = random_shape(rng, cfg)
        N = min(N, 6)
        if trial % 3 == 0:      # narrow exponent window: heavy cancellation, exact ties
            s = random_finite_codes(rng, fmt, (K, M), exp_window=(125, 129))
            x = random_finite_codes(rng, fmt, (K, N), exp_window=(125, 129))
        elif trial % 3 == 1:    # subnormal range products and sums
            s = random_finite_codes(rng, fmt, (K, M), exp_window=(0, 70))
            x = random_finite_codes(rng, fmt, (K, N), exp_window=(40, 90))
        else:                   # specials and overflow-range values
            s = random_codes_with_specials(rng, fmt, (K, M))
            x = random_codes_with_specials(rng, fmt, (K, N))
        got = matmul(s, "fp32", x, "fp32", cfg)
        want = ref_chain(ref_decode(s, fmt), ref_decode(x, fmt))
        assert got.dtype == np.uint32 and got.shape == (M, N)
        assert np.array_equal(got, want), f"seed={seed} trial={trial} K,M,N={K, M, N}: " \
                                          + _hexdiff(got, want)


@pytest.mark.parametrize("preset", ["small", "default"])
def test_every_pair_bit_exact_vs_fraction_chain(seed, preset):
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    for fs, fx in pairs(cfg):
        f_s, f_x = cfg.fmt(fs), cfg.fmt(fx)
        K, M, N = random_shape(rng, cfg)
        M, N = min(M, 3), min(N, 3)
        s = random_codes_with_specials(rng, f_s, (K, M), p_special=0.03)
        x = random_codes_with_specials(rng, f_x, (K, N), p_special=0.03)
        got = matmul(s, fs, x, fx, cfg)
        want = ref_chain(ref_decode(s, f_s), ref_decode(x, f_x))
        assert np.array_equal(got, want), f"seed={seed} {fs}x{fx} K,M,N={K, M, N}: " \
                                          + _hexdiff(got, want)


# --- dense matmul: numpy float64 within the bound --------------------------------------------------

def _check_bound(cfg, rng, fs, fx, shape, seed, what):
    f_s, f_x = cfg.fmt(fs), cfg.fmt(fx)
    K, M, N = shape
    s = random_finite_codes(rng, f_s, (K, M))
    x = random_finite_codes(rng, f_x, (K, N))
    sv, xv = ref_decode(s, f_s), ref_decode(x, f_x)
    got = np.asarray(matmul(s, fs, x, fx, cfg)).view(np.float32).astype(np.float64)
    r64 = sv.T @ xv
    bound = fp32_chain_bound(sv, xv)
    err = np.abs(got - r64)
    assert np.all(np.isfinite(got)), f"seed={seed} {what} {fs}x{fx} {shape}: non-finite"
    i = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), (f"seed={seed} {what} {fs}x{fx} K,M,N={shape}: "
                                  f"|err| {err[i]:.3e} > bound {bound[i]:.3e} at {i}")


@pytest.mark.parametrize("preset", ["small", "default"])
def test_every_pair_within_bound_of_float64(seed, preset):
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    ragged = [(1, 1, 1), (1, cfg.pe_cols, 3), (cfg.pe_rows, 1, 1), (max(1, cfg.pe_rows - 1),
              max(1, cfg.pe_cols // 2), 5), (cfg.pe_rows, cfg.pe_cols, 17)]
    for fs, fx in pairs(cfg):
        for shape in ragged + [random_shape(rng, cfg) for _ in range(2)]:
            _check_bound(cfg, rng, fs, fx, shape, seed, preset)


def test_bound_is_tight_enough_to_catch_a_double_rounding(seed):
    """The bound test can fail: a model that rounds each product to FP32 before adding (two
    roundings) breaks the bit-exact chain even where it stays inside the bound, and a model
    that rounds the sum to bf16 breaks the bound."""
    cfg = PRESETS["default"]
    rng = np.random.default_rng(seed)
    f = cfg.fmt("fp32")
    s = random_finite_codes(rng, f, (16, 16), exp_window=(125, 129))
    x = random_finite_codes(rng, f, (16, 8), exp_window=(125, 129))
    sv, xv = ref_decode(s, f), ref_decode(x, f)
    bf = np.zeros((16, 8))
    for k in range(16):
        bf = (bf + np.outer(sv[k], xv[k])).astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.any(np.abs(bf - sv.T @ xv) > fp32_chain_bound(sv, xv)), f"seed={seed}"
    two = np.full((16, 8), -0.0, dtype=np.float32)
    for k in range(16):
        two = two + (np.outer(sv[k], xv[k]).astype(np.float32))
    assert not np.array_equal(two.view(np.uint32), matmul(s, f, x, f, cfg)), f"seed={seed}"


def test_fp32_numpy_matmul_within_bound(seed):
    """numpy's float32 matmul (another order, other roundings) agrees only within twice the
    bound, as the contract says."""
    cfg = PRESETS["default"]
    rng = np.random.default_rng(seed)
    f = cfg.fmt("fp32")
    s = random_finite_codes(rng, f, (16, 16))
    x = random_finite_codes(rng, f, (16, 64))
    sv, xv = ref_decode(s, f), ref_decode(x, f)
    np32 = (sv.astype(np.float32).T @ xv.astype(np.float32)).astype(np.float64)
    got = matmul(s, "fp32", x, "fp32", cfg).view(np.float32).astype(np.float64)
    assert np.all(np.abs(got - np32) <= 2 * fp32_chain_bound(sv, xv)), f"seed={seed}"


# --- specials ----------------------------------------------------------------------------------

def _f32(vals):
    return np.asarray(vals, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("fmt_name", ["fp32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3"])
def test_nan_and_inf_times_zero(fmt_name):
    cfg = PRESETS["default"]
    f = cfg.fmt(fmt_name)
    one = {"fp32": 0x3F800000}.get(fmt_name, ((f.bias << f.man_bits)))
    nan_payload = f.inf_code | 1                      # a NaN with a non-canonical payload
    neg_nan = nan_payload | (1 << (f.width - 1))
    s = np.array([[one, nan_payload, neg_nan, 0, f.inf_code, one]], dtype=np.uint32)
    x = np.array([[one, f.inf_code, 0]], dtype=np.uint32)
    got = matmul(s, fmt_name, x, fmt_name, cfg)
    want = np.array([[0x3F800000, 0x7F800000, 0],
                     [QNAN, QNAN, QNAN],
                     [QNAN, QNAN, QNAN],
                     [0, QNAN, 0],
                     [0x7F800000, 0x7F800000, QNAN],
                     [0x3F800000, 0x7F800000, 0]], dtype=np.uint32)
    assert np.array_equal(got, want), _hexdiff(got, want)


def test_nan_is_canonical_and_sticks():
    cfg = PRESETS["small"]
    s = _f32([[1.0], [np.inf], [2.0], [-np.inf]])        # chain: 1, Inf, Inf, Inf - Inf = NaN
    x = _f32([[1.0], [1.0], [1.0], [1.0]])
    assert matmul(s, "fp32", x, "fp32", cfg)[0, 0] == QNAN
    s = np.array([[0xFF800001], [0x3F800000]], dtype=np.uint32)   # negative sNaN, then 1*1
    assert matmul(s, "fp32", x[:2], "fp32", cfg)[0, 0] == QNAN


def test_overflow_to_inf():
    cfg = PRESETS["small"]
    big = np.float32(3.0e38)
    s = _f32([[big], [big], [-big]])
    x = _f32([[1.0], [1.0], [1.0]])
    got = matmul(s, "fp32", x, "fp32", cfg)                 # 3e38 + 3e38 overflows; -3e38 stays
    assert got[0, 0] == 0x7F800000
    s = _f32([[big], [-big]])
    x = _f32([[2.0], [2.0]])                                # the product is exact beyond FP32 max
    assert matmul(s, "fp32", x, "fp32", cfg)[0, 0] == 0x7F800000   # fp32(-0 + 6e38) = Inf first
    # max + half ulp rounds to Inf, just below it to max
    mx = np.float32(np.finfo(np.float32).max)
    half_ulp = np.float32(2.0 ** 103)
    assert matmul(_f32([[mx], [half_ulp]]), "fp32", _f32([[1.0], [1.0]]), "fp32",
                  cfg)[0, 0] == 0x7F800000
    assert matmul(_f32([[mx], [half_ulp]]), "fp32", _f32([[1.0], [0.99999994]]), "fp32",
                  cfg)[0, 0] == 0x7F7FFFFF


def test_signed_zero_chain_and_unused_rows():
    """p starts at -0.0 and rows k >= K pass p through: a -0 result stays -0 (adding a 0*x
    from an unused row would make it +0), and an all-(+0) column gives +0."""
    cfg = PRESETS["small"]
    for K in range(1, cfg.pe_rows + 1):
        s = np.full((K, 2), 0x80000000, dtype=np.uint32)     # -0
        s[:, 1] = 0                                         # +0
        x = _f32(np.ones((K, 1)))
        got = matmul(s, "fp32", x, "fp32", cfg)
        assert got[0, 0] == 0x80000000 and got[1, 0] == 0, f"K={K}: {got}"
    # K=1: R = -0 + S*X exactly rounded once (here a subnormal product)
    tiny = _f32([[2.0 ** -140]])
    assert matmul(tiny, "fp32", _f32([[2.0 ** -5]]), "fp32", cfg)[0, 0] == 0x00000010


def test_fused_single_rounding_not_double():
    """p = 1 + 2^-23 (odd), product = 2^-24 (1 - 2^-30) (30 bits): fused, p + product is below
    the tie and stays p; rounding the product to FP32 first (2^-24) would make a tie that
    rounds to even, 1 + 2^-22."""
    cfg = PRESETS["small"]
    s = _f32([[1 + 2.0 ** -23], [1 + 2.0 ** -15]])
    x = _f32([[1.0], [(1 - 2.0 ** -15) * 2.0 ** -24]])
    assert matmul(s, "fp32", x, "fp32", cfg)[0, 0] == 0x3F800001


def test_subnormal_results_and_ties():
    cfg = PRESETS["small"]
    # -0 + 2^-150 is a tie between 0 and 2^-149: even, +0 (the sum is nonzero: sign of it)
    assert matmul(_f32([[2.0 ** -149]]), "fp32", _f32([[0.5]]), "fp32", cfg)[0, 0] == 0
    assert matmul(_f32([[-2.0 ** -149]]), "fp32", _f32([[0.5]]), "fp32", cfg)[0, 0] \
        == 0x80000000
    # 0.75 * 2^-149 rounds up to the smallest subnormal
    assert matmul(_f32([[2.0 ** -149]]), "fp32", _f32([[0.75]]), "fp32", cfg)[0, 0] == 1
    # 2^-126 +- 0.75 * 2^-149: up to 0x00800001, down to the largest subnormal 0x007FFFFF
    s = _f32([[1.0], [2.0 ** -149]])
    x = _f32([[2.0 ** -126], [0.75]])
    assert matmul(s, "fp32", x, "fp32", cfg)[0, 0] == 0x00800001
    x = _f32([[2.0 ** -126], [-0.75]])
    assert matmul(s, "fp32", x, "fp32", cfg)[0, 0] == 0x007FFFFF
    # a subnormal fp16 times a subnormal bf16 (exact 2^-24 * 2^-133 = 2^-157): rounds to -0+0
    assert matmul(np.array([[1]], np.uint16), "fp16", np.array([[1]], np.uint16), "bf16",
                  cfg)[0, 0] == 0


# --- PSUM ------------------------------------------------------------------------------------------

def test_psum_update_matches_numpy_float32_add(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 32, (8, 9), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, (8, 9), dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(psum_update(a, b, False), b), f"seed={seed}"
    with np.errstate(all="ignore"):
        want = (a.view(np.float32) + b.view(np.float32)).view(np.uint32)
    want = np.where(np.isnan(want.view(np.float32)), np.uint32(QNAN), want)
    got = psum_update(a, b, True)
    assert np.array_equal(got, want), f"seed={seed}: " + _hexdiff(got, want)


def test_psum_model_accumulates_k_chunks_and_writes_only_the_region(seed):
    cfg = PRESETS["small"]
    rng = np.random.default_rng(seed)
    f = cfg.fmt("bf16")
    pm = PsumModel(cfg)
    pm.state[:] = rng.integers(0, 1 << 32, pm.state.shape, dtype=np.uint64).astype(np.uint32)
    before = pm.state.copy()
    M, N, bank = 3, 5, 2
    chunks = [(random_finite_codes(rng, f, (k, M)), random_finite_codes(rng, f, (k, N)))
              for k in (4, 2, 3)]
    ops = [{"op": "matmul", "bank": bank, "accumulate": i > 0, "stationary_codes": s,
            "fmt_s": "bf16", "moving_codes": x, "fmt_x": "bf16"} for i, (s, x) in enumerate(chunks)]
    pm.run(ops)
    want = matmul(chunks[0][0], "bf16", chunks[0][1], "bf16", cfg)
    for s, x in chunks[1:]:
        want = psum_update(want, matmul(s, "bf16", x, "bf16", cfg), True)
    assert np.array_equal(pm.read(bank, M, N), want), f"seed={seed}"
    mask = np.ones(pm.state.shape, dtype=bool)
    mask[bank, :M, :N] = False
    assert np.array_equal(pm.state[mask], before[mask]), f"seed={seed}: wrote outside [M, N]"


def test_psum_model_rejected_op_writes_nothing(seed):
    cfg = PRESETS["small"]
    pm = PsumModel(cfg)
    pm.state[:] = 0x12345678
    before = pm.state.copy()
    s = np.zeros((cfg.pe_rows + 1, 1), dtype=np.uint16)
    x = np.zeros((cfg.pe_rows + 1, 1), dtype=np.uint16)
    with pytest.raises(ValueError, match="pe_rows"):
        pm.matmul(0, True, s, "bf16", x, "bf16")
    with pytest.raises(ValueError, match="bank"):
        pm.transpose(cfg.psum_banks, np.zeros((1, 1), np.uint16), "bf16")
    with pytest.raises(ValueError, match="op"):
        pm.apply({"op": "conv"})
    assert np.array_equal(pm.state, before)


# --- transpose -------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", ["small", "default", "trainium"])
def test_transpose_bit_exact_every_format(seed, preset):
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    for name in transpose_formats(cfg):
        f = cfg.fmt(name)
        K, M, _ = random_shape(rng, cfg)
        codes = rng.integers(0, 1 << f.width, (K, M), dtype=np.uint64)
        if f.specials == "ieee":    # make sure NaN payloads and Infs are present
            codes.flat[0] = f.inf_code | 1
            codes.flat[-1] = (1 << (f.width - 1)) | f.inf_code | ((1 << f.man_bits) - 1)
        codes = codes.astype(np.uint32 if f.width > 16 else np.uint16 if f.width > 8 else np.uint8)
        pm = PsumModel(cfg)
        got = pm.transpose(1, codes, name)
        assert got.dtype == np.uint32 and got.shape == (M, K)
        for m in range(M):
            for k in range(K):
                assert int(got[m, k]) == int(codes[k, m]), f"seed={seed} {name} [{m},{k}]"
        assert np.array_equal(transpose(codes, name, cfg), got)


def test_transpose_formats_follow_config():
    assert "fp4_e2m1" in transpose_formats(PRESETS["default"])
    assert transpose_formats(PRESETS["bf16_only"]) == ("bf16",)
    with pytest.raises(ValueError, match="fmt must be one of"):
        transpose(np.zeros((2, 2), np.uint32), "fp32", PRESETS["bf16_only"])


# --- MX --------------------------------------------------------------------------------------------

def mx_cfgs():
    """Configs with several blocks per instruction (small blocks) and the presets themselves,
    whose 32-element block is partial on the 4- and 16-row arrays."""
    return [PRESETS["small"].replace(mx_block=2), PRESETS["default"].replace(mx_block=8),
            PRESETS["trainium"], PRESETS["small"], PRESETS["default"]]


def _ref_mx_values(codes, scales, elem, block):
    v = ref_decode(codes, elem)
    sc = np.array([[math.nan if s == 0xFF else 2.0 ** (int(s) - 127) for s in row]
                   for row in scales])
    return v * np.repeat(sc, block, axis=0)[:len(v)]      # exact in float64


@pytest.mark.parametrize("ci", range(5))
def test_mx_matches_dequantize_then_exact_chain(seed, ci):
    cfg = mx_cfgs()[ci]
    rng = np.random.default_rng(seed)
    blk = cfg.mx_block
    for sf in cfg.mx_formats:
        for xf in cfg.mx_formats:
            es, ex = FORMATS[MX_FORMAT_NAMES[sf]], FORMATS[MX_FORMAT_NAMES[xf]]
            K = int(rng.integers(1, cfg.pe_rows + 1))      # the last block may be partial
            Kp = -(-K // blk) * blk                            # quantize whole blocks
            M, N = int(rng.integers(1, min(cfg.pe_cols, 4) + 1)), int(rng.integers(1, 4))
            a = (rng.standard_normal((M, Kp)) * 2.0 ** rng.integers(-8, 8, (M, 1))).astype(
                np.float32)
            b = (rng.standard_normal((N, Kp)) * 2.0 ** rng.integers(-8, 8, (N, 1))).astype(
                np.float32)
            ss, sc = mx_quantize(a, es, blk)
            xs, xc = mx_quantize(b, ex, blk)
            sv = mx_dequantize(ss, sc, es, blk, dtype=np.float64).T[:K]
            xv = mx_dequantize(xs, xc, ex, blk, dtype=np.float64).T[:K]
            sc, xc = sc[:, :K], xc[:, :K]
            got = matmul_mx(sc.T, ss.T, sf, xc.T, xs.T, xf, cfg)
            want = ref_chain(sv, xv)
            assert np.array_equal(got, want), f"seed={seed} {cfg.name} {sf}x{xf}: " \
                                              + _hexdiff(got, want)
            # and the same from independently decoded values
            assert np.array_equal(ref_chain(_ref_mx_values(sc.T, ss.T, es, blk),
                                            _ref_mx_values(xc.T, xs.T, ex, blk)), want)


def test_mx_extreme_scales_and_nan_scale(seed):
    """Scales across the whole E8M0 range: scaled products beyond FP32 (-> Inf) or far below
    its subnormals (-> 0) are still exact before the one rounding; a NaN scale gives NaN."""
    cfg = PRESETS["default"].replace(mx_block=4)
    rng = np.random.default_rng(seed)
    for sf, xf in [("mxfp8_e5m2", "mxfp8_e5m2"), ("mxfp4", "mxfp8_e4m3"), ("mxfp4", "mxfp4")]:
        es, ex = FORMATS[MX_FORMAT_NAMES[sf]], FORMATS[MX_FORMAT_NAMES[xf]]
        K, M, N = 16, 4, 5
        sc = random_finite_codes(rng, es, (K, M))
        xc = random_finite_codes(rng, ex, (K, N))
        ss = rng.integers(0, 255, (K // 4, M), dtype=np.uint8)
        xs = rng.integers(0, 255, (K // 4, N), dtype=np.uint8)
        ss[0, 0] = 0xFF
        xs[-1, -1] = 0xFF
        got = matmul_mx(sc, ss, sf, xc, xs, xf, cfg)
        want = ref_chain(_ref_mx_values(sc, ss, es, 4), _ref_mx_values(xc, xs, ex, 4))
        assert np.array_equal(got, want), f"seed={seed} {sf}x{xf}: " + _hexdiff(got, want)
        assert np.all(got[0, :] == QNAN) and np.all(got[:, -1] == QNAN), f"seed={seed}"
    # scaled products 2^127 * 2^73 = 2^200 (far above FP32 max, exact in float64): the first
    # step already rounds to Inf.
    e = FORMATS["fp8_e5m2"]
    one = np.array([[e.bias << e.man_bits]] * 4, dtype=np.uint8)
    got = matmul_mx(one, np.array([[254]], np.uint8), "mxfp8_e5m2",
                    one, np.array([[200]], np.uint8), "mxfp8_e5m2", cfg)
    assert got[0, 0] == 0x7F800000


def test_mx_zero_element_times_nan_scale_is_nan():
    cfg = PRESETS["default"].replace(mx_block=2)
    z = np.zeros((2, 1), np.uint8)
    got = matmul_mx(z, np.array([[0xFF]], np.uint8), "mxfp4", z, np.array([[127]], np.uint8),
                    "mxfp4", cfg)
    assert got[0, 0] == QNAN


# --- invalid inputs --------------------------------------------------------------------------------

def _z(shape, dtype=np.uint16):
    return np.zeros(shape, dtype=dtype)


@pytest.mark.parametrize("preset", ["small", "default"])
def test_matmul_rejects_bad_shapes_and_formats(preset):
    cfg = PRESETS[preset]
    R, C, B = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    ok = _z((R, C)), "bf16", _z((R, 2)), "bf16", cfg
    assert matmul(*ok).shape == (C, 2)
    with pytest.raises(ValueError, match=rf"stationary_codes K .* \[1, {R}\] \(cfg.pe_rows\)"):
        matmul(_z((R + 1, 1)), "bf16", _z((R + 1, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match=rf"stationary_codes M .* \[1, {C}\] \(cfg.pe_cols\)"):
        matmul(_z((1, C + 1)), "bf16", _z((1, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match=rf"moving_codes N .* \[1, {B}\]"):
        matmul(_z((1, 1)), "bf16", _z((1, B + 1)), "bf16", cfg)
    with pytest.raises(ValueError, match="stationary_codes K"):
        matmul(_z((0, 1)), "bf16", _z((0, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match="moving_codes K .* must equal"):
        matmul(_z((2, 1)), "bf16", _z((3, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match="fp32/tf32 pair only with fp32/tf32"):
        matmul(_z((1, 1), np.uint32), "fp32", _z((1, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match="fp32/tf32 pair only with fp32/tf32"):
        matmul(_z((1, 1), np.uint8), "fp8_e4m3", _z((1, 1), np.uint32), "tf32", cfg)
    with pytest.raises(ValueError, match="fmt_x must be one of the enabled formats"):
        matmul(_z((1, 1)), "bf16", _z((1, 1)), "fp4_e2m1", cfg)
    with pytest.raises(ValueError, match="stationary_codes must be a 2-D array"):
        matmul(_z((4,)), "bf16", _z((4, 1)), "bf16", cfg)
    with pytest.raises(ValueError, match=r"moving_codes must be in \[0, 255\]"):
        matmul(_z((1, 1)), "bf16", np.array([[256]], np.uint16), "fp8_e5m2", cfg)
    with pytest.raises(TypeError, match="stationary_codes must be an array of unsigned integer"):
        matmul(np.zeros((1, 1), np.float32), "fp32", _z((1, 1), np.uint32), "fp32", cfg)
    with pytest.raises(TypeError, match="cfg must be"):
        matmul(_z((1, 1)), "bf16", _z((1, 1)), "bf16", "small")
    with pytest.raises(TypeError, match="fmt_s must be a format name"):
        matmul(_z((1, 1)), 16, _z((1, 1)), "bf16", cfg)


def test_disabled_format_and_foreign_cfp8_rejected():
    with pytest.raises(ValueError, match="fmt_s must be one of the enabled formats"):
        matmul(_z((1, 1)), "fp16", _z((1, 1)), "bf16", PRESETS["bf16_only"])
    other = PRESETS["default"].replace(cfp8_exp_bits=4, cfp8_bias=7).cfp8
    with pytest.raises(ValueError, match="fmt_s must be one of the enabled formats"):
        matmul(_z((1, 1), np.uint8), other, _z((1, 1), np.uint8), "cfp8", PRESETS["default"])
    assert matmul(_z((1, 1), np.uint8), PRESETS["default"].cfp8, _z((1, 1), np.uint8), "cfp8",
                  PRESETS["default"])[0, 0] == 0


def test_mx_rejects_bad_arguments():
    cfg = PRESETS["default"].replace(mx_block=8)
    z8 = lambda *s: np.zeros(s, np.uint8)  # noqa: E731
    with pytest.raises(ValueError, match=r"s_scales must have shape \(2, 1\)"):
        matmul_mx(z8(12, 1), z8(1, 1), "mxfp4", z8(12, 1), z8(2, 1), "mxfp4", cfg)
    with pytest.raises(ValueError, match=r"s_scales must have shape \(2, 1\)"):
        matmul_mx(z8(16, 1), z8(1, 1), "mxfp4", z8(16, 1), z8(2, 1), "mxfp4", cfg)
    with pytest.raises(ValueError, match=r"x_codes must be in \[0, 15\]"):
        matmul_mx(z8(8, 1), z8(1, 1), "mxfp4", z8(8, 1) + 16, z8(1, 1), "mxfp4", cfg)
    with pytest.raises(ValueError, match="x_mx_format must be one of the enabled MX formats"):
        matmul_mx(z8(8, 1), z8(1, 1), "mxfp4", z8(8, 1), z8(1, 1), "mxfp6", cfg)
    with pytest.raises(ValueError, match="mx_formats to be non-empty"):
        matmul_mx(z8(8, 1), z8(1, 1), "mxfp4", z8(8, 1), z8(1, 1), "mxfp4",
                  PRESETS["bf16_only"].replace(mx_block=8))
    with pytest.raises(TypeError, match="s_scales must be an array of unsigned integer"):
        matmul_mx(z8(8, 1), np.ones((1, 1)), "mxfp4", z8(8, 1), z8(1, 1), "mxfp4", cfg)
    # a partial last block still needs its own scale row
    with pytest.raises(ValueError, match=r"x_scales must have shape \(2, 1\)"):
        matmul_mx(z8(9, 1), z8(2, 1), "mxfp4", z8(9, 1), z8(1, 1), "mxfp4", cfg)


def test_mx_partial_block_equals_split_full_block():
    """A 32-element block split over two K-tiles with the same scale gives the same products:
    K = 16 rows with one (partial) scale block equals the first half of a 32-row block."""
    small = PRESETS["default"]
    big = PRESETS["trainium"]
    rng = np.random.default_rng(5)
    s = rng.integers(0, 0x7F, (32, 3), dtype=np.uint8)
    x = rng.integers(0, 0x7F, (32, 2), dtype=np.uint8)
    ss = rng.integers(110, 140, (1, 3), dtype=np.uint8)
    xs = rng.integers(110, 140, (1, 2), dtype=np.uint8)
    half = matmul_mx(s[:16], ss, "mxfp8_e4m3", x[:16], xs, "mxfp8_e4m3", small)
    full_first = matmul_mx(s[:16], ss, "mxfp8_e4m3", x[:16], xs, "mxfp8_e4m3", big)
    np.testing.assert_array_equal(half, full_first)


def test_psum_update_rejects_bad_arguments():
    with pytest.raises(TypeError, match="accumulate must be a bool"):
        psum_update(_z((1, 1), np.uint32), _z((1, 1), np.uint32), 1)
    with pytest.raises(ValueError, match="psum_bits must have the shape"):
        psum_update(_z((1, 2), np.uint32), _z((1, 1), np.uint32), True)
    with pytest.raises(TypeError, match="result_bits must be an array of uint32"):
        psum_update(_z((1, 1), np.uint32), np.zeros((1, 1)), True)


# --- full tier -------------------------------------------------------------------------------------

@pytest.mark.full
@pytest.mark.parametrize("preset", ["default", "trainium"])
def test_full_bound_sweep(seed, preset):
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    for fs, fx in pairs(cfg):
        shapes = [(cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32)] + \
                 [random_shape(rng, cfg) for _ in range(3)]
        for shape in shapes:
            _check_bound(cfg, rng, fs, fx, shape, seed, preset)


@pytest.mark.full
def test_full_every_pair_bit_exact_vs_fraction_chain(seed):
    cfg = PRESETS["trainium"]
    rng = np.random.default_rng(seed)
    for fs, fx in pairs(cfg):
        f_s, f_x = cfg.fmt(fs), cfg.fmt(fx)
        for _trial in range(3):
            K = int(rng.integers(1, cfg.pe_rows + 1))
            s = random_codes_with_specials(rng, f_s, (K, 4), p_special=0.01)
            x = random_codes_with_specials(rng, f_x, (K, 3), p_special=0.01)
            got = matmul(s, fs, x, fx, cfg)
            want = ref_chain(ref_decode(s, f_s), ref_decode(x, f_x))
            assert np.array_equal(got, want), f"seed={seed} {fs}x{fx} K={K}: " \
                                              + _hexdiff(got, want)


def test_chosen_preset_within_bound(seed, cfg):
    """The preset picked with CONFIG= (small by default): every pair, two random shapes."""
    rng = np.random.default_rng(seed)
    for fs, fx in pairs(cfg):
        for _ in range(2):
            _check_bound(cfg, rng, fs, fx, random_shape(rng, cfg), seed, cfg.name)
