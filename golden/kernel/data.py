# SPDX-License-Identifier: Apache-2.0
"""Data in and out of kernel tensors as numbers: numpy float arrays to element codes (the
project's RNE conversion, :func:`golden.formats.convert_rne`) and codes back to numpy arrays of
the tensor's format.

In (``Kernel.dram_tensor(data=...)``):

- ``float32`` and ``float16`` arrays (every value an FP32 value) are converted by
  :func:`golden.formats.convert_rne_bits`, round to nearest even; NaN becomes the format's
  canonical NaN (sign kept), overflow follows the format (Inf, or the largest finite value for
  the saturating ``fp8_e4m3fn``).
- ``float64`` arrays are rounded **once** to the target format: first to FP32 by
  round-to-odd (truncate, and set the last bit when anything was cut off), then by the RNE
  conversion. FP32 has at least two more significand bits than every narrower format and
  covers its exponent range, so this equals one correct rounding of the float64 value; a plain
  ``astype(np.float32)`` first would double-round (e.g. ``1 + 2**-8 + 2**-30`` to bf16 gives
  ``1`` through float32, ``1 + 2**-7`` correctly). FP32 tensors take ``astype(np.float32)``
  (one RNE rounding).
- An ``ml_dtypes`` array is accepted only for the format it is exactly (:data:`VALUE_DTYPES`):
  its codes are taken as they are.
- Integer arrays are refused (codes go through the named argument ``codes=``), so are
  ``ml_dtypes`` types of another format.

Out (:meth:`KernelProgram.result`): the values as a numpy array of :func:`value_dtype` (the
``ml_dtypes`` type that is exactly the format, else ``float32``: fp32, tf32, cfp8), or the
codes (``uint32``) on request.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from golden.ap import ELEM_BYTES
from golden.formats import convert_rne_bits, decode_bits

__all__ = ["VALUE_DTYPES", "value_dtype", "data_codes", "check_tensor_codes", "codes_values"]

#: Tensor format -> the numpy / ``ml_dtypes`` type that is exactly that format.
VALUE_DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "fp16": np.dtype(np.float16),
                "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
                "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
                "fp8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
                "e8m0": np.dtype(ml_dtypes.float8_e8m0fnu)}

_ML_TYPES = {np.dtype(getattr(ml_dtypes, n)) for n in dir(ml_dtypes)
             if n.startswith(("float", "bfloat", "int", "uint")) and not n.startswith("finfo")
             and isinstance(getattr(ml_dtypes, n), type)}


def value_dtype(dtype):
    """The numpy dtype results of a ``dtype`` tensor read back as (``float32`` where no
    ``ml_dtypes`` type is exactly the format)."""
    return VALUE_DTYPES.get(dtype, np.dtype(np.float32))


def check_tensor_codes(name, dtype, codes):
    """``codes`` as ``uint32`` element codes of ``dtype`` for tensor ``name``:
    ``TypeError`` unless integers, ``ValueError`` unless each fits the format's width."""
    a = np.asarray(codes)
    bits = 8 * ELEM_BYTES[dtype]
    if a.dtype.kind not in "ui":
        raise TypeError(f"dram_tensor {name!r} codes must be an integer array of {dtype} codes, "
                        f"not dtype {a.dtype} (pass float values as data=)")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= 1 << bits:
            raise ValueError(f"dram_tensor {name!r} codes must be in [0, {(1 << bits) - 1:#x}] "
                             f"({bits}-bit {dtype} codes), not {lo if lo < 0 else hi:#x}")
    return a.astype(np.uint32)


def _f64_to_f32_odd(x):
    """FP32 bits of the float64 array ``x`` rounded to odd (exact values unchanged)."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        away = np.isfinite(x) & (np.abs(f.astype(np.float64)) > np.abs(x))
        f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
        inexact = np.isfinite(x) & (f.astype(np.float64) != x)
    return f.view(np.uint32) | inexact.astype(np.uint32)


def data_codes(cfg, name, dtype, data):
    """``uint32`` element codes of ``dtype`` for the float array ``data`` of tensor ``name``
    (the module docstring's rules)."""
    a = np.asarray(data)
    if a.dtype.kind in "uib":
        raise TypeError(f"dram_tensor {name!r} data must be a float array (float32, float64 or "
                        f"the {dtype} type), not integer dtype {a.dtype}: pass {dtype} element "
                        f"codes as codes=")
    if dtype in VALUE_DTYPES and a.dtype == VALUE_DTYPES[dtype]:
        return a.view(f"u{a.itemsize}").astype(np.uint32)
    if a.dtype in _ML_TYPES or a.dtype.kind != "f" or a.dtype.itemsize > 8:
        raise TypeError(f"dram_tensor {name!r} data of dtype {a.dtype} does not fit format "
                        f"{dtype}: give float32 or float64 values (converted by RNE)"
                        + (f" or {VALUE_DTYPES[dtype]}" if dtype in VALUE_DTYPES else ""))
    if dtype == "e8m0":
        raise TypeError(f"dram_tensor {name!r} of format e8m0 takes ml_dtypes.float8_e8m0fnu "
                        f"data or codes=, not dtype {a.dtype}")
    if a.dtype == np.float64:
        if dtype == "fp32":
            with np.errstate(over="ignore"):
                return a.astype(np.float32).view(np.uint32).astype(np.uint32)
        bits = _f64_to_f32_odd(a)
    else:
        bits = a.astype(np.float32).view(np.uint32)
    if dtype == "fp32":
        return bits.astype(np.uint32)
    return np.asarray(convert_rne_bits(bits, cfg.fmt(dtype)), np.uint32)


def codes_values(cfg, dtype, codes):
    """The values of ``dtype`` element ``codes`` as an array of :func:`value_dtype`."""
    c = np.asarray(codes, np.uint32)
    vt = VALUE_DTYPES.get(dtype)
    if vt is not None:
        return c.astype(f"u{vt.itemsize}").view(vt)
    if dtype != "fp32":
        c = np.asarray(decode_bits(c, cfg.fmt(dtype)), np.uint32)
    return c.view(np.float32)
