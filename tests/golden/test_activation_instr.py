# SPDX-License-Identifier: Apache-2.0
"""The ACTIVATION / COPY instruction on memory images (golden.activation.execute): the engine's
contract. Expected values are built independently (numpy strides, ml_dtypes RNE casts)."""

import ml_dtypes as md
import numpy as np
import pytest

from golden.activation import (E_FORMAT, E_OK, E_OPCODE, E_SHAPE, FUNCTION_IDS, OP_COPY,
                               OP_TENSOR_SCALAR, REDUCE_RESET_REDUCE, ActInstr, activation,
                               execute)
from golden.ap import AP, E_AP_PART, E_AP_RANGE, PSUM, SBUF
from golden.arith import add_fp32
from rtl.config import get_preset

CFG = get_preset("small")
P = CFG.partitions


def mems(rng):
    return {SBUF: rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8),
            PSUM: rng.integers(0, 256, (P, CFG.psum_bytes_per_partition), dtype=np.uint8)}


def f32b(v):
    return np.asarray(v, np.float32).view(np.uint32)


def test_psum_to_sbuf_bf16_reversed_with_reduce(seed):
    """PSUM FP32 (contiguous) -> SBUF BF16 written with a negative step, partitions 2..3."""
    rng = np.random.default_rng(seed)
    m = mems(rng)
    n = 24
    x = rng.uniform(-4, 4, (2, n)).astype(np.float32)
    m[PSUM][2:4, 64:64 + 4 * n] = x.view(np.uint8).reshape(2, 4 * n)
    src = AP(memory=PSUM, start_partition=2, num_partitions=2, offset=64, elem_bytes=4,
             dims=((1, n),))
    dst = AP(memory=SBUF, start_partition=2, num_partitions=2, offset=200, elem_bytes=2,
             dims=((-1, n),))
    acc = f32b(rng.uniform(-1, 1, P))
    acc0 = acc.copy()
    before = {k: v.copy() for k, v in m.items()}
    sc, bi = f32b(1.5), f32b(-0.25)
    ins = ActInstr(func=FUNCTION_IDS["gelu"], src=src, dst=dst, src_dtype=0, dst_dtype=2,
                   scale=int(sc), bias=int(bi), reduce_cmd=REDUCE_RESET_REDUCE)
    assert execute(CFG, ins, m, acc) == E_OK
    y = activation(x.view(np.uint32), "gelu", sc, bi)
    want = y.view(np.float32).astype(md.bfloat16)                   # RNE, independent cast
    got = m[SBUF][2:4, 200 - 2 * (n - 1):202].copy().view(md.bfloat16)[:, ::-1]
    assert (got.view(np.uint16) == want.view(np.uint16)).all(), seed
    # nothing else changed
    mask = np.zeros_like(m[SBUF], bool)
    mask[2:4, 200 - 2 * (n - 1):202] = True
    assert (m[SBUF][~mask] == before[SBUF][~mask]).all()
    assert (m[PSUM] == before[PSUM]).all()
    # accumulators: partitions 2, 3 = FP32 sums of y in AP order from +0; others unchanged
    for p in (2, 3):
        s = np.uint32(0)
        for j in range(n):
            s = add_fp32(s, y[p - 2, j])
        assert acc[p] == s
    assert (acc[:2] == acc0[:2]).all()


def test_copy_fp8_to_fp32(seed):
    rng = np.random.default_rng(seed)
    m = mems(rng)
    src = AP(memory=SBUF, start_partition=0, num_partitions=P, offset=10, elem_bytes=1,
             dims=((2, 5), (11, 3)))
    dst = AP(memory=SBUF, start_partition=0, num_partitions=P, offset=1024, elem_bytes=4,
             dims=((1, 15),))
    ins = ActInstr(opcode=OP_COPY, src=src, dst=dst, src_dtype=4, dst_dtype=0)
    assert execute(CFG, ins, m, np.zeros(P, np.uint32)) == E_OK
    idx = 10 + np.array([2 * i + 11 * j for j in range(3) for i in range(5)])
    want = m[SBUF][:, idx].view(md.float8_e5m2).astype(np.float32)
    got = m[SBUF][:, 1024:1024 + 60].copy().view(np.float32)
    assert np.array_equal(got.view(np.uint32)[~np.isnan(want)],
                          want.view(np.uint32)[~np.isnan(want)])


def test_tf32_element_is_its_low_19_bits(seed):
    """A 4-byte TF32 element with bits set above bit 18 is read as its low 19 bits (the engine's
    widen, the DMA element path): COPY TF32 -> FP32 gives the code's value, per-partition TF32
    scale likewise; a TF32 destination is written with the upper 13 bits 0."""
    rng = np.random.default_rng(seed)
    m = mems(rng)
    code = rng.integers(0, 1 << 19, (P, 8), dtype=np.uint32)
    code[:, 0] = 0x1FC00                                   # 1.0
    code[(code & 0x3FC00) == 0x3FC00] &= 0x7FC00           # no NaN / Inf codes
    garbage = rng.integers(1, 1 << 13, (P, 8), dtype=np.uint32) << np.uint32(19)
    m[SBUF][:, 0:32] = (code | garbage).view(np.uint8).reshape(P, 32)
    want = code << np.uint32(13)                           # TF32 is FP32's top 19 bits
    src = AP(memory=SBUF, num_partitions=P, dims=((1, 8),))
    dst = AP(memory=SBUF, num_partitions=P, offset=512, dims=((1, 8),))
    ins = ActInstr(opcode=OP_COPY, src=src, dst=dst, src_dtype=1, dst_dtype=0)
    assert execute(CFG, ins, m, np.zeros(P, np.uint32)) == E_OK
    assert (m[SBUF][:, 512:544].copy().view(np.uint32) == want).all()
    sc = AP(memory=SBUF, num_partitions=P, dims=((1, 1),))     # element 0: 1.0 + garbage
    ins = ActInstr(opcode=OP_COPY, src=src, dst=dst, src_dtype=1, dst_dtype=1, scale_ap=sc,
                   scale_dtype=1)
    assert execute(CFG, ins, m, np.zeros(P, np.uint32)) == E_OK
    assert (m[SBUF][:, 512:544].copy().view(np.uint32) == code).all()


@pytest.mark.parametrize("change, code", [
    (dict(opcode=OP_TENSOR_SCALAR), E_OPCODE),
    (dict(opcode=0x20), E_OPCODE),
    (dict(func=17), E_OPCODE),
    (dict(src_dtype=2), E_FORMAT),                  # bf16 dtype on a 4-byte AP
    (dict(dst_dtype=12), E_FORMAT),                 # reserved code
    (dict(src=AP(memory=SBUF, start_partition=1, num_partitions=3, dims=((1, 8),)),
          dst=AP(memory=SBUF, start_partition=1, num_partitions=3, offset=512,
                 dims=((1, 8),))), E_AP_PART),
    (dict(src=AP(memory=SBUF, dims=((1, 4), (0, 0), (1, 2))),
          dst=AP(memory=SBUF, offset=512, dims=((1, 4),))), 0x0F),        # E_AP_FORM
    (dict(dst=AP(memory=SBUF, elem_bytes=2, dims=((1, 8),)), dst_dtype=2,
          src=AP(memory=SBUF, offset=4080, dims=((1, 8),))), E_AP_RANGE),
    (dict(dst=AP(memory=PSUM, offset=CFG.psum_bank_bytes - 8, dims=((1, 8),))), E_AP_RANGE),
    (dict(dst=AP(memory=SBUF, start_partition=1, dims=((1, 8),))), E_SHAPE),
    (dict(dst=AP(memory=SBUF, dims=((1, 9),))), E_SHAPE),
])
def test_errors_write_nothing(change, code, seed):
    rng = np.random.default_rng(seed)
    m = mems(rng)
    before = {k: v.copy() for k, v in m.items()}
    acc = f32b(rng.uniform(-1, 1, P))
    acc0 = acc.copy()
    base = dict(func=FUNCTION_IDS["exp"], src=AP(memory=SBUF, dims=((1, 8),)),
                dst=AP(memory=SBUF, offset=512, dims=((1, 8),)), reduce_cmd=REDUCE_RESET_REDUCE)
    base.update(change)
    assert execute(CFG, ActInstr(**base), m, acc) == code
    assert all((m[k] == before[k]).all() for k in m) and (acc == acc0).all()


def test_format_not_enabled():
    cfg = get_preset("bf16_only").replace(name="b", partitions=4, pe_rows=4, pe_cols=4)
    m = {SBUF: np.zeros((4, cfg.sbuf_bytes_per_partition), np.uint8),
         PSUM: np.zeros((4, cfg.psum_bytes_per_partition), np.uint8)}
    ins = ActInstr(src=AP(memory=SBUF, elem_bytes=2, dims=((1, 4),)), src_dtype=3,
                   dst=AP(memory=SBUF, offset=64, elem_bytes=2, dims=((1, 4),)), dst_dtype=2)
    assert execute(cfg, ins, m, np.zeros(4, np.uint32)) == E_FORMAT   # fp16 not enabled
    ok = ActInstr(src=AP(memory=SBUF, elem_bytes=2, dims=((1, 4),)), src_dtype=2,
                  dst=AP(memory=SBUF, offset=64, elem_bytes=4, dims=((1, 4),)), dst_dtype=0)
    assert execute(cfg, ok, m, np.zeros(4, np.uint32)) == E_OK          # fp32 always


def test_per_partition_scale_bias_and_sr(seed):
    """scale from a BF16 SBUF AP and bias from an FP32 PSUM AP, one value per partition; SR
    with the given random words."""
    rng = np.random.default_rng(seed)
    m = mems(rng)
    n = 10
    x = rng.uniform(-2, 2, (P, n)).astype(np.float32)
    m[SBUF][:, 0:4 * n] = x.view(np.uint8).reshape(P, 4 * n)
    sc = rng.uniform(0.5, 2, P).astype(md.bfloat16)
    m[SBUF][:, 100:102] = sc.view(np.uint8).reshape(P, 2)
    bi = rng.uniform(-1, 1, P).astype(np.float32)
    m[PSUM][:, 8:12] = bi.view(np.uint8).reshape(P, 4)
    rand = rng.integers(0, 1 << 32, (P, n), dtype=np.uint32)
    ins = ActInstr(func=FUNCTION_IDS["silu"], src=AP(memory=SBUF, num_partitions=P,
                                                     dims=((1, n),)), src_dtype=0,
                   dst=AP(memory=SBUF, num_partitions=P, offset=512, elem_bytes=2,
                          dims=((1, n),)), dst_dtype=2,
                   scale_ap=AP(memory=SBUF, num_partitions=P, offset=100, elem_bytes=2),
                   scale_dtype=2, bias_ap=AP(memory=PSUM, num_partitions=P, offset=8),
                   bias_dtype=0, sr=True)
    assert execute(CFG, ins, m, np.zeros(P, np.uint32), rand=rand) == E_OK
    scb = np.repeat(f32b(sc.astype(np.float32))[:, None], n, axis=1)
    bib = np.repeat(f32b(bi)[:, None], n, axis=1)
    y = activation(x.view(np.uint32), "silu", scb, bib)
    # SR to BF16 from the spec (docs/number-formats.md §3; finite normal values here): the 16
    # discarded bits, left-aligned in 32, plus R carry into the kept magnitude
    up = ((y.astype(np.uint64) & 0xFFFF) << 16) + rand >= (1 << 32)
    want = ((y >> 16) + up).astype(np.uint16)
    got = m[SBUF][:, 512:512 + 2 * n].copy().view(np.uint16)
    assert (got == want).all(), seed
    with pytest.raises(ValueError, match="'rand' must be"):
        execute(CFG, ins, m, np.zeros(P, np.uint32))
    bad = ActInstr(**{**ins.__dict__, "scale_ap": AP(memory=SBUF, num_partitions=P,
                                                     offset=100, elem_bytes=2,
                                                     dims=((1, 2),))})
    assert execute(CFG, bad, m, np.zeros(P, np.uint32), rand=rand) == E_SHAPE


def test_only_the_loaded_function_runs(seed):
    rng = np.random.default_rng(seed)
    m = mems(rng)
    before = {k: v.copy() for k, v in m.items()}
    ins = ActInstr(func=FUNCTION_IDS["exp"], src=AP(memory=SBUF, dims=((1, 4),)),
                   dst=AP(memory=SBUF, offset=512, dims=((1, 4),)))
    assert execute(CFG, ins, m, np.zeros(P, np.uint32), loaded="tanh") == E_OPCODE
    assert all((m[k] == before[k]).all() for k in m)
    assert execute(CFG, ins, m, np.zeros(P, np.uint32), loaded="exp") == E_OK
    copy = ActInstr(opcode=OP_COPY, src=ins.src, dst=ins.dst)
    assert execute(CFG, copy, m, np.zeros(P, np.uint32), loaded="tanh") == E_OK
