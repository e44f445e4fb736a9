# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine (rtl/scalar/engine.py) in amaranth.sim on an SBUF and a PSUM unit, against
golden.activation.execute (the engine's contract): programs of good and bad instructions, the
SBUF contents, the statuses and the accumulators compared bit for bit. Small preset; one rig
for the module (its simulator takes a while to build)."""

import numpy as np
import pytest

from golden.activation import (E_FORMAT, E_OPCODE, E_SHAPE, FUNCTION_IDS, OP_COPY,
                               OP_TENSOR_SCALAR, REDUCE_IDLE, REDUCE_REDUCE, REDUCE_RESET,
                               REDUCE_RESET_REDUCE, ActInstr, execute, table, table_image)
from golden.ap import AP, PSUM, SBUF
from rtl.config import get_preset
from tb.amsim import SimBench
from tb.scalar.engine_sim import EngineRig, run_program

CFG = get_preset("small")
P = CFG.partitions


@pytest.fixture(scope="module")
def rig():
    r = EngineRig(CFG)
    return r, SimBench(r)


def f32b(v):
    return int(np.float32(v).view(np.uint32))


def check(rig, name, instrs, sb, **kw):
    r, bench = rig
    st, sb_out, acc = run_program(bench, r, table_image(table(name), CFG), instrs, sb, **kw)
    # PSUM starts as zeros in the simulation; only the engine writes it
    mems = {SBUF: sb.copy(), PSUM: np.zeros((P, CFG.psum_bytes_per_partition), np.uint8)}
    acc_g = np.zeros(P, np.uint32)
    want = [execute(CFG, ins, mems, acc_g, loaded=name) for ins in instrs]
    assert st == want, (st, want)
    bad = np.argwhere(mems[SBUF] != sb_out)
    assert not len(bad), bad[:8]
    assert (acc == acc_g).all(), (acc, acc_g)
    return want


def test_engine_program(rig, seed):
    """ACTIVATION fp32 -> bf16 on partitions 2..3 with a negative-step destination and
    reset_reduce; COPY fp8 -> fp32 with a 2-D source and reduce; every static error; an AP
    error on the source and one on the destination (after the source was accepted: the elements
    read are discarded); then good instructions again."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    sb[:, 0:64] = rng.uniform(-6, 6, (P, 16)).astype(np.float32).view(np.uint8)
    silu = FUNCTION_IDS["silu"]
    a1 = ActInstr(func=silu, src=AP(memory=SBUF, start_partition=2, num_partitions=2,
                                    dims=((1, 12),)),
                  dst=AP(memory=SBUF, start_partition=2, num_partitions=2, offset=1022,
                         elem_bytes=2, dims=((-1, 12),)), dst_dtype=2,
                  scale=f32b(1.25), bias=f32b(-0.5), reduce_cmd=REDUCE_RESET_REDUCE)
    c1 = ActInstr(opcode=OP_COPY, src=AP(memory=SBUF, num_partitions=P, offset=300,
                                         elem_bytes=1, dims=((3, 4), (13, 2))), src_dtype=5,
                  dst=AP(memory=SBUF, num_partitions=P, offset=2048, dims=((1, 8),)),
                  scale=f32b(0.75), reduce_cmd=REDUCE_REDUCE)
    good_src = AP(memory=SBUF, num_partitions=P, dims=((1, 8),))
    good_dst = AP(memory=SBUF, num_partitions=P, offset=1536, dims=((1, 8),))
    bads = [
        ActInstr(opcode=OP_TENSOR_SCALAR, src=good_src, dst=good_dst),
        ActInstr(func=17, src=good_src, dst=good_dst, reduce_cmd=REDUCE_RESET),
        ActInstr(func=FUNCTION_IDS["tanh"], src=good_src, dst=good_dst),     # not loaded
        ActInstr(func=silu, src=good_src, dst=good_dst, src_dtype=2),
        ActInstr(func=silu, src=good_src, dst=AP(memory=SBUF, num_partitions=P, offset=1536,
                                                 dims=((1, 9),))),
        ActInstr(func=silu, src=AP(memory=SBUF, num_partitions=P, offset=4072,
                                   dims=((1, 8),)), dst=good_dst),
        ActInstr(func=silu, src=good_src, dst=AP(memory=SBUF, num_partitions=P, offset=1536,
                                                 dims=((1, 4), (1000, 2))),
                 reduce_cmd=REDUCE_RESET),
    ]
    a2 = ActInstr(func=silu, src=good_src, dst=good_dst, reduce_cmd=REDUCE_REDUCE)
    a3 = ActInstr(func=silu, src=good_src, dst=AP(memory=SBUF, num_partitions=P, offset=3000,
                                                  elem_bytes=1, dims=((1, 8),)), dst_dtype=4,
                  reduce_cmd=REDUCE_IDLE)
    st = check(rig, "silu", [a1, c1, *bads, a2, a3], sb)
    assert st[2:9] == [E_OPCODE, E_OPCODE, E_OPCODE, E_FORMAT, E_SHAPE, 0x04, 0x04], st


def test_engine_log_via_psum(rig, seed):
    """log (neg_nan, log_add, mantissa split) over random bit patterns: SBUF -> PSUM by COPY,
    PSUM -> SBUF by ACTIVATION (the PSUM reader and writer, no backdoor), then SBUF -> SBUF with
    a bias and a reset."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    src = AP(memory=SBUF, num_partitions=P, offset=64, dims=((2, 6), (1, 2)))
    ps = AP(memory=PSUM, num_partitions=P, offset=CFG.psum_bank_bytes + 16, dims=((1, 12),))
    dst = AP(memory=SBUF, num_partitions=P, offset=700, dims=((1, 12),))
    log = FUNCTION_IDS["log"]
    ins = [ActInstr(opcode=OP_COPY, src=src, dst=ps),
           ActInstr(func=log, src=ps, dst=dst, reduce_cmd=REDUCE_RESET_REDUCE),
           ActInstr(func=log, src=dst, dst=src, bias=f32b(3.0), reduce_cmd=REDUCE_RESET)]
    assert check(rig, "log", ins, sb) == [0, 0, 0]


def test_engine_under_contention(rig, seed):
    """SBUF bank cycles stolen by a priority port (reads and writes of the engine stall) and a
    slow ``done`` consumer: same results as without, nothing lost or duplicated."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    sb[:, 0:128] = rng.uniform(-3, 3, (P, 32)).astype(np.float32).view(np.uint8)
    sig = FUNCTION_IDS["sigmoid"]
    ins = [ActInstr(func=sig, src=AP(memory=SBUF, num_partitions=P, dims=((1, 32),)),
                    dst=AP(memory=SBUF, num_partitions=P, offset=2000, elem_bytes=2,
                           dims=((1, 32),)), dst_dtype=2, reduce_cmd=REDUCE_RESET_REDUCE),
           ActInstr(func=sig, src=AP(memory=SBUF, num_partitions=P, dims=((1, 4),)),
                    dst=AP(memory=PSUM, num_partitions=P, offset=CFG.psum_bank_bytes - 8,
                           dims=((1, 4),))),
           ActInstr(opcode=OP_COPY, src=AP(memory=SBUF, num_partitions=P, offset=2000,
                                           elem_bytes=2, dims=((-1, 32),)), src_dtype=2,
                    dst=AP(memory=SBUF, num_partitions=P, offset=3000, dims=((1, 32),)),
                    reduce_cmd=REDUCE_REDUCE)]
    st = check(rig, "sigmoid", ins, sb, rng=rng, p_hog=0.4, p_done=0.5)
    assert st == [0, 0x04, 0], st
