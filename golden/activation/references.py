# SPDX-License-Identifier: Apache-2.0
"""float64 references of the activation functions, independent of the tables, and the ULP
error measure the accuracy bounds of ``docs/scalar.md`` §2 are stated in."""

from __future__ import annotations

import math

import numpy as np

from golden.activation.table_format import FUNCTION_IDS, FUNCTIONS
from rtl.config import FP32

__all__ = ["reference", "ulp_error", "DOMAINS"]

_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _sigmoid64(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus64(x):
    with np.errstate(over="ignore"):
        return np.where(x > 0, x + np.log1p(np.exp(-np.abs(x))), np.log1p(np.exp(np.minimum(x, 0))))


def _gelu_tanh64(x):
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
    return x * _sigmoid64(2.0 * u)                # 0.5 * (1 + tanh(u)) == sigmoid(2u), no cancel


def _ref_impl(name, x):
    with np.errstate(all="ignore"):
        if name == "identity":
            return x.copy()
        if name == "relu":
            return np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
        if name == "exp":
            return np.exp(x)
        if name == "tanh":
            return np.tanh(x)
        if name == "sigmoid":
            return _sigmoid64(x)
        if name == "gelu":
            return 0.5 * x * _erfc(-x / math.sqrt(2.0)).astype(np.float64)
        if name == "gelu_tanh":
            return _gelu_tanh64(x)
        if name == "silu":
            return x * _sigmoid64(x)
        if name == "softplus":
            return _softplus64(x)
        if name == "erf":
            return _erf(x).astype(np.float64)
        if name == "log":
            return np.log(x)
        if name == "sqrt":
            return np.sqrt(x)
        if name == "rsqrt":
            return 1.0 / np.sqrt(x)
        if name == "reciprocal":
            return 1.0 / x
        if name == "square":
            return x * x
        if name == "sign":
            return np.sign(x)
        if name == "abs":
            return np.abs(x)
    raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")


def reference(name, x):
    """float64 reference ``f(x)`` (``x`` float64 array), independent of the tables."""
    if name not in FUNCTION_IDS:
        raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(_ref_impl(name, x), dtype=np.float64)
    if name in ("gelu", "gelu_tanh", "silu"):       # x * (0 at -inf): the limit is -0, not NaN
        y = np.where(x == -np.inf, -0.0, y)
    return y


def _ulp(v, fmt):
    """ULP of ``fmt`` at float64 magnitudes ``v`` (subnormal ULP below the normal range)."""
    emin = 1 - fmt.bias
    a = np.abs(v)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(a > 0, e, emin), emin)
    return np.ldexp(1.0, (e - fmt.man_bits).astype(np.int64))


def ulp_error(y, ref, fmt=FP32):
    """``|y - ref|`` in ULPs of ``fmt`` at ``ref`` (float64 arrays; ``y`` already in ``fmt``).

    NaN vs NaN and equal infinities count 0; an infinity where the reference rounds to a finite
    value (or the reverse), or NaN against a number, counts ``inf``.
    """
    y = np.asarray(y, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    fmax = (2.0 - 2.0 ** -fmt.man_bits) * 2.0 ** (2 ** fmt.exp_bits - 2 - fmt.bias)
    rounds_inf = np.abs(ref) >= fmax + 0.5 * _ulp(np.float64(fmax), fmt)
    ref_r = np.where(rounds_inf, np.copysign(np.inf, ref), ref)
    with np.errstate(invalid="ignore"):
        err = np.abs(y - ref_r) / _ulp(ref_r, fmt)
    both_nan = np.isnan(y) & np.isnan(ref_r)
    same_inf = np.isinf(y) & np.isinf(ref_r) & (y == ref_r)
    err = np.where(both_nan | same_inf, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


#: Documented input domain of each accuracy bound: (lo, hi) over the input x (inclusive),
#: ``None`` = every finite input. Outside it the results are the documented specials/limits.
DOMAINS = {n: None for n in FUNCTIONS}
