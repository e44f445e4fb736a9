# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy model of the arithmetic units (``docs/number-formats.md`` §5): the exact
multiplier, the FP32 adder and the fused multiply-accumulate.

FP32 operands and results are ``np.uint32`` bit patterns; multiplier operands are codes of any
FP32-subset :class:`rtl.config.FPFormat`. NaN results are the canonical ``0x7FC00000``.
"""

from __future__ import annotations

import numpy as np

from golden.formats import FP32_QNAN, check_int_array, decode

__all__ = ["mul_exact", "add_fp32", "fma_fp32", "fma_fp32_f64", "round_f64_to_odd"]


def _bits32(name, a):
    a = np.asarray(a)
    check_int_array(name, a, 32)
    return a.astype(np.uint32, copy=False)


def _canon(f32):
    """FP32 bits of a float32 array with every NaN replaced by ``0x7FC00000``."""
    bits = f32.view(np.uint32)
    return np.where(np.isnan(f32), np.uint32(FP32_QNAN), bits).astype(np.uint32)


def mul_exact(a_codes, fmt_a, b_codes, fmt_b):
    """Exact products (``np.float64``) of ``a_codes`` in ``fmt_a`` and ``b_codes`` in ``fmt_b``.

    Exact because both are FP32 subsets (<= 48 significant bits, exponents in float64's normal
    range). NaN (``np.nan``) if either is NaN or for ``0 x Inf``; Inf if either is Inf (sign
    XOR); zero sign is the XOR of the signs.
    """
    a = decode(a_codes, fmt_a).astype(np.float64)
    b = decode(b_codes, fmt_b).astype(np.float64)
    with np.errstate(invalid="ignore"):
        p = a * b
    return np.where(np.isnan(p), np.nan, p)


def add_fp32(a_bits, b_bits):
    """FP32 adder: bits of ``RNE_fp32(a + b)`` (IEEE 754 with subnormals), NaN canonical."""
    a = _bits32("a_bits", a_bits).view(np.float32)
    b = _bits32("b_bits", b_bits).view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
    return _canon(np.asarray(s, dtype=np.float32))


def round_f64_to_odd(hi, lo):
    """Round the exact sum ``hi + lo`` (``hi = RNE(hi + lo)``, TwoSum form) to 53 bits with
    round-to-odd: the truncation of the exact value with its last bit forced to 1 if inexact."""
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    bits = hi.view(np.uint64).copy()
    inexact = (lo != 0) & np.isfinite(hi)
    # hi rounded away from zero when lo has the opposite sign: truncation is one ulp below
    # (in magnitude), i.e. bits - 1 (hi is never 0 or a power-of-two corner issue: bits - 1
    # of a positive-magnitude encoding is the next smaller magnitude).
    away = inexact & (np.signbit(lo) != np.signbit(hi))
    bits = np.where(away, bits - np.uint64(1), bits)
    bits = np.where(inexact, bits | np.uint64(1), bits)
    return bits.view(np.float64)


def fma_fp32_f64(c_bits, p):
    """Bits of ``RNE_fp32(c + p)`` for FP32 ``c_bits`` and exact float64 products ``p`` (one
    rounding): float64 TwoSum, round to odd, then float64 -> float32 RNE. NaN canonical."""
    c32 = _bits32("c_bits", c_bits).view(np.float32)
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        c = c32.astype(np.float64)                        # exact (sNaN quietly becomes NaN)
        s = c + p
        bb = s - c
        err = (c - (s - bb)) + (p - bb)
        ro = round_f64_to_odd(s, np.where(np.isfinite(s), err, 0.0))
        r = ro.astype(np.float32)
    return _canon(np.asarray(r, dtype=np.float32))


def fma_fp32(c_bits, a_codes, fmt_a, b_codes, fmt_b):
    """Fused MAC: bits of ``RNE_fp32(c + a * b)`` with the exact product and a single rounding.

    ``c_bits`` are FP32 bit patterns; ``a_codes``/``b_codes`` codes of ``fmt_a``/``fmt_b``.
    IEEE signed zeros (``x + (-x) = +0``, ``(-0) + (-0) = -0``), overflow to ±Inf, and the
    canonical NaN for NaN inputs, ``0 x Inf`` and ``Inf - Inf``.
    """
    return fma_fp32_f64(c_bits, mul_exact(a_codes, fmt_a, b_codes, fmt_b))
