# SPDX-License-Identifier: Apache-2.0
"""The activation tables and evaluator (golden/activation/): accuracy against float64 (a
sampled subset of the bench's sweep), specials, determinism, and the ULP measure itself."""

import math

import numpy as np
import pytest
import scipy.special as sps

from golden.activation import (DOMAINS, FUNCTION_IDS, FUNCTIONS, activation, evaluate, fma32,
                               reference, table, ulp_error)
from golden.arith import fma_fp32
from golden.formats import FP32_QNAN, convert_rne_bits, decode
from rtl.config import BF16, FP32

ALL_BF16 = (np.arange(1 << 16, dtype=np.uint32) << 16)


def f32(bits):
    with np.errstate(invalid="ignore"):                 # signalling NaNs widen quietly
        return np.asarray(bits, np.uint32).view(np.float32).astype(np.float64)


def b32(v):
    return np.asarray(v, np.float32).view(np.uint32)


def sample_fp32(rng, n):
    """Finite FP32 inputs: uniform bit patterns, [-20, 20], [-2, 2], and subnormals."""
    k = n // 4
    parts = [rng.integers(0, 1 << 32, k, dtype=np.uint32),
             b32(rng.uniform(-20, 20, k)), b32(rng.uniform(-2, 2, k)),
             rng.integers(0, 1 << 23, n - 3 * k, dtype=np.uint32)
             | (rng.integers(0, 2, n - 3 * k, dtype=np.uint32) << 31)]
    x = np.concatenate(parts).astype(np.uint32)
    return x[np.isfinite(x.view(np.float32))]


def in_domain(name, x):
    d = DOMAINS[name]
    if d is None:
        return np.ones(x.shape, bool)
    v = f32(x)
    return (v >= d[0]) & (v <= d[1])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_fp32_accuracy_sampled(name, seed):
    """<= 2 ULP (FP32 out) on a random sample of every finite FP32 region."""
    rng = np.random.default_rng(seed)
    x = sample_fp32(rng, 40000)
    x = x[in_domain(name, x)]
    y = evaluate(table(name), x)
    err = ulp_error(f32(y), reference(name, f32(x)), FP32)
    i = int(np.argmax(err))
    assert err[i] <= 2.0, (name, seed, hex(int(x[i])), f32(x[i]), f32(y[i]), err[i])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_bf16_every_input(name):
    """<= 1 ULP (BF16 out, RNE of the FP32 result) on every BF16 input, NaN included."""
    y = convert_rne_bits(evaluate(table(name), ALL_BF16), BF16)
    err = ulp_error(decode(y, BF16).astype(np.float64), reference(name, f32(ALL_BF16)), BF16)
    i = int(np.argmax(err))
    assert err[i] <= 1.0, (name, hex(int(ALL_BF16[i])), err[i])


@pytest.mark.parametrize("name", FUNCTIONS)
def test_nan_and_infinities(name):
    x = np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7F800000, 0xFF800000, 0, 0x80000000],
                 np.uint32)
    y = evaluate(table(name), x)
    assert (y[:3] == FP32_QNAN).all()
    ref = reference(name, f32(x[3:]))
    for got, want in zip(y[3:], ref):
        if math.isnan(want):
            assert got == FP32_QNAN
        else:
            assert got == b32(want), (name, hex(int(got)), want)


def test_documented_specials():
    def ev(name, v):
        return evaluate(table(name), b32(np.array(v, np.float64)))
    assert (ev("log", [-1.0, -1e-30]) == FP32_QNAN).all()
    assert ev("log", [0.0])[0] == 0xFF800000
    assert ev("log", [1.0])[0] == 0
    assert ev("rsqrt", [0.0])[0] == 0x7F800000
    assert ev("rsqrt", [-0.0])[0] == 0xFF800000
    assert ev("sqrt", [-4.0])[0] == FP32_QNAN
    assert ev("sqrt", [-0.0])[0] == 0x80000000
    assert (ev("exp", [88.73, 100.0, 1e30]) == 0x7F800000).all()
    assert (ev("exp", [-104.0, -200.0, -1e30]) == 0).all()
    assert ev("exp", [0.0])[0] == 0x3F800000
    assert ev("reciprocal", [0.0, -0.0]).tolist() == [0x7F800000, 0xFF800000]
    assert ev("reciprocal", [2.0 ** 127])[0] == b32(2.0 ** -127)          # subnormal result
    assert ev("sigmoid", [-1e30, 1e30]).tolist() == [0, 0x3F800000]
    assert ev("silu", [-1e30])[0] == 0x80000000
    assert ev("softplus", [1e30])[0] == b32(1e30)
    assert ev("tanh", [-30.0, 30.0]).tolist() == [0xBF800000, 0x3F800000]
    assert ev("sign", [-3.0, 0.0, -0.0, 5e-45]).tolist() == [0xBF800000, 0, 0,  # numpy sign
                                                              0x3F800000]
    assert ev("relu", [-2.0, 3.5]).tolist() == [0, b32(3.5)]


def test_exact_functions_bitwise(seed):
    """identity/abs/relu/sign are exact, square is correctly rounded (one fused MAC)."""
    rng = np.random.default_rng(seed)
    x = sample_fp32(rng, 4000)
    v = f32(x)
    assert (evaluate(table("identity"), x) == x).all()
    assert (evaluate(table("abs"), x) == (x & 0x7FFFFFFF)).all()
    assert (evaluate(table("relu"), x) == np.where(v > 0, x, 0)).all()
    with np.errstate(over="ignore"):
        sq = b32(v.astype(np.float32) * v.astype(np.float32))
    assert (evaluate(table("square"), x) == sq).all()


def test_activation_scale_bias(seed):
    """activation() = f(RNE(x*scale + bias)) with one rounding before f."""
    rng = np.random.default_rng(seed)
    x = b32(rng.uniform(-4, 4, 500))
    sc, bi = b32(1.7), b32(-0.3)
    pre = fma_fp32(np.full(500, bi), x, FP32, np.full(500, sc), FP32)
    assert (activation(x, "tanh", sc, bi) == evaluate(table("tanh"), pre)).all()
    assert (activation(x, "identity", sc, bi) == pre).all()


def test_fma32_matches_arith(seed):
    rng = np.random.default_rng(seed)
    a, b, c = (rng.integers(0, 1 << 32, 2000, dtype=np.uint32) for _ in range(3))
    assert (fma32(a, b, c) == fma_fp32(c, a, FP32, b, FP32)).all()


def test_reference_against_scipy(seed):
    """The float64 references of the non-numpy functions against scipy (independent code)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-12, 12, 3000), rng.uniform(-0.01, 0.01, 500)])
    np.testing.assert_allclose(reference("erf", x), sps.erf(x), rtol=1e-14, atol=1e-300)
    gel = 0.5 * x * sps.erfc(-x / np.sqrt(2))
    np.testing.assert_allclose(reference("gelu", x), gel, rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(reference("sigmoid", x), sps.expit(x), rtol=1e-14)
    u = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
    np.testing.assert_allclose(reference("gelu_tanh", x), x * sps.expit(2 * u), rtol=1e-12)
    m = x > -1                                   # where the textbook form does not cancel
    np.testing.assert_allclose(reference("gelu_tanh", x)[m], (0.5 * x * (1 + np.tanh(u)))[m],
                               rtol=1e-12)
    np.testing.assert_allclose(reference("softplus", x), np.logaddexp(0, x), rtol=1e-14)


def test_ulp_error_measure():
    one = 1.0
    assert ulp_error([one + 2 ** -23], [one], FP32)[0] == 1.0
    assert ulp_error([one - 2 ** -24], [one], FP32)[0] == 0.5          # ulp taken at the ref
    assert ulp_error([2 ** -149], [0.0], FP32)[0] == 1.0
    assert ulp_error([np.inf], [3.5e38], FP32)[0] == 0.0               # rounds to Inf
    assert ulp_error([np.inf], [3.0e38], FP32)[0] == np.inf
    assert ulp_error([np.nan], [np.nan], FP32)[0] == 0.0
    assert ulp_error([np.nan], [1.0], FP32)[0] == np.inf
    assert ulp_error([1.0078125], [1.0], BF16)[0] == 1.0


def test_tables_deterministic_and_sized(cfg):
    from golden import activation as act
    for name in ("tanh", "log", "sigmoid"):
        t1 = table(name)
        t2 = act.build_table(name)[0]
        assert (t1.coef == t2.coef).all() and (t1.centre == t2.centre).all()
        assert t1.mb == t2.mb and t1.base == t2.base
    for name in FUNCTIONS:
        assert table(name).fid == FUNCTION_IDS[name]


def test_bad_name():
    with pytest.raises(ValueError, match="function must be one of"):
        table("cosh")
    with pytest.raises(ValueError, match="function must be one of"):
        reference("cosh", [1.0])
