# SPDX-License-Identifier: Apache-2.0
"""Correct rounding of the activations' narrow results (golden/activation/, docs/scalar.md
§2): for every BF16 input and every function the BF16 result (RNE of the FP32 result) is the
nearest BF16 value of ``f(x)``; the ``tiny_odd`` round-to-odd of gelu, gelu_tanh and silu; the
values at +-Inf are the limits.

Reference: ``golden.activation.reference`` (float64; its largest relative error over the finite
BF16 inputs, measured against 200-bit mpmath, is far below the bound ``REL_ERR``) and,
for gelu / gelu_tanh / silu with ``|x| < 1``, the exact split ``f(x) = x/2 + x*g(x)/2`` (``g``
= erf(x/sqrt 2), tanh(u), tanh(x/2)), whose two float64 parts keep the term that a single
float64 value loses for tiny ``x``. A result within the error bound ``REL_ERR`` of a rounding midpoint
fails the test as undecidable (none is)."""

import numpy as np
import pytest

from golden.activation import FUNCTIONS, evaluate, reference, table
from golden.formats import FP32_QNAN, convert_rne_bits
from rtl.config import BF16, FP16

ALL_BF16 = (np.arange(1 << 16, dtype=np.uint32) << 16)
#: Relative error bound taken for the float64 references (measured against 200-bit mpmath on
#: every finite BF16 input: below 2^-44 for every function; docs/scalar.md §2).
REL_ERR = 2.0 ** -40
#: Functions whose float64 reference is exact on BF16 inputs (a tie is a true tie).
EXACT = ("identity", "relu", "square", "sign", "abs")
HALF_PLUS = ("gelu", "gelu_tanh", "silu")


def f64(bits):
    with np.errstate(invalid="ignore"):
        return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def ref_parts(name, x):
    """``(hi, lo)`` float64 with ``f(x) ~ hi + lo`` (``lo`` = 0 but for HALF_PLUS, |x| < 1)."""
    from math import erf, pi, sqrt
    hi = reference(name, x)
    lo = np.zeros_like(hi)
    if name in HALF_PLUS:
        s = np.isfinite(x) & (np.abs(x) < 1.0)
        xs = x[s]
        if name == "gelu":
            g = np.array([erf(v / sqrt(2.0)) for v in xs])
        elif name == "gelu_tanh":
            g = np.tanh(sqrt(2.0 / pi) * (xs + 0.044715 * xs ** 3))
        else:
            g = np.tanh(xs / 2.0)
        hi[s] = xs / 2.0
        lo[s] = xs * g / 2.0
    return hi, lo


def correctly_rounded(name, x, fmt):
    """``(bits, undecidable)``: the nearest ``fmt`` value of ``f(x)`` (RNE on a true tie).

    The rounding is decided by the sign of ``d = (hi - m) + lo``, ``m`` the midpoint nearest to
    ``hi + lo``; it is undecidable when ``|d|`` is within the references' error bound."""
    hi, lo = ref_parts(name, x)
    with np.errstate(invalid="ignore", over="ignore"):
        v = np.where(lo == 0, hi, hi + lo)        # keeps -0
    fin = np.isfinite(v) & (v != 0)
    a = np.abs(np.where(fin, v, 1.0))
    emin = 1 - fmt.bias
    q = np.ldexp(1.0, (np.maximum(np.floor(np.log2(a)), emin) - fmt.man_bits).astype(np.int64))
    s = np.where(fin, v / q, 0.0)
    fl = np.floor(s)
    m = (fl + 0.5) * q
    d = np.where(fin, (hi - m) + lo, 1.0)
    split = lo != 0                          # hi = x/2 exact, lo to REL_ERR
    err = REL_ERR * np.abs(lo) + 2.0 ** -52 * (np.abs(hi - m) + np.abs(lo))
    if name not in EXACT:
        err = err + np.where(split, 0.0, REL_ERR * np.abs(v))
    undecidable = fin & (np.abs(d) <= err) & (err > 0)
    up = np.where(d == 0, fl % 2 == 1, d > 0)
    r = np.where(fin, np.copysign((fl + up) * q, v), v)
    emax = (1 << fmt.exp_bits) - 2 - fmt.bias
    fmax = (2.0 - 2.0 ** -fmt.man_bits) * 2.0 ** emax
    r = np.where(np.abs(r) > fmax, np.copysign(np.inf, r), r)
    bits = np.asarray(convert_rne_bits(np.asarray(r, np.float32).view(np.uint32), fmt),
                      np.uint32)                # r is a fmt value: the conversion is exact
    return bits, undecidable


def check_every(name, x, fmt):
    y = np.asarray(convert_rne_bits(evaluate(table(name), x), fmt), np.uint32)
    want, undecidable = correctly_rounded(name, f64(x), fmt)
    nan = f64(x) != f64(x)
    expect_nan = np.isnan(reference(name, f64(x)))
    qnan = np.asarray(convert_rne_bits(np.array([FP32_QNAN], np.uint32), fmt), np.uint32)[0]
    ok = np.where(nan | expect_nan, y == qnan, y == want)
    assert not undecidable.any(), (name, [hex(int(v)) for v in x[undecidable][:8]])
    bad = np.nonzero(~ok)[0]
    assert not len(bad), (name, fmt.name, len(bad), [(hex(int(x[i])), hex(int(y[i])),
                                                      hex(int(want[i]))) for i in bad[:6]])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_bf16_correctly_rounded_every_input(name):
    """Every one of the 65,536 BF16 inputs: the BF16 result is the nearest BF16 value."""
    check_every(name, ALL_BF16, BF16)


def ro32_of_half_plus(x):
    """``x/2 + 0`` (just above ``x/2``) rounded to odd in FP32, from numpy's float32 cast and
    nextafter (independent of the bit rule in golden)."""
    h = f64(x) / 2.0                                 # exact in float64
    c = h.astype(np.float32)                         # RNE
    cb = c.view(np.uint32)
    exact = c.astype(np.float64) == h
    above = np.nextafter(c, np.float32(np.inf))
    other = np.where(c.astype(np.float64) > h, np.nextafter(c, np.float32(-np.inf)), above)
    odd = (cb & 1) == 1
    out = np.where(exact, np.where(odd, c, above), other)     # a tie: the odd neighbour
    return np.asarray(out, np.float32).view(np.uint32)


def tiny_inputs(rng, n):
    """FP32 inputs of the tiny segment (biased exponent < 97): every sign, both low bits,
    subnormals, the first normal binades, and random ones."""
    d = np.array([1, 2, 3, 4, 5, 6, 7, 0x7FFFFF, 0x7FFFFE, 0x7FFFFD, 0x800000, 0x800001,
                  0x800002, 0x800003, 0xFFFFFF, 0xFFFFFE, 0x1000000, 0x1000001, 0x1800001,
                  0x307FFFFF, 0x30000001, 0x10008000, 0x00018000], np.uint32)
    r = np.concatenate([d, rng.integers(0, 1 << 24, n, dtype=np.uint32),
                        rng.integers(0, 97 << 23, n, dtype=np.uint32)]).astype(np.uint32)
    return np.concatenate([r, r | np.uint32(0x80000000)])


@pytest.mark.parametrize("name", HALF_PLUS)
def test_tiny_odd_is_round_to_odd(name, seed):
    """Tiny segment: the FP32 result is ``x/2 + 0`` rounded to odd, so its RNE to BF16 and FP16
    is the nearest value of ``f(x)`` for FP32 inputs too."""
    rng = np.random.default_rng(seed)
    x = tiny_inputs(rng, 3000)
    y = evaluate(table(name), x)
    want = ro32_of_half_plus(x)
    bad = np.nonzero((y != want) & ((x & 0x7FFFFFFF) != 0))[0]
    assert not len(bad), (name, seed, [(hex(int(x[i])), hex(int(y[i])), hex(int(want[i])))
                                       for i in bad[:6]])
    for fmt in (BF16, FP16):
        check_every(name, x, fmt)


def test_tiny_odd_preconditions():
    """The rule assumes the tiny segment computes RNE(x/2): c0 = 0, c1 = 1/2, no higher term,
    centre 0 (t = x exactly), no flag; and only gelu, gelu_tanh and silu use it."""
    for name in FUNCTIONS:
        tab = table(name)
        assert tab.tiny_odd == (name in HALF_PLUS), name
        if not tab.tiny_odd:
            continue
        assert tab.bmin == 97, name
        for s in set(tab.tiny):
            c = tab.coef[s]
            assert (c[0] & 0x7FFFFFFF) == 0 and c[1] == 0x3F000000, (name, s)
            assert ((c[2:] & 0x7FFFFFFF) == 0).all(), (name, s)
            assert (tab.centre[s] & 0x7FFFFFFF) == 0, (name, s)
            assert not (tab.var_r[s] or tab.scale[s] or tab.mulx[s]), (name, s)


#: f(+Inf), f(-Inf) written from the limits (not from the reference); NaN: no limit.
LIMITS = {
    "identity": (np.inf, -np.inf), "relu": (np.inf, 0.0), "exp": (np.inf, 0.0),
    "tanh": (1.0, -1.0), "sigmoid": (1.0, 0.0), "gelu": (np.inf, -0.0),
    "gelu_tanh": (np.inf, -0.0), "silu": (np.inf, -0.0), "softplus": (np.inf, 0.0),
    "erf": (1.0, -1.0), "log": (np.inf, np.nan), "sqrt": (np.inf, np.nan),
    "rsqrt": (0.0, np.nan), "reciprocal": (0.0, -0.0), "square": (np.inf, np.inf),
    "sign": (1.0, -1.0), "abs": (np.inf, np.inf),
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_infinities_are_limits(name):
    """f(+-Inf) is the limit (signed zero included), NaN where there is none; NaN -> NaN."""
    y = evaluate(table(name), np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001],
                                       np.uint32))
    for got, want in zip(y[:2], LIMITS[name]):
        if np.isnan(want):
            assert got == FP32_QNAN, (name, hex(int(got)))
        else:
            assert got == np.float32(want).view(np.uint32), (name, hex(int(got)), want)
    assert (y[2:] == FP32_QNAN).all(), name
    # a zero limit has the sign of the values approaching it (the largest finite inputs)
    big = evaluate(table(name), np.array([0x7F7FFFFF, 0xFF7FFFFF], np.uint32))
    for got, want in zip(big, LIMITS[name]):
        if want == 0:
            assert got >> 31 == int(np.signbit(want)), (name, hex(int(got)))
