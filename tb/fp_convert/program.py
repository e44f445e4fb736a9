# SPDX-License-Identifier: Apache-2.0
"""Test vectors and golden expectations for the conversion units (numpy, no cocotb).

Stimulus is FP32 bit patterns (``np.uint32``) or codes, a per-element format index and, for
the converter, a per-element rounding mode. Expectations come only from ``golden`` (never
from the RTL). Packing is :mod:`tb.pack`.
"""

import numpy as np

from golden import formats as gf
from golden.prng import XorWow as GoldenXorWow
from rtl.config import E8M0

U32 = np.uint32

#: FP32 corner bit patterns used for every format: NaNs with payloads and both signs, ±Inf,
#: ±0, FP32 extremes (max, min normal, min subnormal, largest subnormal).
FP32_CORNERS = np.array([
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7FC12345,
    0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000,
    0x80800000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x3F800000, 0xBF800000,
], dtype=U32)


# --- converter stimulus --------------------------------------------------------------------------

def finite_values(fmt):
    """All non-negative finite values of ``fmt`` (float64, increasing)."""
    codes = np.arange(fmt.max_finite_code + 1, dtype=np.uint32)
    return gf.decode(codes, fmt).astype(np.float64)


def midpoints(fmt, rng=None, sample=None):
    """FP32 bits of the midpoint between every pair of adjacent non-negative values of ``fmt``
    (and between max and max + ulp, the overflow threshold), each with its FP32 neighbours
    (nextafter down and up), both signs. ``sample``: keep that many midpoints at random."""
    v = finite_values(fmt)
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    v = np.append(v, v[-1] + ulp_top)
    mids = (v[:-1] + v[1:]) / 2
    if sample is not None and sample < len(mids):
        mids = rng.choice(mids, sample, replace=False)
    m32 = mids.astype(np.float32)
    # Where the format's spacing is 2**-149 (formats reaching FP32's smallest subnormal) the
    # midpoint is not an FP32 value: such ties cannot occur in an FP32 input, so they are
    # dropped; every other midpoint must be exact.
    exact = m32.astype(np.float64) == mids
    fine = np.abs(mids - v[np.searchsorted(v, mids) - 1]) < 2.0 ** -149
    assert np.all(exact | fine), f"{fmt.name}: midpoint not exact in FP32"
    m32 = m32[exact]
    inf = np.float32(np.inf)
    pts = np.concatenate([m32, np.nextafter(m32, -inf), np.nextafter(m32, inf)])
    bits = pts.view(U32)
    return np.concatenate([bits, bits | U32(0x80000000)])


def format_corners(fmt):
    """FP32 bits of per-format corners: ±max, max + ulp, the overflow threshold ± FP32 ulp,
    min subnormal, half and 1.5 x half min subnormal (ties), min normal, every exact value
    (round trip) for formats up to 16 bits, plus ``FP32_CORNERS``."""
    mx, ms = fmt.max_finite, fmt.min_subnormal
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    vals = [mx, mx + ulp_top, mx + ulp_top / 2, 2 * mx, ms, ms / 2, 1.5 * ms / 2, ms / 4,
            2.0 ** fmt.emin, 2.0 ** fmt.emin - ms / 2, 1.0, 1.0 + 2.0 ** -(fmt.man_bits + 1)]
    v32 = np.array([v for v in vals if v < 3.4e38], dtype=np.float64).astype(np.float32)
    inf = np.float32(np.inf)
    v32 = np.concatenate([v32, np.nextafter(v32, -inf), np.nextafter(v32, inf)])
    bits = v32.view(U32)
    parts = [bits, bits | U32(0x80000000), FP32_CORNERS]
    if fmt.width <= 16:
        parts.append(gf.decode_bits(np.arange(1 << fmt.width, dtype=np.uint32), fmt))
    return np.concatenate(parts).astype(U32)


def random_fp32(rng, n, fmt):
    """``n`` FP32 bit patterns: 1/4 uniform over all 2**32 patterns, 3/4 with an exponent
    within a few binades of ``fmt``'s range (subnormal, normal and overflow; FP32 subnormals
    when that range reaches below 2**-126), random sign and mantissa."""
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(U32)
    lo = max(0, fmt.emin - fmt.man_bits - 3 + 127)
    hi = min(254, max(lo, fmt.emax + 3 + 127))
    e = rng.integers(lo, hi + 1, n).astype(U32)
    near = (bits & U32(0x807FFFFF)) | (e << U32(23))
    # a sixteenth keep only the top man_bits + 2 mantissa bits: exact values and ties
    keep = min(23, fmt.man_bits + 2)
    short_mask = U32(0xFF800000 | (((1 << keep) - 1) << (23 - keep)))
    near = np.where(rng.random(n) < 1 / 16, near & short_mask, near)
    return np.where(rng.random(n) < 0.25, bits, near).astype(U32)


def expected_convert(formats, xbits, fsel, sr, prng):
    """Golden codes for a stream; ``prng`` (golden XorWow) supplies one word per SR element,
    in stream order, and advances by their count."""
    xbits, fsel, sr = (np.asarray(a) for a in (xbits, fsel, sr))
    srm = sr.astype(bool)
    rand = np.zeros(len(xbits), dtype=U32)
    rand[srm] = prng.next_n(int(srm.sum()))
    out = np.zeros(len(xbits), dtype=np.int64)
    for k, f in enumerate(formats):
        sel = fsel == k
        a, b = sel & ~srm, sel & srm
        out[a] = gf.convert_rne_bits(xbits[a], f)
        out[b] = gf.convert_sr_bits(xbits[b], f, rand[b])
    return out


def expected_widen(formats, codes, fsel):
    out = np.zeros(len(codes), dtype=np.int64)
    for k, f in enumerate(formats):
        sel = fsel == k
        out[sel] = gf.decode_bits(codes[sel].astype(np.uint32), f)
    return out


__all__ = ["FP32_CORNERS", "finite_values", "midpoints", "format_corners", "random_fp32",
           "expected_convert", "expected_widen", "GoldenXorWow", "E8M0"]
