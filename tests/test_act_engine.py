# SPDX-License-Identifier: Apache-2.0
"""The Scalar engine (rtl/scalar/engine.py) in amaranth.sim on an SBUF and a PSUM unit, against
golden.activation.execute (the engine's contract): programs of good and bad instructions, the
SBUF contents, the statuses and the accumulators compared bit for bit. Small preset; one rig
for the module (its simulator takes a while to build)."""

import ml_dtypes as md
import numpy as np
import pytest

from golden.activation import (E_FORMAT, E_OPCODE, E_SHAPE, FUNCTION_IDS, FUNCTIONS, NCOEF,
                               OP_ACT_TABLE_LOAD, OP_COPY, OP_TENSOR_SCALAR, REDUCE_IDLE, REDUCE_REDUCE, REDUCE_RESET,
                               REDUCE_RESET_REDUCE, TABLE_HEADER_WORDS, ActInstr, execute,
                               sr_words, table, table_image, table_load, table_words)
from golden.ap import AP, PSUM, SBUF
from rtl.config import ACT_BINADES, get_preset
from tb.amsim import SimBench
from tb.scalar.rig import EngineRig, run_program

CFG = get_preset("small")
P = CFG.partitions


@pytest.fixture(scope="module")
def rig():
    r = EngineRig(CFG)
    return r, SimBench(r)


def f32b(v):
    return int(np.float32(v).view(np.uint32))


def golden_program(instrs, sb, name, rand=None):
    """Statuses, memories and accumulators of ``instrs`` by golden.activation (table loads
    change the loaded function: ``""`` after a bad image)."""
    # PSUM starts as zeros in the simulation; only the engine writes it
    mems = {SBUF: sb.copy(), PSUM: np.zeros((P, CFG.psum_bytes_per_partition), np.uint8)}
    acc_g = np.zeros(P, np.uint32)
    want, loaded = [], name
    for ins in instrs:
        if ins.opcode == OP_ACT_TABLE_LOAD:
            st, img = table_load(CFG, ins, mems)
            if img is not None:
                loaded = FUNCTIONS[ins.func] if st == 0 else ""
        else:
            st = execute(CFG, ins, mems, acc_g, loaded=loaded)
        want.append(st)
    return want, mems, acc_g


def check(rig, name, instrs, sb, **kw):
    r, bench = rig
    img = table_image(table(name), CFG) if name else None
    st, sb_out, acc = run_program(bench, r, img, instrs, sb, **kw)
    want, mems, acc_g = golden_program(instrs, sb, name or "")
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


def test_engine_tf32_and_tiny_odd(rig, seed):
    """TF32 elements (4 bytes, random bits above the 19-bit code: read as the code) as source,
    per-partition scale and destination; silu of tiny FP32 inputs (x/2 a BF16 midpoint or an
    FP32 one: the tiny segment's round-to-odd) to BF16."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    tiny = rng.integers(0, 1 << 25, (P, 12), dtype=np.uint32)
    tiny[:, :4] = [0x00010000, 0x00030000, 0x00000001, 0x00800003]
    tiny |= rng.integers(0, 2, (P, 12), dtype=np.uint32) << np.uint32(31)
    sb[:, 800:848] = tiny.view(np.uint8).reshape(P, 48)
    silu = FUNCTION_IDS["silu"]
    src = AP(memory=SBUF, num_partitions=P, dims=((1, 10),))
    ins = [ActInstr(opcode=OP_COPY, src=src, src_dtype=1,
                    dst=AP(memory=SBUF, num_partitions=P, offset=1024, dims=((1, 10),))),
           ActInstr(func=silu, src=src, src_dtype=1, dst_dtype=1,
                    dst=AP(memory=SBUF, num_partitions=P, offset=1536, dims=((1, 10),)),
                    scale_ap=AP(memory=SBUF, num_partitions=P, offset=400, dims=((1, 1),)),
                    scale_dtype=1, reduce_cmd=REDUCE_RESET_REDUCE),
           ActInstr(func=silu, src=AP(memory=SBUF, num_partitions=P, offset=800,
                                      dims=((1, 12),)),
                    dst=AP(memory=SBUF, num_partitions=P, offset=2048, elem_bytes=2,
                           dims=((1, 12),)), dst_dtype=2)]
    assert check(rig, "silu", ins, sb) == [0, 0, 0]


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


def test_engine_per_partition_scale_bias(rig, seed):
    """scale from a BF16 SBUF AP, bias from an FP32 PSUM AP (written there by a COPY first), on
    a partial partition range, streamed behind other instructions; an FP32 SBUF scale with an
    immediate bias; then the AP errors in the engine's read order (scale before src) and a
    scale AP of two elements (E_SHAPE); a PSUM bias, then an SBUF one with other values (the
    two instruction contexts alternate: each holds per-partition bias once, so reading the
    other context's registers shows)."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    sb[:, 0:96] = rng.uniform(-4, 4, (P, 24)).astype(np.float32).view(np.uint8)
    sb[:, 200:204] = rng.uniform(-3, 3, (P, 1)).astype(np.float32).view(np.uint8)
    sb[:, 204:206] = rng.uniform(0.25, 3, (P, 1)).astype(md.bfloat16).view(np.uint8)
    sb[:, 208:212] = rng.uniform(0.5, 2, (P, 1)).astype(np.float32).view(np.uint8)
    tanh = FUNCTION_IDS["tanh"]
    half = P // 2
    bias_ps = AP(memory=PSUM, start_partition=half, num_partitions=half, offset=12)
    ins = [
        ActInstr(opcode=OP_COPY, src=AP(memory=SBUF, num_partitions=P, offset=200,
                                        dims=((1, 1),)),
                 dst=AP(memory=PSUM, num_partitions=P, offset=12, dims=((1, 1),))),
        ActInstr(func=tanh, src=AP(memory=SBUF, start_partition=half, num_partitions=half,
                                   dims=((1, 24),)),
                 dst=AP(memory=SBUF, start_partition=half, num_partitions=half, offset=1200,
                        elem_bytes=2, dims=((-1, 24),)), dst_dtype=2,
                 scale_ap=AP(memory=SBUF, start_partition=half, num_partitions=half,
                             offset=204, elem_bytes=2), scale_dtype=2,
                 bias_ap=bias_ps, reduce_cmd=REDUCE_RESET_REDUCE),
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, dims=((2, 12),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=1400, dims=((1, 12),)),
                 scale_ap=AP(memory=SBUF, num_partitions=P, offset=208), bias=f32b(0.125),
                 reduce_cmd=REDUCE_REDUCE),
        # bad scale AP (range) and bad src (range): the scale's code (it is read first)
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, offset=4088, dims=((1, 4),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=1500, dims=((1, 4),)),
                 scale_ap=AP(memory=SBUF, num_partitions=P, offset=4096 - 2, elem_bytes=2),
                 scale_dtype=2, reduce_cmd=REDUCE_RESET),
        # good scale, bad bias (align), good src: the bias's code, nothing written
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, dims=((1, 4),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=1500, dims=((1, 4),)),
                 scale_ap=AP(memory=SBUF, num_partitions=P, offset=208),
                 bias_ap=AP(memory=SBUF, num_partitions=P, offset=202), reduce_cmd=REDUCE_RESET),
        # good scale and src, bad dst: the elements read are dropped
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, dims=((1, 4),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=4088, dims=((1, 4),)),
                 scale_ap=AP(memory=SBUF, num_partitions=P, offset=208),
                 reduce_cmd=REDUCE_RESET),
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, dims=((1, 4),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=1500, dims=((1, 4),)),
                 scale_ap=AP(memory=SBUF, num_partitions=P, offset=208, dims=((1, 2),))),
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, offset=8, dims=((1, 6),)),
                 dst=AP(memory=PSUM, num_partitions=P, offset=64, dims=((1, 6),)),
                 bias_ap=AP(memory=PSUM, num_partitions=P, offset=12), reduce_cmd=REDUCE_REDUCE),
        ActInstr(func=tanh, src=AP(memory=SBUF, num_partitions=P, offset=16, dims=((1, 6),)),
                 dst=AP(memory=SBUF, num_partitions=P, offset=1600, dims=((1, 6),)),
                 bias_ap=AP(memory=SBUF, num_partitions=P, offset=208)),
    ]
    st = check(rig, "tanh", ins, sb)
    assert st == [0, 0, 0, 0x04, 0x0E, 0x04, E_SHAPE, 0, 0], st


def test_engine_table_load(rig, seed):
    """ACT_TABLE_LOAD from SBUF (no ``tw`` load at all): exp from partition 1 with a negative
    step, run; a bad image (another id) -> E_FORMAT and ACTIVATION -> E_OPCODE after it; a
    partial segment -> E_FORMAT; static errors; log from two partitions; word counts no image
    has (over every image through the partition count; over 2^k, its low bits an image's size;
    no segment) -> E_FORMAT at once, log still loaded and run; the largest image accepted; then
    log loaded from one and run, COPY in between."""
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    sb[:, 0:64] = rng.uniform(-3, 3, (P, 16)).astype(np.float32).view(np.uint8)
    we = table_words(table("exp"), CFG)
    wl = table_words(table("log"), CFG)
    ne, nl = len(we), len(wl)
    sb[1, 1024:1024 + 4 * ne] = np.ascontiguousarray(we[::-1]).view(np.uint8)
    sb[3, 2048:2048 + 4 * nl] = wl.view(np.uint8)
    # log again, its words spread over partitions 2 and 3 (word k: element k // 2 of
    # partition 2 + k % 2), padded with a zero segment to whole columns
    w2 = np.zeros(2 * -(-(nl + 9) // 2), np.uint32)
    w2[:nl] = wl
    while (len(w2) - 138) % 9:
        w2 = np.concatenate([w2, np.zeros(2, np.uint32)])
    c2 = len(w2) // 2
    sb[2:4, 3200:3200 + 4 * c2] = np.ascontiguousarray(w2.reshape(c2, 2).T).view(np.uint8)
    exp_id, log_id = FUNCTION_IDS["exp"], FUNCTION_IDS["log"]
    ld_exp = ActInstr(opcode=OP_ACT_TABLE_LOAD, func=exp_id,
                      src=AP(memory=SBUF, start_partition=1, offset=1024 + 4 * (ne - 1),
                             dims=((-1, ne),)))
    ld_log = ActInstr(opcode=OP_ACT_TABLE_LOAD, func=log_id,
                      src=AP(memory=SBUF, start_partition=3, offset=2048, dims=((1, nl),)))
    src = AP(memory=SBUF, num_partitions=P, dims=((1, 16),))
    dst = AP(memory=SBUF, num_partitions=P, offset=3000, elem_bytes=2, dims=((1, 16),))
    run = [ActInstr(func=f, src=src, dst=dst, dst_dtype=2, reduce_cmd=REDUCE_RESET_REDUCE)
           for f in (exp_id, log_id)]
    head = TABLE_HEADER_WORDS + 2 * ACT_BINADES         # an image without a segment
    top = head + (NCOEF + 2) * CFG.act_segments
    sizes = [ActInstr(**{**ld_log.__dict__, "src": a}) for a in (
        AP(memory=SBUF, start_partition=2, num_partitions=2, offset=2048, dims=((1, nl),)),
        AP(memory=SBUF, start_partition=3, offset=2048, dims=((0, (1 << top.bit_length()) + nl),)),
        AP(memory=SBUF, start_partition=3, offset=2048, dims=((1, head),)))]
    # the largest image: one word, log's id, read ``top`` times (a garbage table under log's
    # id: accepted, then replaced by a good load before log runs again)
    sb[0, 3900:3904] = np.array([log_id], np.uint32).view(np.uint8)
    largest = ActInstr(**{**ld_log.__dict__, "src": AP(memory=SBUF, offset=3900,
                                                        dims=((0, top),))})
    ins = [run[0], ld_exp, run[0],
           ActInstr(**{**ld_log.__dict__, "func": exp_id}), run[0],
           ActInstr(**{**ld_log.__dict__, "src": AP(memory=SBUF, start_partition=3,
                                                    offset=2048, dims=((1, nl - 4),))}),
           ActInstr(**{**ld_log.__dict__, "src_dtype": 2}),
           ActInstr(**{**ld_log.__dict__, "src": AP(memory=SBUF, start_partition=2,
                                                    num_partitions=2, offset=3200,
                                                    dims=((1, c2),))}),
           *sizes, run[1], largest, ld_log,
           ActInstr(opcode=OP_COPY, src=src,
                    dst=AP(memory=SBUF, num_partitions=P, offset=3100, dims=((1, 16),))),
           run[1]]
    st = check(rig, None, ins, sb)
    assert st == [E_OPCODE, 0, 0, E_FORMAT, E_OPCODE, E_FORMAT, E_FORMAT, 0,
                  E_FORMAT, E_FORMAT, E_FORMAT, 0, 0, 0, 0, 0], st


def test_engine_sr_steps_the_prng_only_when_converting(rig, seed):
    """Stochastic rounding into FP32 writes the value unchanged and does not step the lanes'
    PRNG (docs/number-formats.md: one step per element converted): an SR activation into BF16
    after one into FP32 rounds with the generator's first words. The whole-core 10^5-instruction
    run found the engine stepping it for FP32 destinations too."""
    from golden.prng import XorWowLanes
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8)
    sb[:, 0:96] = rng.uniform(-3, 3, (P, 24)).astype(np.float32).view(np.uint8)
    tanh = FUNCTION_IDS["tanh"]
    src = AP(memory=SBUF, num_partitions=P, dims=((1, 24),))
    ins = [ActInstr(func=tanh, src=src, sr=True,
                    dst=AP(memory=SBUF, num_partitions=P, offset=1200, dims=((1, 24),))),
           ActInstr(func=tanh, src=src, sr=True, dst_dtype=2,
                    dst=AP(memory=SBUF, num_partitions=P, offset=1400, elem_bytes=2,
                           dims=((1, 24),)))]
    r, bench = rig
    st, sb_out, _ = run_program(bench, r, table_image(table("tanh"), CFG), ins, sb)
    prng = XorWowLanes(CFG.sr_seed, P)
    mems = {SBUF: sb.copy(), PSUM: np.zeros((P, CFG.psum_bytes_per_partition), np.uint8)}
    acc = np.zeros(P, np.uint32)
    for a in ins:
        assert execute(CFG, a, mems, acc, rand=sr_words(a, prng), loaded="tanh") == 0
    assert st == [0, 0], st
    bad = np.argwhere(mems[SBUF] != sb_out)
    assert not len(bad), f"seed={seed}: {len(bad)} SBUF bytes differ, first {bad[:4]}"
