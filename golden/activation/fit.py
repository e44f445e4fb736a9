# SPDX-License-Identifier: Apache-2.0
"""Bit-exact model of the Scalar (activation) engine's function unit and its loadable tables
(``docs/scalar.md``).

An activation is ``y = f(RNE_fp32(x * scale + bias))``. ``f`` is evaluated from a *table*: a
small set of range-reduction modes, a segment map and, per segment, a centre and the seven
FP32 coefficients of a degree-6 polynomial. Every arithmetic step is an FP32 fused MAC with one
RNE rounding (``golden.arith.fma_fp32_f64``), so this numpy model is the hardware bit for bit.
A new function is a new table, not new hardware.

Datapath of one element (``x`` FP32 bits; every ``fma`` is ``RNE_fp32(a * b + c)``):

1. **Reduction.** ``DIRECT``: ``z = |x|`` (odd/even symmetry) or ``x``. Mantissa modes
   (``|x| = 2^E * m``, ``m`` in [1, 2), subnormals normalized): ``LOG`` ``z = m`` or ``m/2``
   (``E + 1``) so that ``z`` is in [0.75, 1.5); ``EVEN`` ``z = m`` or ``2m`` so that ``E`` is
   even (``z`` in [1, 4)); ``PLAIN`` ``z = m``.
2. **Exp reduction** (tables with ``exp_en``): ``zc = clamp(z, -200, 200)``,
   ``s = fma(zc, LOG2E, 1.5*2^23)``, ``kf = fma(s, 1, -1.5*2^23)`` (``k = rint(zc*log2e)``),
   ``r = fma(-kf, LN2_LO, fma(-kf, LN2_HI, zc))``.
3. **Segment.** ``exp_en`` and ``biased_exp(z) >= bmax``: ``exp_base + clamp(k, kmin - 1,
   kmax + 1) - (kmin - 1)``. Otherwise by the biased exponent ``b`` of ``z`` and the half
   ``h`` (the sign of ``x`` for asymmetric ``DIRECT`` tables, else 0): ``b < bmin`` -> ``tiny[h]``,
   ``b >= bmax`` -> ``big[h]``, else ``base[h][b - bmin] + (mantissa(z) >> (23 - mb[h][b - bmin]))``.
4. **Polynomial.** ``t = fma(v, 1, -centre)`` with ``v = r`` (segment flag ``var_r``) or ``z``;
   Horner ``p = c6; p = fma(p, t, c_i)`` for ``i = 5 .. 0`` (six fused MACs).
5. **Post.** ``mulx``: ``p = fma(p, zc, -0)``. ``log_add``: ``p = fma(E, LN2_HI, fma(E, LN2_LO,
   p))``. Scale: ``y = RNE_fp32(p * 2^PE)`` (subnormal results rounded once, overflow to Inf)
   with ``PE = k`` (segment flag ``scale``) ``+ E * q2 / 2``. ``tiny_odd`` tables (gelu,
   gelu_tanh, silu): in the tiny segment the magnitude ``Y`` of that result becomes
   ``(Y - d) | 1`` (``d``: :func:`_tiny_odd_down`), which turns ``RNE(x/2)`` into ``x/2 + 0``
   rounded to odd, so a later rounding to a narrower format is correct (``docs/scalar.md`` §2).
   Odd symmetry flips the sign for negative ``x``.
6. **Specials.** NaN -> canonical NaN; +-Inf and +-0 -> table constants; ``neg_nan`` tables
   give NaN for ``x < 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from golden.arith import fma_fp32_f64
from golden.formats import FP32_QNAN, convert_rne_bits
from rtl.config import (ACT_BINADES, ACT_DEGREE, ACT_HEADER_WORDS as TABLE_HEADER_WORDS,
                        ACT_MAP_BASE, ACT_SEG_BASE, ACT_SEG_STRIDE, DENSE_FORMAT_NAMES, FP32)
from rtl.isa import (ACT_FUNCTIONS as FUNCTIONS, ACT_REDUCE_IDLE as REDUCE_IDLE,
                     ACT_REDUCE_REDUCE as REDUCE_REDUCE, ACT_REDUCE_RESET as REDUCE_RESET,
                     ACT_REDUCE_RESET_REDUCE as REDUCE_RESET_REDUCE, DTYPES, E_FORMAT, E_OK, E_OPCODE, E_SHAPE, OP_ACT_COPY as OP_COPY,
                     OP_ACT_TABLE_LOAD, OP_ACT_TENSOR_SCALAR as OP_TENSOR_SCALAR, OP_ACTIVATION)

__all__ = [
    "FUNCTIONS", "FUNCTION_IDS", "DEGREE", "NCOEF", "SYM_NONE", "SYM_ODD", "SYM_EVEN",
    "PRE_DIRECT", "PRE_LOG", "PRE_EVEN", "PRE_PLAIN", "LOG2E", "MAGIC", "LN2_HI", "LN2_LO",
    "ZCLAMP", "ActTable", "table", "evaluate", "activation", "reference", "ulp_error",
    "DOMAINS", "fma32", "table_image", "activation_reduce", "REDUCE_IDLE", "REDUCE_RESET",
    "REDUCE_REDUCE", "REDUCE_RESET_REDUCE", "ActInstr", "check_instr", "execute", "sr_words",
    "OP_ACTIVATION",
    "OP_ACT_TABLE_LOAD", "OP_TENSOR_SCALAR", "OP_COPY", "E_OK", "E_OPCODE", "E_FORMAT", "E_SHAPE",
    "DTYPE_NAMES",
]

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


def _f(u):
    return float(np.uint32(u).view(np.float32))


def _b(v):
    return int(np.float32(v).view(np.uint32))


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


# --- evaluator (the hardware, bit for bit) ---------------------------------------------------

def _ldexp_rne(p_bits, pe):
    """Bits of ``RNE_fp32(p * 2^pe)`` (one rounding; ``p`` finite FP32 bits)."""
    p = np.asarray(p_bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    pe = np.clip(np.asarray(pe, dtype=np.int64), -400, 400)
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.ldexp(p, pe)                      # exact in float64 (|pe| <= 400, p FP32)
        out = v.astype(np.float32).view(np.uint32)
    return np.where(np.isnan(v), np.uint32(FP32_QNAN), out).astype(np.uint32)


def _split(a):
    """``(E, m_bits)`` with ``|x| = 2^E * m``, ``m`` in [1, 2) as FP32 bits (``a`` = |x| bits,
    nonzero finite; subnormals normalized)."""
    e = (a >> 23).astype(np.int64)
    man = (a & 0x7FFFFF).astype(np.int64)
    sub = e == 0
    # normalize subnormals: shift so that bit 23 is set
    nlz = np.where(sub & (man > 0), 23 - np.floor(np.log2(np.maximum(man, 1))).astype(np.int64), 0)
    man_n = np.where(sub, (man << nlz) & 0x7FFFFF, man)
    e_n = np.where(sub, 1 - nlz, e) - 127
    return e_n, man_n


def _tiny_odd_down(x):
    """The ``tiny_odd`` direction bit of FP32 inputs ``x``: 1 where ``x/2 + 0`` (a value just
    above ``x/2``) rounded to odd lies one unit below ``RNE(x/2)`` in magnitude.

    ``x/2`` is exact unless ``x``'s biased exponent is 0 or 1 and its last bit is set (then the
    FP32 bits, read as an integer, are proportional to the value, and ``x/2`` is the midpoint of
    ``k = |x| >> 1`` and ``k + 1``). Exact: the value just above ``x/2`` is one unit up in
    magnitude for ``x > 0`` (``d = 0``: ``Y | 1``), down for ``x < 0`` (``d = 1``: ``(Y - 1) |
    1``). A midpoint: ``RNE`` gave the even one of ``k``, ``k + 1``, round-to-odd wants the
    other one: ``k + 1`` (``d = 0``) when ``k`` is even, else ``k`` (``d = 1``).
    """
    x = np.asarray(x, np.uint32)
    exact = (((x >> 24) & 0x7F) != 0) | ((x & 1) == 0)
    return np.where(exact, x >> 31, (x >> 1) & 1).astype(np.uint32)


def evaluate(tab, x_bits):
    """Bits of ``f(x)`` from table ``tab`` for FP32 bit patterns ``x_bits`` (the function unit)."""
    x = np.asarray(x_bits, dtype=np.uint32).ravel()
    sign = (x >> 31).astype(np.int64)
    a = x & np.uint32(0x7FFFFFFF)
    if tab.pre == PRE_DIRECT:
        z = a if tab.sym != SYM_NONE else x
        big_e = np.zeros(x.shape, np.int64)
    else:
        big_e, man_n = _split(a)
        zexp = np.full(x.shape, 127, np.int64)
        if tab.pre == PRE_LOG:
            hi = man_n >= 0x400000
            zexp = np.where(hi, 126, 127)
            big_e = big_e + hi
        elif tab.pre == PRE_EVEN:
            odd = (big_e & 1) == 1
            zexp = np.where(odd, 128, 127)
            big_e = big_e - odd
        z = ((zexp << 23) | man_n).astype(np.uint32)
    zb = ((z >> 23) & 0xFF).astype(np.int64)
    zm = (z & 0x7FFFFF).astype(np.int64)
    h = sign if (tab.pre == PRE_DIRECT and tab.sym == SYM_NONE) else np.zeros_like(sign)

    # exp reduction
    zf = z.view(np.float32)
    zc = np.where(np.abs(zf) > np.float32(200.0), np.where(zf < 0, np.uint32(ZCLAMP | NEG_ZERO),
                                                              np.uint32(ZCLAMP)), z)
    zc = np.where(np.isnan(zf), np.uint32(0), zc).astype(np.uint32)
    s = fma32(zc, np.uint32(LOG2E), np.uint32(MAGIC))
    kf = fma32(s, np.uint32(ONE), np.uint32(MAGIC | NEG_ZERO))
    k = kf.view(np.float32).astype(np.int64)
    nkf = kf ^ np.uint32(NEG_ZERO)
    r = fma32(nkf, np.uint32(LN2_LO), fma32(nkf, np.uint32(LN2_HI), zc))

    # segment
    seg = np.zeros(x.shape, np.int64)
    nb = tab.bmax - tab.bmin
    mb = np.array(tab.mb, np.int64).reshape(2, max(nb, 1)) if nb else np.zeros((2, 1), np.int64)
    base = np.array(tab.base, np.int64).reshape(2, max(nb, 1)) if nb else np.zeros((2, 1), np.int64)
    bi = np.clip(zb - tab.bmin, 0, max(nb - 1, 0))
    mbs = mb[h, bi]
    seg = base[h, bi] + (zm >> (23 - mbs))
    seg = np.where(zb < tab.bmin, np.asarray(tab.tiny)[h], seg)
    in_exp = (zb >= tab.bmax) if tab.exp_en else np.zeros(x.shape, bool)
    seg = np.where((zb >= tab.bmax) & ~in_exp, np.asarray(tab.big)[h], seg)
    kseg = tab.exp_base + np.clip(k, tab.kmin - 1, tab.kmax + 1) - (tab.kmin - 1)
    seg = np.where(in_exp, kseg, seg)

    v = np.where(tab.var_r[seg], r, z).astype(np.uint32)
    t = fma32(v, np.uint32(ONE), tab.centre[seg] ^ np.uint32(NEG_ZERO))
    c = tab.coef[seg]
    p = c[:, DEGREE]
    for i in range(DEGREE - 1, -1, -1):
        p = fma32(p, t, c[:, i])
    p = np.where(tab.mulx[seg], fma32(p, zc, np.uint32(NEG_ZERO)), p)
    if tab.log_add:
        ef = np.float32(big_e).view(np.uint32)
        p = fma32(ef, np.uint32(LN2_HI), fma32(ef, np.uint32(LN2_LO), p))
    pe = np.where(tab.scale[seg] & in_exp, k, 0) + (big_e * tab.q2) // 2
    y = _ldexp_rne(p, pe)
    if tab.tiny_odd:
        mag = ((y & np.uint32(0x7FFFFFFF)) - _tiny_odd_down(x)) & np.uint32(0x7FFFFFFF)
        y = np.where(zb < tab.bmin, (y & np.uint32(NEG_ZERO)) | mag | np.uint32(1), y)
    if tab.sym == SYM_ODD:
        y = np.where(sign == 1, y ^ np.uint32(NEG_ZERO), y)

    isnan = (a > 0x7F800000)
    y = np.where(a == 0x7F800000, np.where(sign == 1, np.uint32(tab.spec["-inf"]),
                                          np.uint32(tab.spec["+inf"])), y)
    y = np.where(a == 0, np.where(sign == 1, np.uint32(tab.spec["-0"]),
                                 np.uint32(tab.spec["+0"])), y)
    if tab.neg_nan:
        isnan = isnan | ((sign == 1) & (a != 0))
    y = np.where(isnan, np.uint32(FP32_QNAN), y)
    y = np.where(np.isnan(y.view(np.float32)), np.uint32(FP32_QNAN), y)
    return y.astype(np.uint32).reshape(np.shape(x_bits))


def activation(x_bits, name, scale=ONE, bias=NEG_ZERO):
    """The activation instruction's arithmetic: ``f(RNE_fp32(x * scale + bias))`` (FP32 bits in
    and out; ``scale``/``bias`` FP32 bits, scalars or per-element arrays). The defaults (1, -0)
    make the pre-step exact for every x, -0 included (``-0 * 1 + +0`` would be +0)."""
    xin = fma32(np.asarray(x_bits, dtype=np.uint32), np.asarray(scale, dtype=np.uint32),
                np.asarray(bias, dtype=np.uint32))
    return evaluate(table(name), xin)


# --- float64 references ----------------------------------------------------------------------

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


# --- table generation (deterministic: Chebyshev-node weighted fits in float64, FP32 rounding
# --- coefficient by coefficient, each later coefficient refitted to the rounded earlier ones) --

_NODES = 64
_TOL = 2.0 ** -27                 # relative fit error a segment must reach (float64 evaluation)
_MB_MAX = 8
_R = 0.3480                       # |r| bound of the exp reduction (ln2/2 plus rounding margin)


def _cheb(lo, hi, n=_NODES):
    j = np.arange(n)
    u = np.cos((2 * j + 1) * np.pi / (2 * n))
    return np.concatenate([[lo, hi], 0.5 * (lo + hi) + 0.5 * (hi - lo) * u])


def _fit(g, lo, hi, centre, zero_c0=False):
    """FP32 coefficient bits (7,) of a degree-6 fit of ``g`` on [lo, hi] in ``t = z - centre``
    (relative weights), its max relative error on a dense grid (float64 evaluation) and that of
    the unrounded fit."""
    with np.errstate(all="ignore"):
        return _fit_impl(g, lo, hi, centre, zero_c0)


def _fit_impl(g, lo, hi, centre, zero_c0):
    z = _cheb(lo, hi)
    y = g(z)
    t = z - centre
    h = max(abs(lo - centre), abs(hi - centre)) or 1.0
    w = 1.0 / np.maximum(np.abs(y), 1e-300)
    u = t / h
    V = np.vander(u, NCOEF, increasing=True)
    coef = np.zeros(NCOEF)
    fixed = 1 if zero_c0 else 0
    a0, *_ = np.linalg.lstsq(V[:, fixed:] * w[:, None], y * w, rcond=None)
    exact = np.zeros(NCOEF)
    exact[fixed:] = a0 / h ** np.arange(fixed, NCOEF)
    resid = y.copy()
    for j in range(fixed, NCOEF):
        a, *_ = np.linalg.lstsq(V[:, j:] * w[:, None], resid * w, rcond=None)
        c = float(np.float32(a[0] / h ** j))
        coef[j] = c if np.isfinite(c) else 0.0
        resid = resid - coef[j] * t ** j
    naive = np.array([float(np.float32(c)) for c in exact])
    if np.max(np.abs(y - np.polyval(naive[::-1], t)) * w) < np.max(np.abs(resid) * w):
        coef = naive                     # refitting did not pay (an already exact fit)
    zz = np.linspace(lo, hi, 401)
    yy = g(zz)
    pp = np.polyval(coef[::-1], zz - centre)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(pp - yy) / np.maximum(np.abs(yy), 1e-300)
    err = float(np.nanmax(rel))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel0 = np.abs(np.polyval(exact[::-1], zz - centre) - yy) / np.maximum(np.abs(yy), 1e-300)
    bits = np.array([_b(c) for c in coef], dtype=np.uint32)
    return bits, err, float(np.nanmax(rel0))


def _const(c0=0.0, c1=0.0, c2=0.0, neg0=False):
    bits = np.zeros(NCOEF, np.uint32)
    bits[0], bits[1], bits[2] = _b(c0), _b(c1), _b(c2)
    if neg0:
        bits[0] = NEG_ZERO
    return bits


class _Builder:
    def __init__(self):
        self.centre, self.coef, self.var_r, self.scale, self.mulx = [], [], [], [], []
        self.worst = 0.0

    def add(self, coef, centre=0.0, var_r=False, scale=False, mulx=False, err=0.0):
        self.centre.append(_b(centre))
        self.coef.append(np.asarray(coef, np.uint32))
        self.var_r.append(var_r)
        self.scale.append(scale)
        self.mulx.append(mulx)
        self.worst = max(self.worst, err)
        return len(self.centre) - 1

    def binade(self, g, b, sgn, zero_at_0):
        """Segments of binade ``b`` (biased exponent of z), for z of sign ``sgn``; returns
        (mb, first segment)."""
        lo0, hi0 = 2.0 ** (b - 127), 2.0 ** (b - 126)
        for mb in range(_MB_MAX + 1):
            n = 1 << mb
            fits = []
            ok = True
            for j in range(n):
                lo = lo0 + (hi0 - lo0) * j / n
                hi = lo0 + (hi0 - lo0) * (j + 1) / n
                a, bnd = (lo, hi) if sgn > 0 else (-hi, -lo)
                cands = []
                if mb == 0 and zero_at_0:
                    cands.append((0.0, True))
                mid = 0.5 * (a + bnd)
                root = None
                for e_ in (a, bnd):
                    if g(np.array([e_]))[0] == 0.0:
                        root = e_
                cands.append((root, True) if root is not None else (mid, False))
                best = None
                for centre, zc0 in cands:
                    bits, err, err0 = _fit(g, a, bnd, centre, zero_c0=zc0)
                    if best is None or err0 < best[3]:
                        best = (bits, centre, err, err0)
                    if err0 <= _TOL:
                        break
                fits.append(best)
                if best[3] > _TOL and mb < _MB_MAX:
                    ok = False
                    break
            if ok:
                first = None
                for bits, centre, err, _ in fits:
                    s = self.add(bits, centre, err=err)
                    first = s if first is None else first
                return mb, first
        raise AssertionError("unreachable")

    def arrays(self):
        return (np.array(self.centre, np.uint32), np.array(self.coef, np.uint32).reshape(-1, NCOEF),
                np.array(self.var_r, bool), np.array(self.scale, bool), np.array(self.mulx, bool))


def _direct(name, fid, g, *, sym, bmin, bmax, halves, zero_at_0, tiny, big, spec, exp=None,
            pre=PRE_DIRECT, q2=0, log_add=False, neg_nan=False, tiny_odd=False):
    """A table with a binade map (``halves``: signs of z covered, (+1,) or (+1, -1)).

    ``tiny``/``big``: per half a callable ``(builder, sgn) -> segment``. ``exp``: optional
    ``(kmin, kmax, seg_fn)`` with ``seg_fn(builder, k, where)`` (``where`` in below/k/above)."""
    bd = _Builder()
    mb = [[0] * (bmax - bmin) for _ in range(2)]
    base = [[0] * (bmax - bmin) for _ in range(2)]
    tinys, bigs = [0, 0], [0, 0]
    for hi_, sgn in enumerate(halves):
        for b in range(bmin, bmax):
            mb[hi_][b - bmin], base[hi_][b - bmin] = bd.binade(g, b, sgn, zero_at_0)
        tinys[hi_] = tiny(bd, sgn)
        bigs[hi_] = big(bd, sgn) if big is not None else 0
    if len(halves) == 1:
        mb[1], base[1], tinys[1], bigs[1] = mb[0], base[0], tinys[0], bigs[0]
    exp_base, kmin, kmax = 0, 0, 0
    if exp is not None:
        kmin, kmax, seg_fn = exp
        exp_base = seg_fn(bd, kmin - 1, "below")
        for k in range(kmin, kmax + 1):
            seg_fn(bd, k, "k")
        seg_fn(bd, kmax + 1, "above")
    centre, coef, var_r, scale, mulx = bd.arrays()
    return ActTable(name=name, fid=fid, sym=sym, pre=pre, exp_en=exp is not None, bmin=bmin,
                    bmax=bmax, q2=q2, log_add=log_add, neg_nan=neg_nan,
                    mb=tuple(map(tuple, mb)), base=tuple(map(tuple, base)), tiny=tuple(tinys),
                    big=tuple(bigs), exp_base=exp_base, kmin=kmin, kmax=kmax, centre=centre,
                    coef=coef, var_r=var_r, scale=scale, mulx=mulx,
                    spec={k: int(v) for k, v in spec.items()}, tiny_odd=tiny_odd), bd.worst


def _spec(name):
    """Specials from the float64 reference: f(+inf), f(-inf), f(+0), f(-0), canonical NaN."""
    v = reference(name, np.array([np.inf, -np.inf, 0.0, -0.0]))
    out = {}
    for key, val in zip(("+inf", "-inf", "+0", "-0"), v):
        out[key] = FP32_QNAN if np.isnan(val) else _b(val)
    return out


def _tiny_fit(g, bmin, zero_at_0):
    """The segment below binade ``bmin``: ``c0 + c1 * z`` (Taylor-like: ``c0 = f(0)``)."""
    def mk(bd, sgn):
        hi = 2.0 ** (bmin - 127) * sgn
        lo = hi * 2.0 ** -40
        f_hi, f_lo = (float(v) for v in g(np.array([hi, lo])))
        c0 = 0.0 if zero_at_0 else f_lo
        c1 = f_hi / hi if zero_at_0 else (f_hi - f_lo) / (hi - lo)
        return bd.add(_const(c0, c1))
    return mk


def _lin(c0=0.0, c1=0.0, c2=0.0, neg0=False):
    def mk(bd, sgn):
        return bd.add(_const(c0, c1, c2, neg0=neg0))
    return mk


def _kfit(G, scale, mulx=False):
    def mk(bd, k):
        rr = (-_R, _R)
        bits, err, _ = _fit(lambda r: G(k, r), rr[0], rr[1], 0.0)
        return bd.add(bits, 0.0, var_r=True, scale=scale, mulx=mulx, err=err)
    return mk


def _logistic_k(kind):
    """Exp segments of sigmoid / silu / softplus: ``k < 0`` scaled by 2^k, ``k >= 0`` unscaled."""
    ln2 = math.log(2.0)

    def seg_fn(bd, k, where):
        mulx = kind == "silu"
        if where == "above":
            if kind == "sigmoid":
                return bd.add(_const(1.0))
            return bd.add(_const(0.0, 1.0))                       # silu, softplus: y = x
        if where == "below":
            return _kfit(lambda k_, r: np.exp(r), True, mulx)(bd, k)
        if k < 0:
            if kind == "softplus":
                G = lambda k_, r: np.log1p(2.0 ** k_ * np.exp(r)) / 2.0 ** k_  # noqa: E731
            else:
                G = lambda k_, r: np.exp(r) / (1.0 + 2.0 ** k_ * np.exp(r))     # noqa: E731
            return _kfit(G, True, mulx)(bd, k)
        if kind == "softplus":
            G = lambda k_, r: k_ * ln2 + r + np.log1p(2.0 ** -k_ * np.exp(-r))  # noqa: E731
        else:
            G = lambda k_, r: 1.0 / (1.0 + 2.0 ** -k_ * np.exp(-r))            # noqa: E731
        return _kfit(G, False, mulx)(bd, k)
    return seg_fn


def _build(name):
    fid = FUNCTION_IDS[name]
    spec = _spec(name)

    def f(z):
        return reference(name, z)
    if name in ("identity", "relu", "square", "sign", "abs"):
        sym = {"identity": SYM_NONE, "relu": SYM_NONE, "square": SYM_EVEN, "sign": SYM_ODD,
               "abs": SYM_EVEN}[name]
        pos = {"identity": (0, 1, 0), "relu": (0, 1, 0), "square": (0, 0, 1), "sign": (1, 0, 0),
               "abs": (0, 1, 0)}[name]
        neg = {"identity": (0, 1, 0), "relu": (0, 0, 0)}.get(name, pos)

        def big(bd, sgn):
            return bd.add(_const(*(pos if sgn > 0 else neg)))
        return _direct(name, fid, f, sym=sym, bmin=0, bmax=0,
                       halves=(1,) if sym != SYM_NONE else (1, -1), zero_at_0=True,
                       tiny=big, big=big, spec=spec)
    if name == "exp":
        return _direct(name, fid, f, sym=SYM_NONE, bmin=0, bmax=0, halves=(1, -1),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec,
                       exp=(0, 0, lambda bd, k, w: _kfit(lambda k_, r: np.exp(r), True)(bd, k)))
    if name in ("tanh", "erf"):
        bmax = 131 if name == "tanh" else 129
        return _direct(name, fid, f, sym=SYM_ODD, bmin=97, bmax=bmax, halves=(1,),
                       zero_at_0=True, tiny=_tiny_fit(f, 97, True), big=_lin(1.0), spec=spec)
    if name in ("gelu", "gelu_tanh"):
        return _direct(name, fid, f, sym=SYM_NONE, bmin=97, bmax=131, halves=(1, -1),
                       zero_at_0=True, tiny=_tiny_fit(f, 97, True),
                       big=lambda bd, s: bd.add(_const(0.0, 1.0) if s > 0 else _const(neg0=True)),
                       spec=spec, tiny_odd=True)
    if name in ("sigmoid", "silu", "softplus"):
        z0 = name == "silu"
        return _direct(name, fid, f, sym=SYM_NONE, bmin=97, bmax=127, halves=(1, -1),
                       zero_at_0=z0, tiny=_tiny_fit(f, 97, z0), big=None, spec=spec,
                       exp=(-26, 26, _logistic_k(name)), tiny_odd=z0)
    if name == "log":
        return _direct(name, fid, np.log, sym=SYM_NONE, bmin=126, bmax=128, halves=(1,),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec, pre=PRE_LOG,
                       log_add=True, neg_nan=True)
    if name in ("sqrt", "rsqrt"):
        g = np.sqrt if name == "sqrt" else (lambda z: 1.0 / np.sqrt(z))
        return _direct(name, fid, g, sym=SYM_NONE, bmin=127, bmax=129, halves=(1,),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec, pre=PRE_EVEN,
                       q2=1 if name == "sqrt" else -1, neg_nan=True)
    if name == "reciprocal":
        return _direct(name, fid, lambda z: 1.0 / z, sym=SYM_ODD, bmin=127, bmax=128,
                       halves=(1,), zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec,
                       pre=PRE_PLAIN, q2=-2)
    raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")


@lru_cache(maxsize=None)
def _table_and_fit(name):
    return _build(name)


def table(name):
    """The :class:`ActTable` of function ``name`` (deterministic, cached)."""
    if name not in FUNCTION_IDS:
        raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")
    return _table_and_fit(name)[0]


def table_image(tab, cfg=None):
    """The table as ``{word address: 32-bit word}`` (what ``ACT_TABLE_LOAD`` / the unit's table
    write port takes; address map in ``rtl.config``: header, binade map, segments).

    Header words: 0 ``sym | pre << 2 | exp_en << 4 | log_add << 5 | neg_nan << 6 |
    tiny_odd << 7 | (q2 & 7) << 8 | bmin << 16 | bmax << 24``; 1 ``tiny0 | tiny1 << 16``; 2
    ``big0 | big1 << 16``; 3 ``exp_base | (kmin & 0xFFFF) << 16``; 4 ``kmax & 0xFFFF``; 5..8 the specials for +Inf,
    -Inf, +0, -0; 9 the function id (the engine runs ACTIVATION only for the loaded id). Map
    entry: ``mb | base << 16``. Segment flags: ``var_r | scale << 1 |
    mulx << 2``. Raises ValueError when the table does not fit ``cfg.act_segments``.
    """
    if cfg is not None and tab.segments > cfg.act_segments:
        raise ValueError(f"table {tab.name!r} has {tab.segments} segments; CoreConfig field "
                         f"'act_segments' is {cfg.act_segments}")
    nb = tab.bmax - tab.bmin
    if nb > ACT_BINADES:
        raise ValueError(f"table {tab.name!r} spans {nb} binades, more than {ACT_BINADES}")
    img = {
        0: (tab.sym | tab.pre << 2 | int(tab.exp_en) << 4 | int(tab.log_add) << 5
            | int(tab.neg_nan) << 6 | int(tab.tiny_odd) << 7 | (tab.q2 & 7) << 8 | (tab.bmin & 0xFF) << 16
            | (tab.bmax & 0xFF) << 24),
        1: tab.tiny[0] | tab.tiny[1] << 16,
        2: tab.big[0] | tab.big[1] << 16,
        3: tab.exp_base | (tab.kmin & 0xFFFF) << 16,
        4: tab.kmax & 0xFFFF,
        5: tab.spec["+inf"], 6: tab.spec["-inf"], 7: tab.spec["+0"], 8: tab.spec["-0"],
        9: tab.fid,
    }
    for h in range(2):
        for b in range(nb):
            img[ACT_MAP_BASE + h * ACT_BINADES + b] = tab.mb[h][b] | tab.base[h][b] << 16
    for s_ in range(tab.segments):
        a = ACT_SEG_BASE + s_ * ACT_SEG_STRIDE
        img[a] = int(tab.centre[s_])
        for j in range(NCOEF):
            img[a + 1 + j] = int(tab.coef[s_, j])
        img[a + 8] = int(tab.var_r[s_]) | int(tab.scale[s_]) << 1 | int(tab.mulx[s_]) << 2
    return img


# TABLE_HEADER_WORDS: header words of a table image (rtl.config.ACT_HEADER_WORDS).


def table_words(tab, cfg=None):
    """The table as the word stream ``ACT_TABLE_LOAD`` reads from SBUF (uint32, FP32 container):
    the 10 header words (addresses 0..9), the ``2 * ACT_BINADES`` binade-map words (addresses
    ``ACT_MAP_BASE`` .., unused entries 0), then per segment its 9 words (centre, c0..c6,
    flags at ``ACT_SEG_BASE + 16 s + j``): ``10 + 128 + 9 * segments`` words."""
    img = table_image(tab, cfg)
    addrs = _stream_addresses(tab.segments)
    return np.array([img.get(a, 0) for a in addrs], np.uint32)


def _stream_addresses(segments):
    """Word addresses of the ``ACT_TABLE_LOAD`` stream order for ``segments`` segments."""
    return (list(range(TABLE_HEADER_WORDS))
            + list(range(ACT_MAP_BASE, ACT_MAP_BASE + 2 * ACT_BINADES))
            + [ACT_SEG_BASE + s_ * ACT_SEG_STRIDE + j for s_ in range(segments)
               for j in range(NCOEF + 2)])


def table_size_ok(cfg, n):
    """Whether ``n`` words are a table image's size: ``10 + 128 + 9 k`` with
    ``1 <= k <= cfg.act_segments`` (the header, the binade map, whole segments)."""
    head, seg = TABLE_HEADER_WORDS + 2 * ACT_BINADES, NCOEF + 2
    return head + seg <= n <= head + seg * cfg.act_segments and (n - head) % seg == 0


def table_load(cfg, ins, mems):
    """``ACT_TABLE_LOAD`` on the memory images: ``(status, image)``. ``status``: the
    :func:`check_instr` code (a word count that is not an image's, :func:`table_size_ok`, is
    one of them: nothing is read and the loaded function is kept), else ``E_FORMAT`` for a bad
    image (word 9, the function id, not ``ins.func`` or >= 17), else ``E_OK``. ``image``:
    ``{address: word}`` of the words written (a bad image is still written: the engine then
    holds no function, ACTIVATION gives ``E_OPCODE`` until a good load; ``None`` when nothing
    was read). The caller's ``loaded`` becomes ``FUNCTIONS[ins.func]`` on ``E_OK``, ``""`` on a
    bad image.
    """
    status = check_instr(cfg, ins)
    if status != E_OK:
        return status, None
    from golden.ap import addresses
    a = addresses(ins.src)
    p0, np_ = ins.src.start_partition, ins.src.num_partitions
    mem = mems[ins.src.memory]
    words = np.zeros((np_, len(a)), np.uint32)
    for j in range(4):
        words |= mem[p0:p0 + np_, a + j].astype(np.uint32) << np.uint32(8 * j)
    words = words.T.ravel()             # word k: element k // np of partition p0 + k % np
    k = (len(words) - TABLE_HEADER_WORDS - 2 * ACT_BINADES) // (NCOEF + 2)
    image = dict(zip(_stream_addresses(k), (int(w) for w in words)))
    bad = int(words[9]) != ins.func or ins.func >= len(FUNCTIONS)
    return (E_FORMAT if bad else E_OK), image


# REDUCE_*: the ``reduce_cmd`` codes (rtl.isa's ACT_REDUCE_*).


def activation_reduce(x_bits, name, scale=ONE, bias=NEG_ZERO, reduce_cmd=REDUCE_IDLE,
                      acc=None):
    """The ``activation`` instruction on a tile: ``x_bits`` (P, N) FP32 bits in AP order
    (partition, free element), ``scale``/``bias`` FP32 bits (scalars or (P, 1) per-partition).

    Returns ``(y, acc)``: ``y`` (P, N) FP32 bits (encoded to the destination format afterwards)
    and the P FP32 accumulators. ``reduce_cmd``: idle keeps ``acc``; reset gives +0; reduce adds
    ``y[p, 0], y[p, 1], ...`` in AP order, one RNE FP32 add each, onto ``acc``; reset_reduce
    starts the same adds from +0. The sum is of the FP32 results, before encoding.
    """
    x = np.asarray(x_bits, dtype=np.uint32)
    if x.ndim != 2:
        raise ValueError(f"x_bits must be a (P, N) array, not shape {x.shape}")
    if reduce_cmd not in (REDUCE_IDLE, REDUCE_RESET, REDUCE_REDUCE, REDUCE_RESET_REDUCE):
        raise ValueError(f"reduce_cmd must be in [0, 3], not {reduce_cmd!r}")
    P = x.shape[0]
    acc = np.zeros(P, np.uint32) if acc is None else np.asarray(acc, np.uint32).copy()
    y = activation(x, name, np.broadcast_to(np.asarray(scale, np.uint32), x.shape),
                   np.broadcast_to(np.asarray(bias, np.uint32), x.shape)).reshape(x.shape)
    if reduce_cmd in (REDUCE_RESET, REDUCE_RESET_REDUCE):
        acc[:] = 0
    if reduce_cmd in (REDUCE_REDUCE, REDUCE_RESET_REDUCE):
        for j in range(x.shape[1]):
            acc = fma32(y[:, j], np.uint32(ONE), acc)
    return y, acc


# --- the instruction on memory images (the engine's contract; rtl/scalar/engine.py matches it) ---

# Opcodes (OP_TENSOR_SCALAR, OP_COPY: rtl.isa's OP_ACT_*) and error codes come from rtl.isa.
#: §8.3 dtype codes of the dense formats: code -> name.
DTYPE_NAMES = {code: name for code, name in enumerate(DTYPES) if name in DENSE_FORMAT_NAMES}


@dataclass(frozen=True, kw_only=True)
class ActInstr:
    """A decoded ``ACTIVATION`` (or ``COPY``) instruction (rtl/scalar/isa.py fields).

    ``dst``/``src`` are :class:`golden.ap.AP`; ``dst_dtype``/``src_dtype`` §8.3 codes;
    ``scale``/``bias`` FP32 bits (immediates; defaults 1 and -0, an exact pre-step), or, when
    ``scale_ap``/``bias_ap`` is an AP, one value per partition read from it (same partitions as
    ``src``, one element each, dtype ``scale_dtype``/``bias_dtype``); ``func`` a function id;
    ``reduce_cmd`` 0..3; ``sr`` stochastic rounding on write (``execute``'s ``rand`` words).
    """

    opcode: int = OP_ACTIVATION
    func: int = 0
    dst: object = None
    src: object = None
    dst_dtype: int = 0
    src_dtype: int = 0
    scale: int = ONE
    bias: int = NEG_ZERO
    scale_ap: object = None
    bias_ap: object = None
    scale_dtype: int = 0
    bias_dtype: int = 0
    reduce_cmd: int = REDUCE_IDLE
    sr: bool = False

    def operand_aps(self):
        """``(dtype, AP)`` of every AP operand, in check order: src, dst, scale, bias."""
        out = [(self.src_dtype, self.src), (self.dst_dtype, self.dst)]
        if self.scale_ap is not None:
            out.append((self.scale_dtype, self.scale_ap))
        if self.bias_ap is not None:
            out.append((self.bias_dtype, self.bias_ap))
        return out


def _dtype_fmt(cfg, code):
    """The format of dtype ``code`` when ``cfg`` enables it (FP32 always), else ``None``."""
    name = DTYPE_NAMES.get(code)
    if name is None or (name != "fp32" and name not in cfg.formats):
        return None
    return cfg.fmt(name)


def check_instr(cfg, ins, loaded=None):
    """The status of ``ins`` (first failure, in this order): ``E_OPCODE`` (opcode not
    ACTIVATION/COPY/ACT_TABLE_LOAD, function id >= 17, or not the function whose table is
    ``loaded``; ``loaded=""``: no table loaded, every ACTIVATION fails),
    ``E_FORMAT`` (a dtype not enabled in ``cfg``, or an AP's
    ``elem_bytes`` not its dtype's width), ``E_SHAPE`` (partition ranges or element counts
    differ: lane p is partition p, so the engine cannot move data across partitions; a
    scale/bias AP not of one element per partition of ``src``'s range; decided from the
    fields, before the APs are walked), then the AP codes of ``scale_ap``, ``bias_ap``, ``src``,
    ``dst`` (``golden.ap.check``; the engine learns them from its AP generators, in the order
    it reads them). ``ACT_TABLE_LOAD``: ``E_FORMAT`` (``src`` not FP32 / 4-byte elements, or
    its word count, elements times partitions, not a table image's: :func:`table_size_ok`),
    the AP code of ``src``; the function id in the image is checked while it is loaded
    (:func:`table_load`)."""
    from golden.ap import ELEM_BYTES
    from golden.ap import check as ap_check
    if ins.opcode == OP_ACT_TABLE_LOAD:
        if ins.src_dtype != 0 or ins.src.elem_bytes != 4:
            return E_FORMAT
        if not table_size_ok(cfg, ins.src.count * ins.src.num_partitions):
            return E_FORMAT
        r = ap_check(cfg, ins.src)
        return E_OK if r is None else r[0]
    if ins.opcode not in (OP_ACTIVATION, OP_COPY):
        return E_OPCODE
    if ins.opcode == OP_ACTIVATION and not 0 <= ins.func < len(FUNCTIONS):
        return E_OPCODE
    if ins.opcode == OP_ACTIVATION and loaded is not None and \
            ins.func != FUNCTION_IDS.get(loaded, -1):
        return E_OPCODE
    ops = ins.operand_aps()
    for code, ap in ops:
        fmt = _dtype_fmt(cfg, code)
        if fmt is None or ap.elem_bytes != ELEM_BYTES[DTYPE_NAMES[code]]:
            return E_FORMAT
    part = (ins.src.start_partition, ins.src.num_partitions)
    if (*part, ins.src.count) != \
            (ins.dst.start_partition, ins.dst.num_partitions, ins.dst.count):
        return E_SHAPE
    for _, ap in ops[2:]:
        if (ap.start_partition, ap.num_partitions, ap.count) != (*part, 1):
            return E_SHAPE
    for _, ap in ops[2:] + ops[:2]:
        r = ap_check(cfg, ap)
        if r is not None:
            return r[0]
    return E_OK


def _read(cfg, mems, ap, dtype):
    """FP32 bits (num_partitions, count) of the elements of ``ap`` in AP order. An element is
    its format's code in its low bits, the bits above ignored (a 4-byte TF32 element: the low
    19 bits; the engine's ``WidenToFP32`` and the DMA element path do the same)."""
    from golden.ap import addresses
    from golden.formats import decode_bits
    a = addresses(ap)
    p0, n = ap.start_partition, ap.num_partitions
    mem = mems[ap.memory]
    fmt = _dtype_fmt(cfg, dtype)
    codes = np.zeros((n, len(a)), np.uint32)
    for j in range(ap.elem_bytes):
        codes |= mem[p0:p0 + n][:, a + j].astype(np.uint32) << np.uint32(8 * j)
    return np.asarray(decode_bits(codes & np.uint32((1 << fmt.width) - 1), fmt), np.uint32)


def sr_words(ins, prng):
    """The ``rand`` words :func:`execute` takes for ``ins`` from the engine's per-lane
    generators ``prng`` (``golden.prng.XorWowLanes``, lane = partition), which are stepped as
    the engine steps them: ``None`` without SR; zeros and no step for an FP32 destination
    (written unchanged, nothing converted); otherwise one step per element in every lane, the
    AP's partitions taking theirs (docs/number-formats.md §4)."""
    if not ins.sr:
        return None
    n, p0, np_ = ins.src.count, ins.src.start_partition, ins.src.num_partitions
    if ins.dst_dtype == 0:
        return np.zeros((np_, n), np.uint32)
    return np.ascontiguousarray(prng.next_n(n)[:, p0:p0 + np_].T)


def execute(cfg, ins, mems, acc, rand=None, loaded=None):
    """Run ``ins`` on the memory images ``mems`` (``{golden.ap.SBUF: uint8 (P, bytes),
    golden.ap.PSUM: ...}``, updated in place) and the P accumulators ``acc`` (uint32 FP32 bits,
    updated in place). Returns the status; a non-zero status changes nothing.

    Elements are read in ``src`` AP order (innermost dimension fastest), decoded exactly to
    FP32, ``y = f(RNE(x * scale + bias))`` (``COPY``: ``y = RNE(x * scale + bias)``), encoded
    to ``dst_dtype`` (RNE, or SR with ``rand``: uint32 words shaped like the output, one per
    element, as ``golden.formats.convert_sr_bits`` takes them) and written in ``dst`` AP order;
    partition p uses lane p. ``loaded``: the name of the function whose table the engine holds
    (``None``: any).
    """
    from golden.ap import addresses
    from golden.formats import convert_sr_bits
    if ins.opcode == OP_ACT_TABLE_LOAD:
        return table_load(cfg, ins, mems)[0]
    status = check_instr(cfg, ins, loaded)
    if status != E_OK:
        return status
    df = _dtype_fmt(cfg, ins.dst_dtype)
    p0, n = ins.src.start_partition, ins.src.num_partitions
    x = _read(cfg, mems, ins.src, ins.src_dtype)
    sc = np.uint32(ins.scale) if ins.scale_ap is None else \
        _read(cfg, mems, ins.scale_ap, ins.scale_dtype)
    bi = np.uint32(ins.bias) if ins.bias_ap is None else \
        _read(cfg, mems, ins.bias_ap, ins.bias_dtype)
    sc = np.broadcast_to(np.asarray(sc, np.uint32), x.shape)
    bi = np.broadcast_to(np.asarray(bi, np.uint32), x.shape)
    if ins.opcode == OP_COPY:
        y = fma32(x, sc, bi)
        acc_new = acc[p0:p0 + n].copy()
        if ins.reduce_cmd in (REDUCE_RESET, REDUCE_RESET_REDUCE):
            acc_new[:] = 0
        if ins.reduce_cmd in (REDUCE_REDUCE, REDUCE_RESET_REDUCE):
            for j in range(y.shape[1]):
                acc_new = fma32(y[:, j], np.uint32(ONE), acc_new)
    else:
        y, acc_new = activation_reduce(x, FUNCTIONS[ins.func], sc, bi, ins.reduce_cmd,
                                       acc[p0:p0 + n])
    if ins.sr:
        if rand is None or np.shape(rand) != y.shape:
            raise ValueError(f"execute field 'rand' must be {y.shape} uint32 words for "
                             f"stochastic rounding")
        out = convert_sr_bits(y, df, np.asarray(rand, np.uint32))
    else:
        out = convert_rne_bits(y, df)
    out = np.asarray(out, np.uint32)
    da = addresses(ins.dst)
    dmem = mems[ins.dst.memory]
    for j in range(ins.dst.elem_bytes):
        dmem[p0:p0 + n, da + j] = ((out >> np.uint32(8 * j)) & np.uint32(0xFF)).astype(np.uint8)
    acc[p0:p0 + n] = acc_new
    return E_OK
