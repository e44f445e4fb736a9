# SPDX-License-Identifier: Apache-2.0
"""Bit-exact model of the Scalar (activation) engine's function unit: the evaluation of a table
(:func:`evaluate`) and the activation's arithmetic (:func:`activation`) (``docs/scalar.md``).

An activation is ``y = f(RNE_fp32(x * scale + bias))``. ``f`` is evaluated from a *table*: a
small set of range-reduction modes, a segment map and, per segment, a centre and the seven
FP32 coefficients of a degree-6 polynomial (:class:`golden.activation.table_format.ActTable`,
built by :mod:`golden.activation.fit`). Every arithmetic step is an FP32 fused MAC with one
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

import numpy as np

from golden.activation.fit import table
from golden.activation.table_format import (DEGREE, LN2_HI, LN2_LO, LOG2E, MAGIC, NEG_ZERO, ONE,
                                            PRE_DIRECT, PRE_EVEN, PRE_LOG, SYM_NONE, SYM_ODD,
                                            ZCLAMP, fma32)
from golden.formats import FP32_QNAN

__all__ = ["evaluate", "activation"]


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
