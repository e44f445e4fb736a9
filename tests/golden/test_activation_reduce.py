# SPDX-License-Identifier: Apache-2.0
"""reduce_cmd of the activation instruction (golden.activation.activation_reduce): documented
add order against a loop of the FP32 adder model, and the ISA constants agree with golden."""

import numpy as np
import pytest

from golden.activation import (FUNCTIONS, REDUCE_IDLE, REDUCE_REDUCE, REDUCE_RESET,
                               REDUCE_RESET_REDUCE, activation, activation_reduce)
from golden.arith import add_fp32
from rtl.config import get_preset
from rtl.scalar import isa


def tile(rng, p=4, n=37):
    return np.asarray(rng.uniform(-3, 3, (p, n)), np.float32).view(np.uint32)


def test_reduce_order_is_ap_order(seed):
    rng = np.random.default_rng(seed)
    x = tile(rng)
    acc0 = np.asarray(rng.uniform(-100, 100, 4), np.float32).view(np.uint32)
    sc = np.asarray(rng.uniform(0.5, 2, (4, 1)), np.float32).view(np.uint32)
    y, acc = activation_reduce(x, "exp", sc, 0, REDUCE_REDUCE, acc0)
    want = acc0.copy()
    for j in range(x.shape[1]):
        want = add_fp32(want, y[:, j])
    assert (acc == want).all(), seed
    assert (y == activation(x, "exp", np.broadcast_to(sc, x.shape), 0)).all()
    _, acc_rr = activation_reduce(x, "exp", sc, 0, REDUCE_RESET_REDUCE, acc0)
    fresh = np.zeros(4, np.uint32)
    for j in range(x.shape[1]):
        fresh = add_fp32(fresh, y[:, j])
    assert (acc_rr == fresh).all()


def test_idle_and_reset(seed):
    rng = np.random.default_rng(seed)
    x = tile(rng)
    acc0 = np.asarray(rng.uniform(-1, 1, 4), np.float32).view(np.uint32)
    _, a_idle = activation_reduce(x, "tanh", reduce_cmd=REDUCE_IDLE, acc=acc0)
    _, a_reset = activation_reduce(x, "tanh", reduce_cmd=REDUCE_RESET, acc=acc0)
    assert (a_idle == acc0).all() and (a_reset == 0).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="reduce_cmd must be in"):
        activation_reduce(np.zeros((2, 2), np.uint32), "exp", reduce_cmd=4)
    with pytest.raises(ValueError, match=r"\(P, N\) array"):
        activation_reduce(np.zeros(3, np.uint32), "exp")


def test_isa_constants_agree_with_golden():
    assert isa.FUNCTION_NAMES == FUNCTIONS
    assert all(0x30 <= op <= 0x3F for op in isa.OPCODES)
    assert (isa.REDUCE_IDLE, isa.REDUCE_RESET, isa.REDUCE_REDUCE, isa.REDUCE_RESET_REDUCE) == \
        (REDUCE_IDLE, REDUCE_RESET, REDUCE_REDUCE, REDUCE_RESET_REDUCE)
    lay = isa.instr_layout(get_preset("small"))
    for f in ("opcode", "func", "reduce_cmd", "sr", "dst", "src", "scale", "bias",
              "dst_dtype", "src_dtype"):
        assert f in lay.members
    assert isa.done_layout(get_preset("small")).members["status"] == 8
