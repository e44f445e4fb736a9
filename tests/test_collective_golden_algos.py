# SPDX-License-Identifier: Apache-2.0
"""The collectives' data model (golden/collective/algos.py) against independent references:
sums folded with exact fractions in the documented ring order and rounded by a rounding
written here (not golden's); max/min with a reference of the NaN and signed-zero rules;
BF16/FP16 results against ``ml_dtypes``/numpy RNE of the exact sum; gathers, all-to-all and
permute against numpy data movement; bad input."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from golden.collective.algos import (CollectiveError, all_gather, all_reduce, all_to_all,
                                     decode_codes, encode, permute, reduce_scatter)
from rtl.isa import DTYPE_CODES, E_FORMAT, E_OPCODE, E_SHAPE
from tests.golden.test_vector_golden import rne_fp32

QNAN = 0x7FC00000
RANKS = (1, 2, 3, 4, 8, 64)


def rne_f32(q):
    """FP32 bits of the Fraction ``q`` rounded to nearest even (subnormals, overflow to Inf),
    from the definition (tests/golden/test_vector_golden.py); the exact sum of the fold is
    never -0 here."""
    return rne_fp32(q)


def _frac(bits):
    return Fraction(float(np.uint32(bits).view(np.float32)))


def _rand_fp32(rng, n, size):
    """FP32 values with mixed exponents and signs, so that the order of the sum matters."""
    m = rng.integers(1 << 23, 1 << 24, size=(n, size))
    e = rng.integers(-40, 10, size=(n, size))
    s = rng.choice([-1.0, 1.0], size=(n, size))
    return [np.float32(s[r] * np.ldexp(m[r].astype(np.float64), e[r])) for r in range(n)]


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def _ref_sum_order(vals, n, size):
    """Expected FP32 bits of the all-reduce: chunk c (docs/collectives.md §9: ranks
    c+1, c+2, ..., c, left fold, each step rounded to FP32)."""
    q, r = divmod(size, n)
    out, lo = [], 0
    for c in range(n):
        hi = lo + q + (c < r)
        for j in range(lo, hi):
            acc = int(_bits(vals[(c + 1) % n][j]))
            for k in range(2, n + 1):
                acc = rne_f32(_frac(acc) + _frac(_bits(vals[(c + k) % n][j])))
            out.append(acc)
        lo = hi
    return np.array(out, dtype=np.uint32)


@pytest.mark.parametrize("n", RANKS)
def test_add_order_exact_fractions(n):
    seed = 100 + n
    rng = np.random.default_rng(seed)
    size = 2 * n + 3                              # chunks of unequal size
    vals = _rand_fp32(rng, n, size)
    res = all_reduce([_bits(v) for v in vals], "fp32")
    ref = _ref_sum_order(vals, n, size)
    for r in range(n):
        assert res.outputs[r].tobytes() == ref.tobytes(), f"seed {seed} rank {r}"
    rs = reduce_scatter([_bits(v) for v in vals], "fp32")
    assert np.concatenate(rs.outputs).tobytes() == ref.tobytes(), f"seed {seed}"
    if n >= 3:
        # the test can tell orders apart: the reverse order differs somewhere
        rev = [rne_f32(sum((_frac(_bits(vals[k][j])) for k in range(n)), Fraction(0)))
               for j in range(size)]
        assert rev != list(ref), f"seed {seed}: data too easy to tell the order"


@pytest.mark.parametrize("n", (2, 4, 8))
@pytest.mark.parametrize("dtype", ("bf16", "fp16"))
def test_identical_bytes_and_single_rounding(n, dtype):
    """Inputs whose FP32 partial sums are exact: the result is RNE(exact sum) once, which
    differs from rounding every partial into the format."""
    seed = 7 * n + len(dtype)
    rng = np.random.default_rng(seed)
    np_t = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
    bits = 8 if dtype == "bf16" else 11
    size = 256
    vals = [(rng.integers(1 << (bits - 1), 1 << bits, size) *
             rng.choice([-1, 1], size)).astype(np.float64) * 2.0 ** rng.integers(-4, 2, size)
            for _ in range(n)]
    data = [np.asarray(v.astype(np_t)).view(np.uint16) for v in vals]
    assert all(np.array_equal(np.asarray(d).view(np_t).astype(np.float64), v)
               for d, v in zip(data, vals))
    res = all_reduce(data, dtype)
    first = res.outputs[0].tobytes()
    assert all(o.tobytes() == first for o in res.outputs), f"seed {seed}"
    exact = np.sum(vals, axis=0)                  # exact in float64 and in every FP32 partial
    ref = np.asarray(exact.astype(np_t)).view(np.uint16)
    assert np.array_equal(res.outputs[0], ref), f"seed {seed}"
    # from 3 ranks on, rounding every partial sum into the format gives other bits somewhere
    acc = np.zeros(size, np.float64)
    for v in vals:
        acc = (acc + v).astype(np_t).astype(np.float64)
    if n >= 3:
        assert not np.array_equal(np.asarray(acc.astype(np_t)).view(np.uint16), ref)
    # out_dtype fp32 keeps the FP32 sum
    f32 = all_reduce(data, dtype, out_dtype="fp32").outputs[0]
    assert np.array_equal(f32.view(np.float32).astype(np.float64), exact), f"seed {seed}"


def test_bf16_rounding_of_inexact_sum_against_ml_dtypes():
    seed = 3
    rng = np.random.default_rng(seed)
    vals = _rand_fp32(rng, 4, 200)
    data = [_bits(v) for v in vals]
    f32 = all_reduce(data, "fp32").outputs[0]
    bf = all_reduce(data, "fp32", out_dtype="bf16").outputs[0]
    ref = np.asarray(f32.view(np.float32).astype(ml_dtypes.bfloat16)).view(np.uint16)
    assert np.array_equal(bf, ref), f"seed {seed}"


def _ref_minmax(values, want_max):
    """FP32 bits of max/min of Python floats: NaN if any is NaN, else the extreme with
    -0 < +0."""
    if any(math.isnan(v) for v in values):
        return QNAN
    key = (lambda v: (v, math.copysign(1, v))) if want_max else \
        (lambda v: (-v, -math.copysign(1, v)))
    best = max(values, key=key)
    return int(np.float32(best).view(np.uint32))


@pytest.mark.parametrize("op", ("max", "min"))
@pytest.mark.parametrize("n", (1, 2, 3, 8))
def test_max_min_nan_and_signed_zero(op, n):
    seed = 11 * n + len(op)
    rng = np.random.default_rng(seed)
    pool = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 2.0 ** -140,
                     -(2.0 ** -140), 3.0], dtype=np.float32)
    size = 300
    vals = [pool[rng.integers(0, len(pool), size)] for _ in range(n)]
    vals[0][:4] = [0.0, -0.0, -0.0, 0.0]          # zeros of both signs on every rank
    for v in vals[1:]:
        v[:4] = [-0.0, 0.0, -0.0, -0.0]
    vals = [np.where(rng.random(size) < 0.85, v, np.float32(np.nan)) if r == n - 1 else v
            for r, v in enumerate(vals)]          # NaN sometimes only on the last rank
    res = all_reduce([_bits(v) for v in vals], "fp32", op=op)
    ref = np.array([_ref_minmax([float(v[j]) for v in vals], op == "max") for j in range(size)],
                   dtype=np.uint32)
    for r in range(n):
        assert np.array_equal(res.outputs[r], ref), f"seed {seed} rank {r}"


def test_max_in_fp16_and_nan_code():
    data = [encode(np.float32([1.0, -0.0, np.nan]), "fp16"),
            encode(np.float32([2.0, 0.0, 1.0]), "fp16")]
    out = all_reduce(data, DTYPE_CODES["fp16"], op="max").outputs[1]
    got = decode_codes(out, "fp16")
    assert got[0] == 2.0 and got[1] == 0.0 and not np.signbit(got[1]) and np.isnan(got[2])


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("dtype", ("fp32", "bf16", "fp8_e4m3", "fp8_e5m2"))
def test_data_movement(n, dtype):
    seed = n * 31 + len(dtype)
    rng = np.random.default_rng(seed)
    width = {"fp32": 32, "bf16": 16}.get(dtype, 8)
    ut = {32: np.uint32, 16: np.uint16, 8: np.uint8}[width]
    b = 3
    data = [rng.integers(0, 1 << width, n * b, dtype=np.uint64).astype(ut) for _ in range(n)]
    ag = all_gather(data, dtype)
    ref = np.concatenate(data)
    assert all(np.array_equal(o, ref) for o in ag.outputs), f"seed {seed}"
    a2a = all_to_all(data, dtype)
    ref = np.stack(data).reshape(n, n, b).transpose(1, 0, 2).reshape(n, n * b)
    for r in range(n):
        assert np.array_equal(a2a.outputs[r], ref[r]), f"seed {seed} rank {r}"
    perm = [int(p) for p in rng.permutation(n)]
    pr = permute(data, dtype, perm)
    for r in range(n):
        assert np.array_equal(pr.outputs[perm[r]], data[r]), f"seed {seed} perm {perm}"


def test_encode_decode_round_trip():
    x = np.float32([1.0, -2.5, 65504.0, 1e-8])
    assert np.array_equal(decode_codes(encode(x, "fp32"), "fp32"), x)
    assert decode_codes(encode(x, "bf16"), "bf16")[1] == -2.5


# --- bad input ---------------------------------------------------------------------------------

U32 = [np.zeros(8, np.uint32)] * 2


@pytest.mark.parametrize("call, exc, words, code", [
    (lambda: all_reduce([np.zeros(8, np.uint32), np.zeros(6, np.uint32)], "fp32"),
     CollectiveError, ("data[1]", "8 elements", "not 6"), E_SHAPE),
    (lambda: all_gather([np.zeros(4, np.uint8)] * 2 + [np.zeros(5, np.uint8)], "fp8_e4m3"),
     CollectiveError, ("data[2]",), E_SHAPE),
    (lambda: all_reduce(U32, "int32"), CollectiveError, ("dtype", "integer", "'int32'"),
     E_FORMAT),
    (lambda: all_reduce(U32, np.int8), CollectiveError, ("dtype", "integer"), E_FORMAT),
    (lambda: all_reduce([np.zeros(8, np.uint8)] * 2, "fp8_e4m3"), CollectiveError,
     ("dtype", "'fp8_e4m3'"), E_FORMAT),
    (lambda: all_reduce(U32, "fp32", out_dtype="fp8_e5m2"), CollectiveError, ("out_dtype",),
     E_FORMAT),
    (lambda: reduce_scatter(U32, 15), CollectiveError, ("dtype", "15"), E_FORMAT),
    (lambda: all_reduce(U32, "fp32", op="sum"), CollectiveError, ("op", "'sum'"), E_OPCODE),
    (lambda: all_to_all([np.zeros(7, np.uint32)] * 2, "fp32"), CollectiveError,
     ("multiple", "2"), E_SHAPE),
])
def test_bad_input_codes(call, exc, words, code):
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value)
    assert e.value.code == code
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("call, exc, words", [
    (lambda: all_reduce([np.zeros(4, np.float32)] * 2, "fp32"), TypeError, ("data[0]",)),
    (lambda: all_reduce([np.full(4, 1 << 16, np.uint32)] * 2, "bf16"), ValueError,
     ("data[0]", "65535")),
    (lambda: all_reduce([], "fp32"), ValueError, ("len(data)", ">= 1")),
    (lambda: all_reduce(np.zeros((2, 4), np.uint32), "fp32"), TypeError, ("data",)),
    (lambda: permute(U32, "fp32", [0, 0]), ValueError, ("perm", "permutation")),
    (lambda: permute(U32, "fp32", [0, 2]), ValueError, ("perm[1]", "[0, 1]")),
    (lambda: permute(U32, "fp32", [1]), ValueError, ("perm",)),
])
def test_bad_input(call, exc, words):
    with pytest.raises(exc) as e:
        call()
    for w in words:
        assert w in str(e.value)


def test_add_zeros_inf_nan():
    """IEEE specials of the FP32 add, each written out: -0 + -0 = -0, x + (-x) = +0,
    Inf + (-Inf) = NaN, any NaN (payload or sign) gives the canonical 0x7FC00000."""
    cols = [  # one column per element: the value of each of 3 ranks, then the expected bits
        ([-0.0, -0.0, -0.0], 0x80000000),
        ([1.5, -1.5, -0.0], 0x00000000),
        ([np.inf, 1.0, -np.inf], QNAN),
        ([np.inf, 1.0, 2.0], 0x7F800000),
        ([3.4e38, 3.4e38, -3.4e38], 0x7F800000),      # overflow at rank 2's step stays Inf
    ]
    data = [_bits(np.float32([c[0][r] for c in cols])) for r in range(3)]
    payload = np.uint32(0xFFA00001)                    # a negative NaN with a payload
    data = [np.append(d, payload if r == 1 else np.uint32(0x3F800000)) for r, d in
            enumerate(data)]
    ref = np.array([c[1] for c in cols] + [QNAN], dtype=np.uint32)
    res = all_reduce(data, "fp32")
    for r in range(3):
        assert np.array_equal(res.outputs[r], ref), [hex(v) for v in res.outputs[r]]


@pytest.mark.parametrize("n, shape", [(4, (1,)), (64, (3,)), (3, (2, 5)), (2, (0,))])
def test_small_and_shaped_messages(n, shape):
    """Fewer elements than ranks (empty chunks), 2-D buffers (all-reduce keeps the shape),
    empty messages."""
    seed = n + sum(shape)
    rng = np.random.default_rng(seed)
    vals = [np.float32(rng.integers(-8, 8, shape)) for _ in range(n)]
    res = all_reduce([_bits(v) for v in vals], "fp32")
    ref = _bits(np.sum(np.stack(vals).astype(np.float64), axis=0).astype(np.float32))
    for o in res.outputs:
        assert o.shape == shape and np.array_equal(o, ref), f"seed {seed}"
    rs = reduce_scatter([_bits(v) for v in vals], "fp32").outputs
    assert np.array_equal(np.concatenate(rs), ref.reshape(-1)), f"seed {seed}"
