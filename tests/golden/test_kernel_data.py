# SPDX-License-Identifier: Apache-2.0
"""Data in and out of kernel tensors as numbers (golden/kernel/data.py): float arrays converted
by RNE, codes only through ``codes=``, results read back as the format's numpy type."""

import ml_dtypes
import numpy as np
import pytest

from golden.isasim import IsaSim
from golden.kernel import Kernel
from rtl.config import SMALL

CFG = SMALL
BF16 = ml_dtypes.bfloat16


def _roundtrip(data, dtype="bf16", **kw):
    """Store ``data`` in a tensor, copy it through SBUF to an output tensor, read it back."""
    k = Kernel(CFG, dram_bytes=1 << 16)
    x = k.dram_tensor("x", dtype=dtype, data=data, **kw)
    y = k.dram_tensor("y", x.shape, dtype)
    t = k.sbuf_tile(x.shape[0], x.shape[1], dtype)
    k.load(t, x)
    k.store(y, t)
    k.output("y", y)
    kp = k.build()
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    return kp, sim


def _same(got, want):
    """Bit-equal, except that any NaN equals any NaN."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.dtype == want.dtype
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan)
    gb = np.asarray(got).view(f"u{got.itemsize}")
    wb = np.asarray(want).view(f"u{want.itemsize}")
    assert np.array_equal(gb[~nan], wb[~nan])


def _f32_specials():
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF,   # ties even/odd, above
                     0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF,               # overflow to inf, max
                     0x00000001, 0x00008000, 0x00018000, 0x00400000,   # subnormals and ties
                     0x80008000, 0x80000000, 0x00000000,               # -0 tie, +-0
                     0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001], np.uint32)
    return bits.view(np.float32).reshape(2, 9)


def test_float32_to_bf16_roundtrip_is_ml_dtypes_rne():
    rng = np.random.default_rng(1)
    x = np.concatenate([_f32_specials(), rng.standard_normal((2, 9)).astype(np.float32)])
    kp, sim = _roundtrip(x)
    got = kp.result(sim, "y")
    _same(got, x.astype(BF16))
    assert np.array_equal(kp.result(sim, "y", codes=True), got.view(np.uint16))
    assert kp.read_outputs(sim)["y"].dtype == BF16


def test_float64_is_rounded_once():
    # 1 + 2**-8 + 2**-30: above the bf16 tie; float32 first would round it onto the tie (-> 1)
    x = np.array([[1 + 2.0 ** -8 + 2.0 ** -30, -(1 + 2.0 ** -8 + 2.0 ** -30), 1 + 2.0 ** -8,
                   1e300, -1e300, 1e-300, np.nan, np.inf]])
    kp, sim = _roundtrip(x)
    got = kp.result(sim, "y")
    want = np.array([[1 + 2.0 ** -7, -(1 + 2.0 ** -7), 1.0, np.inf, -np.inf, 0.0, np.nan,
                      np.inf]]).astype(BF16)
    _same(got, want)
    assert x[:1, :1].astype(np.float32).astype(BF16)[0, 0] == 1.0      # the double rounding avoided


def test_float64_fp32_and_float8_formats():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8)) * 100
    kp, sim = _roundtrip(x, "fp32")
    _same(kp.result(sim, "y"), x.astype(np.float32))
    y = rng.standard_normal((4, 8)).astype(np.float32)
    for dtype, t in (("fp8_e4m3", ml_dtypes.float8_e4m3), ("fp8_e5m2", ml_dtypes.float8_e5m2),
                     ("fp16", np.float16)):
        kp, sim = _roundtrip(y, dtype)
        _same(kp.result(sim, "y"), y.astype(t))
        kp, sim = _roundtrip(y.astype(t), dtype)      # the exact type: codes as they are
        _same(kp.result(sim, "y"), y.astype(t))


def test_tf32_reads_back_float32():
    x = np.array([[1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -10 + 2.0 ** -12]],
                 np.float32)
    kp, sim = _roundtrip(x, "tf32")
    got = kp.result(sim, "y")
    assert got.dtype == np.float32
    assert got.tolist() == [[1.0, 1 + 2 * 2.0 ** -10, 1 + 2.0 ** -10]]


def test_codes_go_in_by_name():
    c = np.arange(16, dtype=np.uint32).reshape(2, 8) * 0x101
    kp, sim = _roundtrip(None, codes=c)
    assert np.array_equal(kp.result(sim, "y", codes=True), c)
    assert np.array_equal(kp.result(sim, "x", codes=True), c)   # a tensor by name


def _kernel():
    return Kernel(CFG, dram_bytes=1 << 16)


def test_integer_data_is_refused():
    with pytest.raises(TypeError, match=r"'x' data must be a float array.*uint32.*bf16 element "
                                        r"codes as codes="):
        _kernel().dram_tensor("x", dtype="bf16", data=np.ones((2, 2), np.uint32))


def test_foreign_ml_dtype_is_refused():
    with pytest.raises(TypeError, match=r"'x' data of dtype float8_e4m3fn does not fit format "
                                        r"bf16"):
        _kernel().dram_tensor("x", dtype="bf16",
                              data=np.ones((2, 2), ml_dtypes.float8_e4m3fn))
    with pytest.raises(TypeError, match=r"'s' of format e8m0 takes ml_dtypes.float8_e8m0fnu"):
        _kernel().dram_tensor("s", dtype="e8m0", data=np.ones((2, 2), np.float32))


def test_codes_out_of_range_are_refused():
    with pytest.raises(ValueError, match=r"'x' codes must be in \[0, 0xffff\] \(16-bit bf16 "
                                         r"codes\), not 0x3f800000"):
        _kernel().dram_tensor("x", dtype="bf16",
                              codes=np.full((2, 2), 0x3F800000, np.uint32))
    with pytest.raises(ValueError, match=r"codes must be in \[0, 0xff\].*not -0x1"):
        _kernel().dram_tensor("x", dtype="fp8_e4m3", codes=np.full((2, 2), -1))
    with pytest.raises(TypeError, match=r"'x' codes must be an integer array"):
        _kernel().dram_tensor("x", dtype="bf16", codes=np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"data= \(values\) or codes=, not both"):
        _kernel().dram_tensor("x", data=np.ones((1, 1)), codes=np.ones((1, 1), np.uint16))


def test_shape_must_match_the_data():
    with pytest.raises(ValueError, match=r"'x' shape \(2, 3\) must be the shape of its data "
                                         r"\(4, 4\)"):
        _kernel().dram_tensor("x", (2, 3), "bf16", data=np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"'x' shape \(1, 4\) must be the shape of its codes"):
        _kernel().dram_tensor("x", (1, 4), "bf16", codes=np.ones((4, 1), np.uint16))
    assert _kernel().dram_tensor("x", (1, 4), "bf16", data=np.ones((1, 4))).shape == (1, 4)


def test_bad_data_leaves_the_kernel_unchanged():
    k = _kernel()
    with pytest.raises(TypeError):
        k.dram_tensor("x", dtype="bf16", data=np.ones((2, 2), np.int32))
    assert k.tensors == {} and not any(k.dram)
    k.dram_tensor("x", dtype="bf16", data=np.ones((2, 2), np.float32))   # the name is free


def test_result_of_unknown_name():
    kp, sim = _roundtrip(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match=r"result name must be an output or a tensor.*'z'"):
        kp.result(sim, "z")


def _bf16_rne_f64(v):
    """Exact RNE of the float64 ``v`` to bf16 (normal range): ``round`` is half-even and the
    scaling by a power of two is exact."""
    import math
    m, e = math.frexp(v)
    q = 2.0 ** (e - 8)
    return round(v / q) * q


def test_float64_random_near_ties_matches_exact_rounding():
    seed = 7
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(64).astype(BF16).astype(np.float64)
    ulp = np.array([2.0 ** (np.frexp(b)[1] - 8) for b in base])
    x = base + ulp * (0.5 + rng.choice([-1, 1], 64) * 2.0 ** -rng.integers(17, 40, 64))
    x = x.reshape(4, 16)
    kp, sim = _roundtrip(x)
    want = np.array([_bf16_rne_f64(v) for v in x.ravel()]).reshape(4, 16)
    assert np.array_equal(kp.result(sim, "y").astype(np.float64), want), f"seed {seed}"


def test_docs_snippet_runs():
    """The ``# data in and out`` example of docs/kernels.md §5 runs as written."""
    import pathlib
    text = (pathlib.Path(__file__).parents[2] / "docs" / "kernels.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python run\n")[1:]]
    code = [b for b in blocks if b.startswith("# data in and out")]
    assert len(code) == 1
    exec(compile(code[0], "docs/kernels.md", "exec"), {})
