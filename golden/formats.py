# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy model of the number formats: decode (widen to FP32) and FP32 -> format
conversion with round-to-nearest-even or stochastic rounding.

Implements ``docs/number-formats.md`` §1-§3 for every :class:`rtl.config.FPFormat` (any exponent
width, mantissa width and bias that is an FP32 subset) and the ``e8m0`` scale format.

Conventions
-----------
- *codes* are unsigned integer arrays holding the raw code (sign in the MSB of the format's width).
  Functions returning codes use the narrowest of ``uint8``/``uint16``/``uint32`` that holds them.
- FP32 values come either as ``np.float32`` arrays (``convert_rne``/``convert_sr``) or as
  ``np.uint32`` bit patterns (``convert_rne_bits``/``convert_sr_bits``); the two never mix.
- Everything is vectorized; no Amaranth import.
"""

from __future__ import annotations

import functools

import numpy as np

from rtl.config import E8M0, FPFormat

__all__ = [
    "FP32_QNAN", "FP32_NEG_QNAN", "FP32_INF", "FP32_NEG_INF", "FP32_SIGN",
    "f32_bits", "bits_f32", "code_dtype", "check_codes",
    "decode", "decode_bits", "decode_e8m0", "decode_e8m0_bits",
    "convert_rne", "convert_rne_bits", "convert_sr", "convert_sr_bits",
    "is_nan_code", "is_inf_code", "quantize",
]

#: Canonical FP32 quiet NaN (positive): what arithmetic produces (contract §2).
FP32_QNAN = 0x7FC00000
#: Canonical FP32 quiet NaN with the sign bit set (a widened negative NaN).
FP32_NEG_QNAN = 0xFFC00000
FP32_INF = 0x7F800000
FP32_NEG_INF = 0xFF800000
FP32_SIGN = 0x80000000


# --- FP32 bit helpers ---------------------------------------------------------------------------

def f32_bits(x):
    """FP32 bit patterns (``np.uint32``) of ``x`` (cast to ``np.float32`` first, RNE)."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def bits_f32(u):
    """``np.float32`` values of the FP32 bit patterns ``u``."""
    u = np.asarray(u)
    if u.dtype != np.uint32:
        check_int_array("u", u, 32)
        u = u.astype(np.uint32)
    return u.view(np.float32)


def code_dtype(width):
    """Narrowest unsigned numpy dtype holding a ``width``-bit code."""
    if width <= 8:
        return np.dtype(np.uint8)
    if width <= 16:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32)


def check_int_array(name, a, width):
    """``TypeError``/``ValueError`` unless ``a`` holds unsigned codes of ``width`` bits."""
    if a.dtype.kind not in "ui":
        raise TypeError(f"{name} must be an array of unsigned integer codes, not dtype {a.dtype}")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= (1 << width):
            raise ValueError(f"{name} must be in [0, {(1 << width) - 1}] ({width}-bit codes), "
                             f"not {lo if lo < 0 else hi}")


def check_codes(codes, fmt, name="codes"):
    """``codes`` as an array of ``code_dtype(fmt.width)``; ``TypeError``/``ValueError`` if they
    are not integers or do not fit in ``fmt.width`` bits."""
    a = np.asarray(codes)
    check_int_array(name, a, fmt.width)
    return a.astype(code_dtype(fmt.width), copy=False)


def check_fmt(fmt):
    """``TypeError``/``ValueError`` unless ``fmt`` is an FPFormat within FP32."""
    if not isinstance(fmt, FPFormat):
        raise TypeError(f"fmt must be an rtl.config.FPFormat, not {fmt!r}")
    if not fmt.is_fp32_subset:
        raise ValueError(f"fmt must be a subset of FP32 (is_fp32_subset), not {fmt!r}")


def as_f32_bits(x, name="x"):
    """FP32 bit patterns of the float array ``x``; refuses integers and inexact float casts."""
    a = np.asarray(x)
    if a.dtype == np.float32:
        return a.view(np.uint32)
    if a.dtype.kind != "f":
        raise TypeError(f"{name} must be a np.float32 array (use the *_bits variant for uint32 "
                        f"FP32 bit patterns), not dtype {a.dtype}")
    f = a.astype(np.float32)
    with np.errstate(invalid="ignore"):
        ok = (f.astype(a.dtype) == a) | (np.isnan(a) & np.isnan(f))
    if not np.all(ok):
        raise ValueError(f"{name} must hold values exactly representable in FP32 (pass "
                         f"np.float32 to round explicitly), not dtype {a.dtype} with inexact "
                         f"values such as {a[~ok].flat[0]!r}")
    return f.view(np.uint32)


# --- decode (widen to FP32) ---------------------------------------------------------------------

def _decode_bits_generic(codes, fmt):
    c = np.asarray(codes).astype(np.uint64)
    M, EB = fmt.man_bits, fmt.exp_bits
    s = (c >> np.uint64(EB + M)) & np.uint64(1)
    e = ((c >> np.uint64(M)) & np.uint64((1 << EB) - 1)).astype(np.int64)
    m = (c & np.uint64((1 << M) - 1)).astype(np.int64)
    sub = e == 0
    sig = np.where(sub, m, m + (1 << M)).astype(np.float64)
    exp = np.where(sub, 1, e) - fmt.bias - M
    val = np.ldexp(sig, exp)                                # exact: <= 24 bits, in range
    with np.errstate(over="ignore"):                        # Inf/NaN codes, replaced below
        bits = val.astype(np.float32).view(np.uint32).astype(np.uint32)
    top = (1 << EB) - 1
    if fmt.specials == "ieee":
        bits = np.where((e == top) & (m == 0), np.uint32(FP32_INF), bits)
        bits = np.where((e == top) & (m != 0), np.uint32(FP32_QNAN), bits)
    elif fmt.specials == "fn":
        bits = np.where((e == top) & (m == (1 << M) - 1), np.uint32(FP32_QNAN), bits)
    bits = bits | (s.astype(np.uint32) << np.uint32(31))
    return bits.astype(np.uint32)


@functools.lru_cache(maxsize=64)
def _decode_lut(fmt):
    lut = _decode_bits_generic(np.arange(1 << fmt.width, dtype=np.uint32), fmt)
    lut.setflags(write=False)
    return lut


def decode_bits(codes, fmt):
    """FP32 bit patterns (``np.uint32``) of ``codes`` in ``fmt``: exact widening (contract §5).

    NaN codes give ``S.11111111.10...0`` (sign kept, payload dropped); Inf gives ±Inf.
    ``fmt`` may also be ``rtl.config.E8M0``.
    """
    if fmt is E8M0:
        return decode_e8m0_bits(codes)
    check_fmt(fmt)
    c = check_codes(codes, fmt)
    if fmt.width <= 16:
        return _decode_lut(fmt)[c]
    return _decode_bits_generic(c, fmt)


def decode(codes, fmt):
    """Exact ``np.float32`` values of ``codes`` in ``fmt`` (see :func:`decode_bits`)."""
    return decode_bits(codes, fmt).view(np.float32)


def decode_e8m0_bits(codes):
    """FP32 bits of E8M0 scale codes: ``2**(c - 127)``; code 0xFF gives ``0x7FC00000``."""
    c = check_codes(codes, E8M0).astype(np.int64)
    # 2**(c-127): normal for c >= 1 (exponent field c), c == 0 is the subnormal 2**-127.
    bits = np.where(c == 0, np.int64(1 << 22), c << 23)
    bits = np.where(c == 0xFF, np.int64(FP32_QNAN), bits)
    return bits.astype(np.uint32)


def decode_e8m0(codes):
    """``np.float32`` values ``2**(c - 127)`` of E8M0 codes (0xFF is NaN)."""
    return decode_e8m0_bits(codes).view(np.float32)



def is_nan_code(codes, fmt):
    """Boolean mask of NaN codes of ``fmt``."""
    check_fmt(fmt)
    c = check_codes(codes, fmt).astype(np.uint64)
    mag = c & np.uint64((1 << (fmt.width - 1)) - 1)
    if fmt.specials == "ieee":
        return mag > np.uint64(fmt.inf_code)
    if fmt.specials == "fn":
        return mag == np.uint64(fmt.nan_code)
    return np.zeros(c.shape, dtype=bool)


def is_inf_code(codes, fmt):
    """Boolean mask of ±Inf codes of ``fmt``."""
    check_fmt(fmt)
    c = check_codes(codes, fmt).astype(np.uint64)
    mag = c & np.uint64((1 << (fmt.width - 1)) - 1)
    if fmt.specials == "ieee":
        return mag == np.uint64(fmt.inf_code)
    return np.zeros(c.shape, dtype=bool)


# --- conversion FP32 -> fmt (contract §3) --------------------------------------------------------

_U = np.uint64


def convert_core(bits, fmt, rand=None, scale_exp=None):
    """Codes of ``fmt`` for the values ``f32(bits) / 2**scale_exp`` (exact scaling).

    ``rand`` None: RNE. Otherwise a uint32 array (same shape): stochastic rounding.
    ``scale_exp``: None or an int64 array broadcastable to ``bits``.
    """
    b = np.asarray(bits, dtype=np.uint32).astype(np.uint64)
    M, bias = fmt.man_bits, fmt.bias
    emin = 1 - bias
    s = b >> _U(31)
    ex = ((b >> _U(23)) & _U(0xFF)).astype(np.int64)
    man = b & _U(0x7FFFFF)
    is_nan = (ex == 255) & (man != 0)
    is_inf = (ex == 255) & (man == 0)
    is_zero = (ex == 0) & (man == 0)
    finite_nz = ~(is_nan | is_inf | is_zero)

    sub = ex == 0
    sig = np.where(sub, man, man | _U(0x800000))
    lsb_e = np.where(sub, -149, ex - 150)
    if scale_exp is not None:
        lsb_e = lsb_e - np.asarray(scale_exp, dtype=np.int64)
    # bit length of the significand (24 for normals); frexp is exact for integers < 2**24
    _, bl = np.frexp(np.where(finite_nz, sig, _U(1)).astype(np.float64))
    bitlen = np.where(sub, bl, 24).astype(np.int64)
    E = lsb_e + bitlen - 1                               # floor(log2 |x|)
    Eq = np.maximum(E, emin)
    qe = Eq - M                                          # log2 of the quantum
    shift = qe - lsb_e                                   # bits discarded (negative: none)

    neg = shift < 0
    sh = np.clip(shift, 0, 63).astype(np.uint64)
    lsh = np.clip(-shift, 0, 63).astype(np.uint64)
    I = np.where(neg, sig << lsh, sig >> sh)
    rem = np.where(neg, _U(0), sig & ((_U(1) << sh) - _U(1)))
    if rand is None:
        half = np.where(sh > 0, _U(1) << (np.maximum(sh, _U(1)) - _U(1)), _U(0))
        up = (sh > 0) & ((rem > half) | ((rem == half) & ((I & _U(1)) == _U(1))))
    else:
        r = np.asarray(rand)
        if r.shape != np.shape(bits):
            raise ValueError(f"rand must have the shape of x {np.shape(bits)}, not {r.shape}")
        check_int_array("rand", r, 32)
        r = r.astype(np.uint64)
        # F32 = floor(rem * 2**32 / 2**shift)
        big = shift > 32
        f32 = np.where(big, rem >> np.clip(shift - 32, 0, 63).astype(np.uint64),
                       rem << np.clip(32 - shift, 0, 63).astype(np.uint64))
        up = (f32 + r) >= _U(1 << 32)
    I2 = (I + up.astype(np.uint64)).astype(np.int64)
    mag = ((Eq + bias - 1) << M) + I2                    # carries into the exponent naturally
    over = mag > fmt.max_finite_code
    if fmt.overflow == "inf":
        mag = np.where(over, fmt.inf_code, mag)
    else:
        mag = np.where(over, fmt.max_finite_code, mag)

    mag = np.where(finite_nz, mag, 0)
    if fmt.specials == "ieee":
        mag = np.where(is_inf, fmt.inf_code, mag)
    else:
        mag = np.where(is_inf, fmt.max_finite_code, mag)
    sign = s.astype(np.int64)
    if fmt.specials == "none":
        mag = np.where(is_nan, 0, mag)
        sign = np.where(is_nan, 0, sign)                 # NaN -> +0 (contract §2)
    else:
        mag = np.where(is_nan, fmt.nan_code, mag)
    code = (sign << (fmt.width - 1)) | mag
    return code.astype(code_dtype(fmt.width))


def convert_rne_bits(bits, fmt):
    """Codes of ``fmt`` for the FP32 bit patterns ``bits`` (uint32), round to nearest even."""
    check_fmt(fmt)
    b = np.asarray(bits)
    check_int_array("bits", b, 32)
    return convert_core(b, fmt)


def convert_rne(x, fmt):
    """Codes of ``fmt`` for the ``np.float32`` array ``x``, round to nearest even (§3).

    Other float dtypes are accepted only when every value is exactly an FP32 value (no hidden
    double rounding); integer arrays raise ``TypeError`` (use :func:`convert_rne_bits`).
    """
    check_fmt(fmt)
    return convert_core(as_f32_bits(x), fmt)


def convert_sr_bits(bits, fmt, rand):
    """Codes of ``fmt`` for FP32 bit patterns ``bits`` with stochastic rounding (§3), using one
    32-bit random word per element: ``rand`` is a uint32 array of the same shape."""
    check_fmt(fmt)
    b = np.asarray(bits)
    check_int_array("bits", b, 32)
    return convert_core(b, fmt, rand=rand)


def convert_sr(x, fmt, rand):
    """Codes of ``fmt`` for the ``np.float32`` array ``x`` with stochastic rounding (§3):
    round up (in magnitude) iff ``floor(F * 2**32) + rand >= 2**32``."""
    check_fmt(fmt)
    return convert_core(as_f32_bits(x), fmt, rand=rand)


def quantize(x, fmt):
    """``decode(convert_rne(x, fmt), fmt)``: the FP32 values after rounding to ``fmt``."""
    return decode(convert_rne(x, fmt), fmt)
