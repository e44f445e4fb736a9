# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine's function unit (rtl/scalar/function.py) in amaranth.sim, bit for bit
against golden.activation.evaluate (the expected values never come from the RTL).

One simulator for the module (small preset), reset between tests; each test loads a table image
through the table-write port and streams random and directed inputs (specials, subnormals,
segment and binade boundaries, the exp-reduction clamp)."""

import numpy as np
import pytest

from golden.activation import evaluate, table, table_image
from rtl.config import get_preset
from rtl.scalar.function import FunctionUnit
from tb.amsim import SimBench
from tb.scalar.rig import FunctionDriver

CFG = get_preset("small")

DIRECTED = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFF800001, 0x7F800001,
    0x00000001, 0x80000001, 0x007FFFFF, 0x00400000, 0x00800000, 0x80800000, 0x7F7FFFFF,
    0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F7FFFFF, 0x3FC00000, 0x3FBFFFFF, 0x40000000,
    0x3F000000, 0x3EB17218, 0xBEB17218, 0x43480000, 0x43480001, 0xC3480001, 0x42B17218,
    0x42B17219, 0xC2CFF1B5, 0xC2CFF1B4, 0x41200000, 0xC1200000, 0x30000000, 0xB0000000,
    0x33800000, 0x4B400000, 0xCB400000, 0x4F000000,
], dtype=np.uint32)


@pytest.fixture(scope="module")
def drv():
    return FunctionDriver(SimBench(FunctionUnit(CFG)))


def inputs(rng, n):
    return np.concatenate([
        DIRECTED,
        rng.integers(0, 1 << 32, n, dtype=np.uint32),
        np.asarray(rng.uniform(-12, 12, n), np.float32).view(np.uint32),
        np.asarray(rng.uniform(-1, 1, n // 2), np.float32).view(np.uint32),
    ]).astype(np.uint32)


#: Functions covering every reduction mode (direct odd/even/none, exp, log, even, plain), the
#: exp segments with scale / mulx / var_x, the log add and the neg_nan specials; gelu for the
#: negative half's own tiny segment (its two tiny segments differ, silu's give equal results).
FUNCS = ["silu", "gelu", "log", "rsqrt", "reciprocal", "tanh", "exp", "softplus", "square", "relu"]


def check_unit(drv, name, x, seed):
    """The function unit's outputs for inputs ``x`` equal golden's, bit for bit."""
    y = drv.run(table_image(table(name), CFG), x)
    want = evaluate(table(name), x)
    assert len(y) == len(x), (name, seed, len(y))
    bad = np.nonzero(y != want)[0]
    assert not len(bad), (name, seed, [(hex(int(x[i])), hex(int(y[i])), hex(int(want[i])))
                                       for i in bad[:6]])


@pytest.mark.parametrize("name", FUNCS)
def test_function_unit_bit_exact(drv, name, seed):
    rng = np.random.default_rng(seed)
    x = inputs(rng, 24)
    check_unit(drv, name, x, seed)


#: The BF16 inputs whose x/2 is not a BF16 value (subnormals, first normal binade), where the
#: ``tiny_odd`` rule decides the BF16 rounding of gelu, gelu_tanh and silu, as FP32 bits.
TINY_BF16 = np.concatenate([np.arange(0x100, dtype=np.uint32),
                            np.arange(0x8000, 0x8100, dtype=np.uint32)]) << 16
#: FP32 inputs of the tiny segment: x/2 exact or a midpoint, k = |x| >> 1 even or odd.
TINY_FP32 = np.array([0x00000001, 0x00000002, 0x00000003, 0x00000006, 0x007FFFFF, 0x007FFFFE,
                      0x00800001, 0x00800003, 0x00800002, 0x01000001, 0x30000001, 0x307FFFFF],
                     np.uint32)


@pytest.mark.parametrize("name", ["silu", pytest.param("gelu", marks=pytest.mark.full),
                                  pytest.param("gelu_tanh", marks=pytest.mark.full)])
def test_function_unit_tiny_odd(drv, name, seed):
    """The tiny segment's round-to-odd: every BF16 input it decides, tiny FP32 inputs of both
    signs and both directions, and a random sample, bit for bit against golden (one header
    bit: silu in ``make test``, its larger-table siblings under ``full``)."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([TINY_BF16, TINY_FP32, TINY_FP32 | np.uint32(0x80000000),
                        rng.integers(0, 97 << 23, 24, dtype=np.uint32)
                        | (rng.integers(0, 2, 24, dtype=np.uint32) << 31),
                        inputs(rng, 8)]).astype(np.uint32)
    check_unit(drv, name, x, seed)


def test_function_unit_gaps_and_reload(drv, seed):
    """Idle cycles between elements (valid, not position, carries data) and a second table
    loaded over the first (every header/map/segment word rewritten)."""
    rng = np.random.default_rng(seed)
    x = inputs(rng, 12)
    gap = rng.integers(0, 2, len(x)).astype(bool)
    img = table_image(table("sigmoid"), CFG)
    img.update(table_image(table("gelu_tanh"), CFG))     # overwrite: mixed images differ
    first = drv.run(img, x, gap=gap)
    assert len(first) == len(x)
    # the merged image is neither table: check against an explicit overwrite of sigmoid by
    # erf (fewer segments, so sigmoid's tail segments stay behind, unused by erf's map)
    img2 = table_image(table("sigmoid"), CFG)
    img2.update(table_image(table("erf"), CFG))
    y = drv.run(img2, x, gap=gap)
    assert (y == evaluate(table("erf"), x)).all(), seed


def test_function_unit_latency_and_config():
    sig = FunctionUnit.Signature(CFG)
    L = CFG.mul_stages + CFG.add_stages
    assert sig.latency == 12 * L + 4
    with pytest.raises(ValueError, match="'mul_stages' \\+ 'add_stages' >= 1"):
        FunctionUnit.Signature(CFG.replace(mul_stages=0, add_stages=0))
    with pytest.raises(TypeError, match="FunctionUnit cfg must be a CoreConfig"):
        FunctionUnit.Signature(None)


def test_table_image_checks():
    with pytest.raises(ValueError, match="'act_segments' is 256"):
        table_image(table("gelu"), CFG.replace(act_segments=256))
