# SPDX-License-Identifier: Apache-2.0
"""golden.formats.decode: every code of every format against ml_dtypes / numpy (contract §1, §2)."""

import ml_dtypes as md
import numpy as np
import pytest

from golden.formats import (FP32_QNAN, decode, decode_bits, decode_e8m0, decode_e8m0_bits,
                            is_inf_code, is_nan_code)
from rtl.config import (BF16, E8M0, FP4_E2M1, FP8_E4M3, FP8_E4M3FN, FP8_E5M2, FP16, FP32, TF32,
                        FPFormat, cfp8_format)

#: (format, reference dtype) pairs at the standard bias.
REFS = [
    (BF16, md.bfloat16), (FP16, np.float16), (FP8_E5M2, md.float8_e5m2),
    (FP8_E4M3, md.float8_e4m3), (FP8_E4M3FN, md.float8_e4m3fn), (FP4_E2M1, md.float4_e2m1fn),
    (cfp8_format(3, 3), md.float8_e3m4), (cfp8_format(4, 7), md.float8_e4m3),
    (cfp8_format(5, 15), md.float8_e5m2),
]
#: ml_dtypes type and standard bias of each cfp8 exponent width
CFP8_STD = {3: (md.float8_e3m4, 3), 4: (md.float8_e4m3, 7), 5: (md.float8_e5m2, 15)}


def _ref_values(codes, width, dtype):
    """ml_dtypes / numpy values (float64) of raw codes."""
    raw = codes.astype(np.uint16 if width > 8 else np.uint8)
    with np.errstate(invalid="ignore"):            # signalling-NaN patterns
        return raw.view(dtype).astype(np.float64)


def _assert_same(mine_f32, ref_f64, codes, what):
    mine = mine_f32.astype(np.float64)
    both_nan = np.isnan(mine) & np.isnan(ref_f64)
    same = (mine == ref_f64) & (np.signbit(mine) == np.signbit(ref_f64))
    bad = ~(same | both_nan)
    assert not bad.any(), (f"{what}: {bad.sum()} codes differ, e.g. code {int(codes[bad][0]):#x}: "
                           f"{mine[bad][0]!r} vs reference {ref_f64[bad][0]!r}")


@pytest.mark.parametrize("fmt,ref", REFS, ids=[f"{f.name}-e{f.exp_bits}b{f.bias}" for f, _ in REFS])
def test_decode_every_code(fmt, ref):
    codes = np.arange(1 << fmt.width, dtype=np.uint32)
    mine = decode(codes, fmt)
    assert mine.dtype == np.float32 and mine.shape == codes.shape
    _assert_same(mine, _ref_values(codes, fmt.width, ref), codes, fmt.name)
    # NaN codes widen to the canonical S.11111111.10..0 with the sign kept
    bits = decode_bits(codes, fmt)
    nan = is_nan_code(codes, fmt)
    sign = (codes >> (fmt.width - 1)).astype(np.uint32) << 31
    assert np.array_equal(np.isnan(mine), nan)
    assert np.all(bits[nan] == (sign[nan] | FP32_QNAN)), fmt.name
    assert np.all(np.isinf(mine) == is_inf_code(codes, fmt))
    # counts of specials per contract §1
    n_nan = {"ieee": 2 * ((1 << fmt.man_bits) - 1), "fn": 2, "none": 0}[fmt.specials]
    assert nan.sum() == n_nan


def _cfp8_biases():
    out = []
    for e in (3, 4, 5):
        lo, hi = (1 << e) - 2 - 127, 150 - (7 - e)
        std = CFP8_STD[e][1]
        for b in sorted({lo, lo + 1, std - 3, std - 1, std + 1, std + 6, 9, 13, hi - 1, hi}):
            if lo <= b <= hi and b != std:
                out.append((e, b))
    return out


@pytest.mark.parametrize("exp_bits,bias", _cfp8_biases())
def test_decode_cfp8_other_bias(exp_bits, bias):
    """cfp8 at a non-standard bias = the ml_dtypes value scaled by 2**(std_bias - bias)."""
    fmt = cfp8_format(exp_bits, bias)
    ref, std = CFP8_STD[exp_bits]
    codes = np.arange(256, dtype=np.uint32)
    want = _ref_values(codes, 8, ref) * 2.0 ** (std - bias)
    _assert_same(decode(codes, fmt), want, codes, f"cfp8 e{exp_bits} bias {bias}")


def test_decode_bits_matches_decode_and_dtypes():
    codes = np.arange(256, dtype=np.uint8)
    for fmt in (FP8_E4M3FN, FP8_E5M2):
        b = decode_bits(codes, fmt)
        assert b.dtype == np.uint32
        assert np.array_equal(b.view(np.float32), decode(codes, fmt), equal_nan=True)


def test_decode_e8m0_every_code():
    codes = np.arange(256, dtype=np.uint32)
    mine = decode_e8m0(codes)
    ref = codes.astype(np.uint8).view(md.float8_e8m0fnu).astype(np.float64)
    _assert_same(mine, ref, codes, "e8m0")
    exact = np.array([2.0 ** (c - 127) for c in range(255)])
    assert np.array_equal(mine[:255].astype(np.float64), exact)
    assert decode_e8m0_bits([255])[0] == FP32_QNAN
    assert np.array_equal(decode(codes, E8M0), mine, equal_nan=True)


def test_decode_tf32_every_code():
    """All 2**19 TF32 codes = the FP32 whose low 13 mantissa bits are zero (NaN canonical)."""
    codes = np.arange(1 << 19, dtype=np.uint32)
    bits = decode_bits(codes, TF32)
    f32 = (codes << 13).view(np.float32)
    nan = np.isnan(f32)
    assert np.array_equal(bits[~nan], (codes << 13)[~nan])
    assert np.all(bits[nan] == ((codes[nan] << 13) & 0x80000000) | FP32_QNAN)
    assert nan.sum() == 2 * 1023


def test_decode_fp32_is_identity_except_nan_payload():
    rng = np.random.default_rng(12345)
    u = np.concatenate([rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32),
                        np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFFFFFFF,
                                  0x00000001, 0x807FFFFF], dtype=np.uint32)])
    b = decode_bits(u, FP32)
    nan = np.isnan(u.view(np.float32))
    assert np.array_equal(b[~nan], u[~nan])
    assert np.all(b[nan] == (u[nan] & 0x80000000) | FP32_QNAN)


def test_decode_rejects_bad_codes():
    with pytest.raises(ValueError, match=r"codes must be in \[0, 255\]"):
        decode(np.array([256]), FP8_E4M3FN)
    with pytest.raises(ValueError, match=r"codes must be in \[0, 15\]"):
        decode(np.array([-1, 3]), FP4_E2M1)
    with pytest.raises(TypeError, match="codes must be an array of unsigned integer codes"):
        decode(np.array([1.0]), BF16)
    with pytest.raises(TypeError, match="fmt must be an rtl.config.FPFormat"):
        decode(np.array([1]), "bf16")
    with pytest.raises(ValueError, match="fmt must be a subset of FP32"):
        decode(np.array([1]), FPFormat(name="big", exp_bits=8, man_bits=7, bias=-20))
