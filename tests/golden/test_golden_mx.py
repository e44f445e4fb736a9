# SPDX-License-Identifier: Apache-2.0
"""MX block quantization (contract §1, §6)."""

import math

import ml_dtypes as md
import numpy as np
import pytest

from golden.formats import convert_rne, decode
from golden.mx import mx_dequantize, mx_quantize
from rtl.config import FP4_E2M1, FP8_E4M3FN, FP8_E5M2

ELEMS = [(FP8_E4M3FN, md.float8_e4m3fn), (FP8_E5M2, md.float8_e5m2),
         (FP4_E2M1, md.float4_e2m1fn)]
IDS = [f.name for f, _ in ELEMS]


def _blocks(rng, nblocks, block):
    """Blocks with per-block magnitudes from 2**-140 to 2**100 and a few outliers."""
    mag = 2.0 ** rng.integers(-140, 100, (nblocks, 1))
    x = rng.standard_normal((nblocks, block)) * mag
    x[rng.random(x.shape) < 0.05] *= 1000.0
    return x.astype(np.float32)


@pytest.mark.parametrize("fmt,dtype", ELEMS, ids=IDS)
@pytest.mark.parametrize("block", [32, 8])
def test_mx_scale_and_elements_vs_independent(fmt, dtype, block, seed):
    rng = np.random.default_rng(seed)
    x = _blocks(rng, 2000, block)
    scales, codes = mx_quantize(x.reshape(-1), fmt, block)
    assert scales.dtype == np.uint8 and scales.shape == (2000,)
    assert codes.shape == (2000 * block,)
    amax = np.abs(x.astype(np.float64)).max(axis=1)
    want_exp = np.clip([math.frexp(a)[1] - 1 - fmt.emax for a in amax], -127, 127)
    assert np.array_equal(scales.astype(int) - 127, want_exp), f"seed={seed}"
    # elements: ml_dtypes RNE of x / 2**scale_exp (computed in float64, exact), saturating
    y = (x.astype(np.float64) / 2.0 ** want_exp[:, None])
    with np.errstate(invalid="ignore", over="ignore"):
        ref = y.astype(np.float32).astype(dtype).astype(np.float64)
    exact_scale = y.astype(np.float32).astype(np.float64) == y
    mine = decode(codes, fmt).reshape(x.shape).astype(np.float64)
    sat = ~np.isfinite(ref) & np.isfinite(y)     # ml_dtypes: e4m3fn overflow NaN, e5m2 Inf
    ref = np.where(sat, np.sign(y) * fmt.max_finite, ref)
    ok = exact_scale
    assert ok.mean() > 0.9, f"seed={seed}"
    bad = ok & (mine != ref)
    assert not bad.any(), f"seed={seed} {fmt.name}: y={y[bad][:4]} mine={mine[bad][:4]}"
    # |element| never exceeds max finite; and the largest element of each block uses the top
    # binade (>= 2**emax) unless the scale was clamped
    assert np.all(np.abs(mine) <= fmt.max_finite)
    top = np.abs(mine).max(axis=1)
    unclamped = (want_exp > -127) & (want_exp < 127)
    assert np.all(top[unclamped] >= 2.0 ** fmt.emax), f"seed={seed}"


@pytest.mark.parametrize("fmt,dtype", ELEMS, ids=IDS)
def test_mx_round_trip_exact(fmt, dtype, seed):
    """Blocks whose values are (element value) * 2**s with one element in the top binade
    quantize with scale s and dequantize back exactly."""
    rng = np.random.default_rng(seed)
    nb, block = 500, 32
    codes = rng.integers(0, fmt.max_finite_code + 1, (nb, block)).astype(np.uint32)
    codes |= (rng.integers(0, 2, (nb, block)).astype(np.uint32) << (fmt.width - 1))
    codes[:, 0] = (fmt.emax + fmt.bias) << fmt.man_bits               # 2**emax
    s = rng.integers(-100, 100, nb)
    x = (decode(codes, fmt).astype(np.float64) * 2.0 ** s[:, None]).astype(np.float32)
    scales, q = mx_quantize(x, fmt, block)
    assert np.array_equal(scales[:, 0].astype(int), s + 127), f"seed={seed}"
    back = mx_dequantize(scales, q, fmt, block)
    assert np.array_equal(back, x), f"seed={seed}"
    assert np.array_equal(np.signbit(back), np.signbit(x)), f"seed={seed}"
    # and the result is idempotent: re-quantizing the dequantized data changes nothing
    s2, q2 = mx_quantize(mx_dequantize(*mx_quantize(x * np.float32(1.37), fmt, block), fmt,
                                       block), fmt, block)
    back2 = mx_dequantize(s2, q2, fmt, block)
    assert np.array_equal(back2, mx_dequantize(*mx_quantize(back2, fmt, block), fmt, block))


@pytest.mark.parametrize("fmt,dtype", ELEMS, ids=IDS)
def test_mx_special_blocks(fmt, dtype):
    x = np.ones((4, 32), dtype=np.float32)
    x[0, 3] = np.nan
    x[1, 31] = -np.inf
    x[2] = 0.0
    x[2, ::2] = -0.0
    x[3] = np.linspace(-3, 3, 32)
    scales, codes = mx_quantize(x, fmt, 32)
    assert scales.shape == (4, 1) and codes.shape == (4, 32)
    assert scales[0, 0] == 0xFF and scales[1, 0] == 0xFF and scales[2, 0] == 0
    assert np.all(codes[:2] == 0)
    assert np.array_equal(codes[2], np.where(np.signbit(x[2]), 1 << (fmt.width - 1), 0))
    assert scales[3, 0] == 1 - fmt.emax + 127                        # floor(log2 3) = 1
    d = mx_dequantize(scales, codes, fmt, 32)
    assert np.all(np.isnan(d[:2])) and np.all(d[2] == 0)
    assert np.array_equal(np.signbit(d[2]), np.signbit(x[2]))
    assert np.all(np.isfinite(d[3]))


def test_mx_clamped_scale_and_tiny_blocks():
    x = np.full(32, 2.0 ** -140, dtype=np.float32)              # floor(log2) - 8 = -148 -> -127
    s, c = mx_quantize(x, FP8_E4M3FN, 32)
    assert s.tolist() == [0]
    assert np.array_equal(c, convert_rne(np.full(32, 2.0 ** -13, np.float32), FP8_E4M3FN))
    x = np.full(32, 2.0 ** -149, dtype=np.float32)              # FP32 min subnormal
    s, c = mx_quantize(x, FP4_E2M1, 32)
    assert s.tolist() == [0] and np.all(c == 0)                  # 2**-22 rounds to 0 in e2m1
    x = np.full(32, 65000.0, dtype=np.float32)          # scale 2**0, 65000 > 61440: saturate
    s, c = mx_quantize(x, FP8_E5M2, 32)
    assert s.tolist() == [127] and np.all(c == 0x7B)           # 57344, not Inf (OCP MX §6.3)
    x = np.full(32, np.float32(3.0e38))                          # floor(log2) = 127
    s, c = mx_quantize(x, FP8_E5M2, 32)
    assert s.tolist() == [127 - 15 + 127]


def test_mx_dequantize_nan_scale_and_checks():
    codes = np.zeros((2, 32), dtype=np.uint8)
    d = mx_dequantize(np.array([[0xFF], [127]], np.uint8), codes, FP8_E4M3FN, 32)
    assert np.all(np.isnan(d[0])) and np.all(d[1] == 0)
    with pytest.raises(ValueError, match="must be a multiple of block"):
        mx_quantize(np.zeros(30, np.float32), FP8_E4M3FN, 32)
    with pytest.raises(ValueError, match="scales must have shape"):
        mx_dequantize(np.zeros(2, np.uint8), np.zeros(32, np.uint8), FP8_E4M3FN, 32)
    with pytest.raises(ValueError, match="block must be a positive integer"):
        mx_quantize(np.zeros(32, np.float32), FP8_E4M3FN, 0)
    big = mx_dequantize(np.array([254], np.uint8), np.array([0x7E] * 32, np.uint8), FP8_E4M3FN,
                        32, dtype=np.float64)
    assert big[0] == 448.0 * 2.0 ** 127
