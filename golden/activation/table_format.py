# SPDX-License-Identifier: Apache-2.0
"""The activation table format (``docs/scalar.md`` §Table): the table record
:class:`ActTable`, its mode and reduction constants, and the FP32 fused MAC every step of the
function unit uses (:func:`fma32`). The evaluator is :mod:`golden.activation.evaluator`, the
tables come from :mod:`golden.activation.fit`, their word image from
:mod:`golden.activation.image`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from golden.arith import fma_fp32_f64
from rtl.config import ACT_DEGREE
from rtl.isa import ACT_FUNCTIONS as FUNCTIONS

__all__ = ["FUNCTIONS", "FUNCTION_IDS", "DEGREE", "NCOEF", "SYM_NONE", "SYM_ODD", "SYM_EVEN",
           "PRE_DIRECT", "PRE_LOG", "PRE_EVEN", "PRE_PLAIN", "LOG2E", "MAGIC", "LN2_HI",
           "LN2_LO", "ZCLAMP", "ONE", "NEG_ZERO", "ActTable", "fma32"]

DEGREE = ACT_DEGREE
NCOEF = DEGREE + 1
SYM_NONE, SYM_ODD, SYM_EVEN = 0, 1, 2
PRE_DIRECT, PRE_LOG, PRE_EVEN, PRE_PLAIN = 0, 1, 2, 3

#: FP32 constants of the exp reduction (bit patterns).
LOG2E = 0x3FB8AA3B                 # RNE_fp32(1 / ln 2)
MAGIC = 0x4B400000                 # 1.5 * 2^23: fma(x, log2e, MAGIC) rounds x*log2e to an integer
LN2_HI = 0x3F317218                # RNE_fp32(ln 2)
LN2_LO = int(np.float32(math.log(2) - float(np.uint32(LN2_HI).view(np.float32)))
             .view(np.uint32))
ZCLAMP = 0x43480000                # 200.0: |z| clamped before the exp reduction
ONE = 0x3F800000
NEG_ZERO = 0x80000000

# FUNCTIONS: the function names in function-id order (rtl.isa.ACT_FUNCTIONS).
FUNCTION_IDS = {n: i for i, n in enumerate(FUNCTIONS)}


def fma32(a, b, c):
    """Bits of ``RNE_fp32(a * b + c)`` for FP32 bit arrays (one rounding, NaN canonical)."""
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.asarray(a, dtype=np.uint32).view(np.float32).astype(np.float64)
        b = np.asarray(b, dtype=np.uint32).view(np.float32).astype(np.float64)
        p = a * b
    return fma_fp32_f64(np.asarray(c, dtype=np.uint32), p)


@dataclass(frozen=True)
class ActTable:
    """One function's table (what ``ACT_TABLE_LOAD`` writes; ``docs/scalar.md`` §Table).

    Members
    -------
    name, fid : str, int
    sym, pre : int
        Symmetry (``SYM_*``) and reduction mode (``PRE_*``).
    exp_en : bool
        ``z`` with biased exponent ``>= bmax`` uses the exp segments.
    bmin, bmax : int
        Biased-exponent range of ``z`` covered by the binade map.
    q2 : int
        Post exponent ``E * q2 / 2`` (mantissa modes): 1 sqrt, -1 rsqrt, -2 reciprocal.
    log_add, neg_nan : bool
    mb, base : tuple of tuple of int
        Per half (2) and binade (``bmax - bmin``): mantissa bits indexing segments, first segment.
    tiny, big : tuple of int
        Per half: segment below ``bmin`` / at or above ``bmax`` (without ``exp_en``).
    exp_base, kmin, kmax : int
    centre : np.ndarray (S,) uint32
    coef : np.ndarray (S, 7) uint32
        ``coef[s, i]`` multiplies ``t**i``.
    var_r, scale, mulx : np.ndarray (S,) bool
    spec : dict
        FP32 bits for ``"+inf"``, ``"-inf"``, ``"+0"``, ``"-0"``.
    tiny_odd : bool
        The tiny segment's result is rounded to odd towards ``f(x) > x/2`` (:func:`evaluate`).
    """

    name: str
    fid: int
    sym: int
    pre: int
    exp_en: bool
    bmin: int
    bmax: int
    q2: int
    log_add: bool
    neg_nan: bool
    mb: tuple
    base: tuple
    tiny: tuple
    big: tuple
    exp_base: int
    kmin: int
    kmax: int
    centre: np.ndarray
    coef: np.ndarray
    var_r: np.ndarray
    scale: np.ndarray
    mulx: np.ndarray
    spec: dict
    tiny_odd: bool = False

    @property
    def segments(self):
        return len(self.centre)
