# SPDX-License-Identifier: Apache-2.0
"""OCP MX block quantization (``docs/number-formats.md`` §1, §6): one E8M0 scale per block of
``block`` elements of an FP32-subset element format."""

from __future__ import annotations

import dataclasses

import numpy as np

from golden.formats import (as_f32_bits, check_fmt, convert_core, check_codes, decode,
                            decode_e8m0)
from rtl.config import E8M0

__all__ = ["mx_scale_exp", "mx_quantize", "mx_dequantize"]


def _check_block(block, n):
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block must be a positive integer, not {block!r}")
    if n % block:
        raise ValueError(f"the last axis ({n}) must be a multiple of block ({block})")
    return int(block)


def mx_scale_exp(amax_bits, elem_fmt):
    """``clamp(floor(log2 amax) - elem_fmt.emax, -127, 127)`` for positive finite FP32 ``amax``
    bit patterns (int64 array)."""
    a = np.asarray(amax_bits).astype(np.int64)
    ex = a >> 23
    man = a & 0x7FFFFF
    _, bl = np.frexp(np.maximum(man, 1).astype(np.float64))     # bit length of a subnormal
    e = np.where(ex > 0, ex - 127, bl.astype(np.int64) - 150)
    return np.clip(e - elem_fmt.emax, -127, 127)


def mx_quantize(x, elem_fmt, block):
    """Quantize ``x`` (``np.float32``, shape ``[..., nblocks * block]``) to MX (§6).

    Returns
    -------
    scales : np.ndarray of uint8, shape ``[..., nblocks]``
        E8M0 codes: ``0xFF`` for a block holding a NaN or Inf, ``0`` for an all-zero block,
        else ``clamp(floor(log2 amax) - elem_fmt.emax, -127, 127) + 127``.
    codes : np.ndarray, shape of ``x``
        Element codes ``convert_rne(x / 2**scale_exp, elem_fmt)`` (exact scaling) with
        saturation to ±max finite for every element format (OCP MX §6.3; E5M2 elements never
        become Inf); 0 in NaN/Inf blocks; signed zeros in zero blocks.
    """
    check_fmt(elem_fmt)
    bits = as_f32_bits(x)
    if bits.ndim < 1:
        raise ValueError("x must have at least one axis (the blocked axis)")
    block = _check_block(block, bits.shape[-1])
    nb = bits.shape[-1] // block
    xb = bits.reshape(bits.shape[:-1] + (nb, block))
    mag = (xb & np.uint32(0x7FFFFFFF)).astype(np.int64)
    bad = np.any(mag >= 0x7F800000, axis=-1)
    amax = mag.max(axis=-1, initial=0)
    zero = amax == 0
    sexp = mx_scale_exp(np.where(bad | zero, 1 << 23, amax), elem_fmt)
    sexp = np.where(zero, -127, sexp)
    scales = np.where(bad, 0xFF, sexp + 127).astype(np.uint8)
    # elements always saturate (OCP MX §6.3), also for an IEEE element format such as E5M2
    sat_fmt = dataclasses.replace(elem_fmt, overflow="saturate")
    codes = convert_core(xb, sat_fmt, scale_exp=np.where(bad, 0, sexp)[..., None])
    codes = np.where(bad[..., None], 0, codes).astype(codes.dtype)
    return scales, codes.reshape(bits.shape)


def mx_dequantize(scales, codes, elem_fmt, block, dtype=np.float32):
    """Values ``2**(scale - 127) * element`` (§1) of MX data, shape of ``codes``.

    Exact: the product of an element and a power of two. A NaN scale (``0xFF``) makes its whole
    block NaN; NaN/Inf elements stay NaN/Inf. With ``dtype=np.float32`` a scale code that
    :func:`mx_quantize` never produces can push the product past FP32's range (±Inf); pass
    ``dtype=np.float64`` to get every product exactly.
    """
    check_fmt(elem_fmt)
    c = check_codes(codes, elem_fmt)
    s = check_codes(scales, E8M0, name="scales")
    if c.ndim < 1:
        raise ValueError("codes must have at least one axis (the blocked axis)")
    block = _check_block(block, c.shape[-1])
    nb = c.shape[-1] // block
    if s.shape != c.shape[:-1] + (nb,):
        raise ValueError(f"scales must have shape {c.shape[:-1] + (nb,)}, not {s.shape}")
    e = decode(c, elem_fmt).astype(np.float64).reshape(c.shape[:-1] + (nb, block))
    sc = decode_e8m0(s).astype(np.float64)[..., None]
    with np.errstate(invalid="ignore", over="ignore"):
        v = (e * sc).reshape(c.shape).astype(dtype)
    return v
