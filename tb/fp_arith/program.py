# SPDX-License-Identifier: Apache-2.0
"""Stimulus and golden expectations for the arithmetic units (numpy, no cocotb).

Stimulus: codes per operand with a per-element format index into the DUT's format tuple, and
FP32 bit patterns. Expectations come only from ``golden.arith`` (never from the RTL). Packing
uses the DUT's own layouts (:mod:`tb.pack`).
"""

import numpy as np

from golden import arith as ga
from rtl.config import FP32

U32 = np.uint32


# --- codes --------------------------------------------------------------------------------------

def corner_codes(fmt):
    """Directed codes of ``fmt``, both signs: zero, smallest/largest subnormal, smallest
    normal, one, 1.5, largest finite and its neighbour, Inf, NaNs (canonical and others)."""
    M, E = fmt.man_bits, fmt.exp_bits
    mags = {0, 1, (1 << M) - 1, 1 << M, (1 << M) | 1, fmt.max_finite_code,
            fmt.max_finite_code - 1}
    if 1 <= fmt.bias <= fmt.exp_max_code:
        mags |= {fmt.bias << M, (fmt.bias << M) | (1 << (M - 1))}
    if fmt.specials == "ieee":
        mags |= {fmt.inf_code, fmt.nan_code, fmt.inf_code | 1, (1 << (E + M)) - 1}
    elif fmt.specials == "fn":
        mags |= {fmt.nan_code}
    mags = np.array(sorted(mags), dtype=np.uint64)
    sign = np.uint64(1 << (fmt.width - 1))
    return np.concatenate([mags, mags | sign]).astype(np.uint32)


def random_codes(rng, fmt, n, spread=None):
    """``n`` random codes: uniform bits, or with the exponent field within ``bias ± spread``
    (values near 1, clipped to the finite range) when ``spread`` is given."""
    c = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64)
    if spread is not None:
        top = fmt.exp_max_code
        e = np.clip(fmt.bias + rng.integers(-spread, spread + 1, n), 0, top).astype(np.uint64)
        M = fmt.man_bits
        c = (c & ~np.uint64(((1 << fmt.exp_bits) - 1) << M)) | (e << np.uint64(M))
    return c.astype(np.uint32)


def f32_from_f64(x):
    """FP32 bits of float64 values rounded to nearest (numpy cast; exact inputs stay exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(np.float32).view(U32)


# --- multiplier ---------------------------------------------------------------------------------

def mul_value(out):
    """The RTL product layout fields as exact float64 (sign * sig * 2**exp, flags applied) and a
    mask of elements whose flags are inconsistent with ``sig`` (zero flag <=> sig == 0 for
    finite results, at most one flag)."""
    sig, exp, sign = out["sig"], out["exp"], out["sign"]
    mag = np.ldexp(sig.astype(np.float64), exp)           # exact: <= 48 bits, in range
    mag = np.where(out["is_inf"] == 1, np.inf, mag)
    val = np.where(sign == 1, -mag, mag)
    val = np.where(out["is_nan"] == 1, np.nan, val)
    flags = out["is_zero"] + out["is_inf"] + out["is_nan"]
    finite = (out["is_inf"] == 0) & (out["is_nan"] == 0)
    bad = (flags > 1) | (finite & ((out["is_zero"] == 1) != (sig == 0)))
    return val, bad


def mul_expect(fmts_a, ia, a, fmts_b, ib, b):
    """Golden exact products for per-element format indices ``ia``/``ib``."""
    want = np.zeros(len(a), dtype=np.float64)
    for ka, fa in enumerate(fmts_a):
        for kb, fb in enumerate(fmts_b):
            sel = (ia == ka) & (ib == kb)
            if sel.any():
                want[sel] = ga.mul_exact(a[sel], fa, b[sel], fb)
    return want


def same_f64(got, want):
    """Bitwise float64 equality (so -0 != +0), NaN equal to NaN."""
    return (got.view(np.uint64) == want.view(np.uint64)) | (np.isnan(got) & np.isnan(want))


# --- fused multiply-add -------------------------------------------------------------------------

def fma_expect(fmts_a, ia, a, fmts_b, ib, b, c):
    want = np.zeros(len(a), dtype=U32)
    for ka, fa in enumerate(fmts_a):
        for kb, fb in enumerate(fmts_b):
            sel = (ia == ka) & (ib == kb)
            if sel.any():
                want[sel] = ga.fma_fp32(c[sel], a[sel], fa, b[sel], fb)
    return want


FP32_CORNERS = np.array([
    0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
    0x80800000, 0x3F800000, 0xBF800000, 0x3F800001, 0x3FFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
    0x7F000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF,
    0x33800000, 0xB3800000, 0x4B800000, 0x00400000,
], dtype=U32)


def fma_corners(fmts):
    """Every (a, b, c) of the corner codes of every format pair (same format both sides and
    each format against fp32-like corners of the first format) x FP32 corners."""
    ia, a, ib, b, c = [], [], [], [], []
    for ka, fa in enumerate(fmts):
        for kb, fb in enumerate(fmts):
            if ka != kb and kb != 0 and ka != 0:
                continue
            ca, cb = corner_codes(fa), corner_codes(fb)
            A, B, C = np.meshgrid(ca, cb, FP32_CORNERS, indexing="ij")
            n = A.size
            ia.append(np.full(n, ka)); ib.append(np.full(n, kb))
            a.append(A.ravel()); b.append(B.ravel()); c.append(C.ravel())
    return tuple(np.concatenate(x).astype(np.int64 if k in (0, 2) else U32)
                 for k, x in enumerate((ia, a, ib, b, c)))


def fma_random(rng, fmts, n):
    """``n`` random FMA cases over all format pairs, a mix of strategies for ``c``:
    uniform bits; near ``-a*b`` (cancellation, a few ulps off); ``a*b`` scaled by 2**k for
    k in [-40, 40] (every alignment); exact midpoints (``c`` with ulp twice the product's lowest
    set bit: ties to even); subnormal ``c``; and operands with exponents near the bias."""
    k = len(fmts)
    ia = rng.integers(0, k, n)
    ib = rng.integers(0, k, n)
    near = rng.random(n) < 0.5
    a = np.zeros(n, dtype=U32)
    b = np.zeros(n, dtype=U32)
    for kk, f in enumerate(fmts):
        sa, sb = ia == kk, ib == kk
        a[sa] = np.where(near[sa], random_codes(rng, f, sa.sum(), spread=12),
                         random_codes(rng, f, sa.sum()))
        b[sb] = np.where(near[sb], random_codes(rng, f, sb.sum(), spread=12),
                         random_codes(rng, f, sb.sum()))
    p = mul_expect(fmts, ia, a, fmts, ib, b)
    fin = np.isfinite(p)
    pf = np.where(fin, p, 1.0)
    strat = rng.integers(0, 6, n)
    c = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)            # 0: uniform
    # 1: cancellation, c = -p rounded, then a few ulps off
    cc = f32_from_f64(-pf).astype(np.int64) + rng.integers(-3, 4, n)
    c = np.where(strat == 1, (cc & 0xFFFFFFFF).astype(U32), c)
    # 2: alignment sweep
    sc = f32_from_f64(pf * np.ldexp(1.0, rng.integers(-40, 41, n))
                      * np.where(rng.random(n) < 0.5, -1, 1))
    c = np.where(strat == 2, sc, c)
    # 3: midpoints: c's ulp is 2**(L+1), L = exponent of p's lowest set bit
    mant, ex = np.frexp(np.abs(pf))                    # |p| = mant * 2**ex, mant in [0.5, 1)
    ip = (mant * 2.0 ** 53).astype(np.uint64)
    low = np.where(ip == 0, 0, _ctz64(ip))
    L = ex - 53 + low
    ec = L + 1 + 23 + 127                                 # biased exponent of c
    ok = (ec >= 1) & (ec <= 254) & (p != 0)
    mc = rng.integers(0, 1 << 23, n, dtype=np.uint64).astype(np.int64)
    sgn = rng.integers(0, 2, n).astype(np.int64) << 31
    tie = (sgn | (np.clip(ec, 1, 254) << 23) | mc).astype(U32)
    c = np.where((strat == 3) & ok, tie, c)
    # 4: subnormal c (and tiny products often give subnormal sums)
    sub = (rng.integers(0, 1 << 23, n, dtype=np.uint64) | (rng.integers(0, 2, n, dtype=np.uint64)
                                                           << np.uint64(31))).astype(U32)
    c = np.where(strat == 4, sub, c)
    # 5: c with exponent near the bias (ordinary accumulations)
    c = np.where(strat == 5, random_codes(rng, FP32, n, spread=16), c)
    return ia, a, ib, b, c.astype(U32)


def _ctz64(x):
    x = x.astype(np.uint64)
    low = x & (~x + np.uint64(1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(low == 0, 0, np.log2(np.maximum(low, np.uint64(1)).astype(np.float64))
                        ).astype(np.int64)


# --- FP32 adder ---------------------------------------------------------------------------------

def add_corners():
    A, B = np.meshgrid(FP32_CORNERS, FP32_CORNERS, indexing="ij")
    return A.ravel().astype(U32), B.ravel().astype(U32)


def add_random(rng, n):
    """``n`` random FP32 pairs: uniform bits; near-cancellation (b = -a a few ulps off);
    exponent gaps 0..40; both subnormal or near the normal boundary."""
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)
    strat = rng.integers(0, 4, n)
    # 1: cancellation
    bc = ((a.astype(np.int64) ^ (1 << 31)) + rng.integers(-4, 5, n)) & 0xFFFFFFFF
    b = np.where(strat == 1, bc.astype(U32), b)
    # 2: exponent gap
    ea = (a >> U32(23)) & U32(0xFF)
    gap = rng.integers(0, 41, n)
    eb = np.clip(ea.astype(np.int64) - gap, 0, 254)
    bg = (b & U32(0x807FFFFF)) | (eb.astype(U32) << U32(23))
    b = np.where(strat == 2, bg, b)
    # 3: tiny: exponent fields 0..2
    ta = (a & U32(0x807FFFFF)) | (rng.integers(0, 3, n).astype(U32) << U32(23))
    tb = (b & U32(0x807FFFFF)) | (rng.integers(0, 3, n).astype(U32) << U32(23))
    a = np.where(strat == 3, ta, a)
    b = np.where(strat == 3, tb, b)
    return a.astype(U32), b.astype(U32)


def mismatch_text(idx, rows, limit=8):
    """Lines describing the first ``limit`` mismatching indices; ``rows(i)`` formats one."""
    return "\n".join(rows(int(i)) for i in idx[:limit])
