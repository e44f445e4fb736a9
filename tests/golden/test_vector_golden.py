# SPDX-License-Identifier: Apache-2.0
"""golden/vector.py against independent references: exact fractions rounded to FP32 by hand
(arithmetic), Python float comparisons (compare/max/min), a scalar loop over the byte memory
(instruction semantics), and the check order of every error status."""

from __future__ import annotations

import dataclasses
import math
import struct
from fractions import Fraction

import numpy as np
import pytest

import golden.vector as gv
from golden.ap import AP, E_AP_FORM, E_AP_PART, E_AP_RANGE, PSUM, SBUF
from golden.formats import FP32_QNAN
from golden.prng import XorWowLanes
from rtl.config import get_preset

SMALL = get_preset("small")


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", int(bits)))[0]


def bits_of(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def rne_fp32(q: Fraction):
    """FP32 bits of the exact rational ``q`` rounded to nearest even (subnormals, overflow)."""
    if q == 0:
        return 0
    s = 0x80000000 if q < 0 else 0
    a = abs(q)
    e = max(math.floor(math.log2(a.numerator) - math.log2(a.denominator)) - 1, -200)
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    while Fraction(2) ** e > a:
        e -= 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 23)
    k = a / ulp
    n = math.floor(k)
    r = k - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    v = n * ulp
    if v >= Fraction(2) ** 128 - Fraction(2) ** 103:
        return s | 0x7F800000
    return s | bits_of(float(v))


def random_bits(rng, n):
    """FP32 patterns mixing random bits with specials, subnormals and near-equal pairs."""
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001,
                        0x807FFFFF, 0x7F7FFFFF, 0x3F800000, 0xBF800000], np.uint32)
    pick = rng.random(n) < 0.2
    b[pick] = rng.choice(special, pick.sum())
    small = rng.random(n) < 0.2
    b[small] = (b[small] & 0x807FFFFF) | (rng.integers(100, 150, small.sum()) << 23).astype(
        np.uint32)
    return b


def test_arithmetic_against_fractions(seed):
    rng = np.random.default_rng([seed, 1])
    x, y = random_bits(rng, 1500), random_bits(rng, 1500)
    y[:300] = x[:300] ^ rng.integers(0, 4, 300).astype(np.uint32)   # near-cancellation
    for op, fn in ((gv.ALU_ADD, lambda a, b: a + b), (gv.ALU_SUB, lambda a, b: a - b),
                   (gv.ALU_MUL, lambda a, b: a * b)):
        got = gv.alu(op, x, y, 0)
        for i in range(len(x)):
            a, b = f32(x[i]), f32(y[i])
            if not (math.isfinite(a) and math.isfinite(b)):
                with np.errstate(all="ignore"):
                    r = {gv.ALU_ADD: np.float32(a) + np.float32(b),
                         gv.ALU_SUB: np.float32(a) - np.float32(b),
                         gv.ALU_MUL: np.float32(a) * np.float32(b)}[op]
                want = FP32_QNAN if np.isnan(r) else bits_of(float(r))
            else:
                q = fn(Fraction(a), Fraction(b))
                want = rne_fp32(q)
                if q == 0:      # IEEE zero signs
                    if op == gv.ALU_MUL:
                        want = (x[i] ^ y[i]) & 0x80000000
                    else:
                        sa = x[i] >> 31
                        sb = (y[i] >> 31) ^ (op == gv.ALU_SUB)
                        want = 0x80000000 if (sa and sb and a == 0) else 0
            assert int(got[i]) == want, (f"seed {seed} {gv.ALU_NAMES[op]}({x[i]:#x}, "
                                         f"{y[i]:#x}) = {int(got[i]):#x}, want {want:#x}")


def test_compare_minmax_bitwise_select_against_python(seed):
    rng = np.random.default_rng([seed, 2])
    x, y = random_bits(rng, 600), random_bits(rng, 600)
    c = random_bits(rng, 600)
    y[:100] = x[:100]
    y[100:120] = x[100:120] ^ 0x80000000
    cmp = {gv.ALU_EQ: lambda a, b: a == b, gv.ALU_NE: lambda a, b: a != b,
           gv.ALU_LT: lambda a, b: a < b, gv.ALU_LE: lambda a, b: a <= b,
           gv.ALU_GT: lambda a, b: a > b, gv.ALU_GE: lambda a, b: a >= b}
    for op, fn in cmp.items():
        got = gv.alu(op, x, y, 0)
        want = [0x3F800000 if fn(f32(a), f32(b)) else 0 for a, b in zip(x, y)]
        assert got.tolist() == want, gv.ALU_NAMES[op]
    for op in (gv.ALU_MAX, gv.ALU_MIN):
        got = gv.alu(op, x, y, 0)
        for a, b, g in zip(x, y, got):
            fa, fb = f32(a), f32(b)
            if math.isnan(fa) or math.isnan(fb):
                w = FP32_QNAN
            elif fa == fb:      # -0 < +0
                w = (min if op == gv.ALU_MAX else max)(a, b) if fa == 0 else a
                if fa == 0:
                    w = int(a) & int(b) if op == gv.ALU_MAX else int(a) | int(b)
            else:
                w = a if (fa > fb) == (op == gv.ALU_MAX) else b
            assert int(g) == int(w), f"{gv.ALU_NAMES[op]}({a:#x}, {b:#x})"
    assert (gv.alu(gv.ALU_AND, x, y, 0) == (x & y)).all()
    assert (gv.alu(gv.ALU_OR, x, y, 0) == (x | y)).all()
    assert (gv.alu(gv.ALU_XOR, x, y, 0) == (x ^ y)).all()
    sel = gv.alu(gv.ALU_SEL, x, y, c)
    assert sel.tolist() == [int(b) if (a & 0x7FFFFFFF) else int(cc) for a, b, cc in zip(x, y, c)]
    assert (gv.alu(gv.ALU_BYPASS, x, y, c) == x).all()


def test_reduce_order_is_interleaved_then_left_to_right(seed):
    """The documented order, written as a plain loop over Python floats rounded through
    numpy float32 one addition at a time; and max/min equal to the plain extreme."""
    rng = np.random.default_rng([seed, 3])
    K = gv.reduce_ways(SMALL)
    assert K == SMALL.mul_stages + SMALL.add_stages + 1
    for n in (1, 2, K - 1, K, K + 1, 37):
        x = (rng.standard_normal((n, 3)) * np.array([1, 1e6, 1e-3])).astype(np.float32)
        got = gv.reduce_lanes(gv.ALU_ADD, x.view(np.uint32), K)
        for lane in range(3):
            parts = [np.float32(-0.0)] * K
            for i in range(n):
                parts[i % K] = np.float32(parts[i % K] + x[i, lane])
            r = parts[0]
            for j in range(1, K):
                r = np.float32(r + parts[j])
            assert int(got[lane]) == int(np.float32(r).view(np.uint32)), (seed, n, lane)
        assert (gv.reduce_lanes(gv.ALU_MAX, x.view(np.uint32), K).view(np.float32)
                == x.max(axis=0)).all()
        assert (gv.reduce_lanes(gv.ALU_MIN, x.view(np.uint32), K).view(np.float32)
                == x.min(axis=0)).all()
    # the order matters: a sum that a sequential fold would get differently
    x = np.array([[1.0], [2.0 ** 24], [1.0], [-(2.0 ** 24)]], np.float32)
    assert gv.reduce_lanes(gv.ALU_ADD, x.view(np.uint32), 4).view(np.float32)[0] in (0.0, 2.0)


def _ap(mem, start, count, offset, dims):
    return AP(memory=mem, start_partition=start, num_partitions=count, offset=offset,
              elem_bytes=4, dims=dims)


def test_run_against_scalar_loop(seed):
    """tensor_tensor / tensor_scalar / copy with cast over SBUF and PSUM: every written byte
    equals a per-element Python loop using numpy float32 scalars and golden.formats codes."""
    from golden.formats import convert_rne, decode
    rng = np.random.default_rng([seed, 4])
    cfg = SMALL
    mem = gv.VecMemory(cfg, sbuf=rng.integers(0, 256, (cfg.partitions,
                                                        cfg.sbuf_bytes_per_partition)),
                       psum=rng.integers(0, 256, (cfg.partitions, cfg.psum_bytes_per_partition)))
    # keep PSUM FP32 values finite-ish: clear the top exponent bit region of every word
    mem.psum[:, 3::4] &= 0x3F
    bf16 = gv.DTYPE_CODES["bf16"]
    ins = gv.VecInstr(opcode=gv.OP_TENSOR_SCALAR, src0=_ap(PSUM, 0, 4, 0, ((1, 8), (8, 2))),
                      src1=_ap(SBUF, 0, 4, 256, ((0, 8), (0, 2))),
                      dst=_ap(SBUF, 0, 4, 1024, ((-1, 8), (8, 2))), dst_dtype=bf16,
                      src0_dtype=0, src1_dtype=bf16, op0=gv.ALU_MUL, sel0=1,
                      op1=gv.ALU_ADD, imm1=bits_of(0.25))
    ins = gv.VecInstr(**{**ins.__dict__, "dst": AP(memory=SBUF, start_partition=0,
                                                   num_partitions=4, offset=1040, elem_bytes=2,
                                                   dims=((-1, 8), (8, 2)))})
    before = gv.VecMemory(cfg, sbuf=mem.sbuf, psum=mem.psum)
    assert gv.run(cfg, ins, mem) == 0
    fb = cfg.fmt("bf16")
    for p in range(4):
        s = int.from_bytes(before.sbuf[p, 256:258].tobytes(), "little")
        sv = decode(np.array([s], np.uint16), fb)[0]
        for j in range(2):
            for i in range(8):
                a = before.psum[p, 4 * (i + 8 * j):4 * (i + 8 * j) + 4].view(np.float32)[0]
                with np.errstate(all="ignore"):
                    r = np.float32(np.float32(a * sv) + np.float32(0.25))
                want = int(convert_rne(np.array([r], np.float32), fb)[0])
                addr = 1040 + 2 * (-i + 8 * j)
                got = int.from_bytes(mem.sbuf[p, addr:addr + 2].tobytes(), "little")
                if np.isnan(r):
                    assert got & 0x7FFF == 0x7FC0
                else:
                    assert got == want, (seed, p, i, j)
    changed = np.argwhere(mem.sbuf != before.sbuf)
    assert set(changed[:, 1].tolist()) <= set(range(1026, 1058))
    assert (mem.psum == before.psum).all()


def test_memset_reduce_select_and_sr(seed):
    rng = np.random.default_rng([seed, 5])
    cfg = SMALL
    mem = gv.VecMemory(cfg)
    fp16 = gv.DTYPE_CODES["fp16"]
    ms = gv.VecInstr(opcode=gv.OP_MEMSET, imm0=bits_of(1.0 / 3),
                     dst=AP(memory=SBUF, start_partition=2, num_partitions=2, offset=64,
                            elem_bytes=2, dims=((2, 5),)), dst_dtype=fp16)
    assert gv.run(cfg, ms, mem) == 0
    code = int(np.float16(1.0 / 3).view(np.uint16))
    for p in range(4):
        vals = [int.from_bytes(mem.sbuf[p, 64 + 4 * i:66 + 4 * i].tobytes(), "little")
                for i in range(5)]
        assert vals == ([code] * 5 if p >= 2 else [0] * 5)
    # reduce: values written as FP32, summed by the documented order
    x = rng.standard_normal((20, 4)).astype(np.float32)
    mem.sbuf[:, 512:512 + 80] = x.T.copy().view(np.uint8).reshape(4, 80)
    red = gv.VecInstr(opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_ADD,
                      src0=_ap(SBUF, 0, 4, 512, ((1, 20),)), dst=_ap(PSUM, 0, 4, 8, ((1, 1),)))
    assert gv.run(cfg, red, mem) == 0
    want = gv.reduce_lanes(gv.ALU_ADD, x.view(np.uint32), gv.reduce_ways(cfg))
    assert mem.psum[:, 8:12].copy().view(np.uint32).ravel().tolist() == want.tolist()
    assert abs(float(want.view(np.float32)[0]) - float(x[:, 0].astype(np.float64).sum())) < 1e-4
    # select: src0 nonzero -> src1 else imm0
    pred = np.where(rng.random((20, 4)) < 0.5, 0.0, 1.0).astype(np.float32)
    pred[0, 0] = -0.0
    mem.sbuf[:, 1024:1104] = pred.T.copy().view(np.uint8).reshape(4, 80)
    sel = gv.VecInstr(opcode=gv.OP_SELECT, imm0=bits_of(-7.0),
                      src0=_ap(SBUF, 0, 4, 1024, ((1, 20),)), src1=_ap(SBUF, 0, 4, 512, ((1, 20),)),
                      dst=_ap(SBUF, 0, 4, 2048, ((1, 20),)))
    assert gv.run(cfg, sel, mem) == 0
    got = mem.sbuf[:, 2048:2128].copy().view(np.float32).reshape(4, 20).T
    assert (got == np.where(pred != 0, x, np.float32(-7.0))).all()
    # SR: one draw per element in every lane, lane = partition
    prng = XorWowLanes(cfg.sr_seed, cfg.partitions)
    ref = XorWowLanes(cfg.sr_seed, cfg.partitions)
    cp = gv.VecInstr(opcode=gv.OP_TENSOR_COPY, sr=1, src0=_ap(SBUF, 0, 4, 512, ((1, 20),)),
                     dst=AP(memory=SBUF, start_partition=0, num_partitions=4, offset=3000,
                            elem_bytes=1, dims=((1, 20),)),
                     dst_dtype=gv.DTYPE_CODES["fp8_e4m3"])
    assert gv.run(cfg, cp, mem, prng) == 0
    from golden.formats import convert_sr_bits
    want = convert_sr_bits(x.view(np.uint32), cfg.fmt("fp8_e4m3"), ref.next_n(20))
    assert (mem.sbuf[:, 3000:3020].T == want).all()
    assert (prng.state == ref.state).all()


def test_error_statuses_and_order():
    cfg = SMALL
    ok_ap = _ap(SBUF, 0, 4, 0, ((1, 4),))
    base = gv.VecInstr(opcode=gv.OP_TENSOR_TENSOR, src0=ok_ap, src1=ok_ap,
                       dst=_ap(SBUF, 0, 4, 64, ((1, 4),)), op0=gv.ALU_ADD)

    def st(**kw):
        return gv.check(cfg, gv.VecInstr(**{**base.__dict__, **kw}))
    assert st() == 0
    assert st(opcode=0x2F) == gv.E_OPCODE and st(opcode=0x10) == gv.E_OPCODE
    assert st(opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_MUL) == gv.E_OPCODE
    assert st(src1_dtype=8) == gv.E_FORMAT and st(dst_dtype=12) == gv.E_FORMAT
    assert st(src1_dtype=8, opcode=0x11) == gv.E_OPCODE
    assert st(src0=_ap(SBUF, 0, 4, 0, ((1, 5),))) == gv.E_SHAPE
    assert st(src0=_ap(SBUF, 0, 2, 0, ((1, 4),))) == gv.E_SHAPE
    assert st(opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_ADD) == gv.E_SHAPE
    assert st(opcode=gv.OP_TENSOR_REDUCE, op1=gv.ALU_ADD,
              dst=_ap(SBUF, 0, 4, 64, ((1, 1),))) == 0
    # unused src1 is not checked
    assert st(opcode=gv.OP_TENSOR_COPY, src1=_ap(0, 0, 4, 0, ((1, 9),)), src1_dtype=15) == 0
    assert st(src0=_ap(0, 0, 4, 0, ((1, 4),))) == E_AP_FORM
    assert st(src1=_ap(SBUF, 0, 4, 4095, ((1, 4),))) != 0
    assert st(dst=_ap(SBUF, 0, 4, cfg.sbuf_bytes_per_partition - 8, ((1, 4),))) == E_AP_RANGE
    assert st(src0=_ap(SBUF, 3, 4, 0, ((1, 4),)), src1=_ap(SBUF, 3, 4, 0, ((1, 4),)),
              dst=_ap(SBUF, 3, 4, 64, ((1, 4),))) == E_AP_PART
    # src0 before src1 before dst
    assert st(src0=_ap(0, 0, 4, 0, ((1, 4),)), dst=_ap(SBUF, 0, 4, 1 << 20, ((1, 4),))) \
        == E_AP_FORM
    mem = gv.VecMemory(cfg)
    mem.sbuf[:] = 7
    before = mem.sbuf.copy()
    assert gv.run(cfg, gv.VecInstr(**{**base.__dict__, "opcode": 0x2F}), mem) == gv.E_OPCODE
    assert (mem.sbuf == before).all()


def test_formats_and_sizes():
    assert gv.vector_formats(SMALL) == tuple(range(8))
    bf = get_preset("bf16_only")
    assert gv.vector_formats(bf) == (0, 2)
    assert [gv.elem_bytes_of(SMALL, d) for d in range(8)] == [4, 4, 2, 2, 1, 1, 1, 1]
    with pytest.raises(TypeError):
        gv.vector_formats("small")


def test_iota_index_and_partition_operands():
    """IOTA: x0 = element index (pattern order), src1 = absolute partition index; here
    dst = i * 0.5 + p on partitions 2..3, written as FP32 with a negative step."""
    cfg = SMALL
    mem = gv.VecMemory(cfg)
    ins = gv.VecInstr(opcode=gv.OP_IOTA, op0=gv.ALU_MUL, imm0=bits_of(0.5), op1=gv.ALU_ADD,
                      sel1=1, dst=AP(memory=SBUF, start_partition=2, num_partitions=2,
                                     offset=400, elem_bytes=4, dims=((-1, 3), (4, 2))))
    assert gv.run(cfg, ins, mem) == 0
    for p in range(4):
        for j in range(2):
            for i in range(3):
                a = 400 + 4 * (-i + 4 * j)
                got = f32(int.from_bytes(mem.sbuf[p, a:a + 4].tobytes(), "little"))
                want = (3 * j + i) * 0.5 + p if p >= 2 else 0.0
                assert got == want, (p, i, j, got, want)


def test_tensor_tensor_scan_against_float32_loop(seed):
    """r_i = (r_{i-1} + a_i) * b_i from imm0, and the reversed max/subtract form, per
    partition, against a loop of numpy float32 scalars."""
    rng = np.random.default_rng([seed, 6])
    cfg = SMALL
    mem = gv.VecMemory(cfg)
    a = rng.standard_normal((12, 4)).astype(np.float32)
    b = (1 + 0.1 * rng.standard_normal((12, 4))).astype(np.float32)
    mem.sbuf[:, 0:48] = a.T.copy().view(np.uint8).reshape(4, 48)
    mem.sbuf[:, 1024:1072] = b.T.copy().view(np.uint8).reshape(4, 48)
    base = dict(opcode=gv.OP_TENSOR_TENSOR_SCAN, src0=_ap(SBUF, 0, 4, 0, ((1, 6), (6, 2))),
                src1=_ap(SBUF, 0, 4, 1024, ((1, 6), (6, 2))),
                dst=_ap(SBUF, 0, 4, 2048, ((1, 6), (6, 2))), imm0=bits_of(0.5))
    assert gv.run(cfg, gv.VecInstr(op0=gv.ALU_ADD, op1=gv.ALU_MUL, **base), mem) == 0
    got = mem.sbuf[:, 2048:2096].copy().view(np.float32).reshape(4, 12).T
    for p in range(4):
        r = np.float32(0.5)
        for i in range(12):
            r = np.float32(np.float32(r + a[i, p]) * b[i, p])
            assert got[i, p] == r, (seed, p, i)
    # rev0: src0_i max r ; rev1: src1_i - t
    assert gv.run(cfg, gv.VecInstr(op0=gv.ALU_MAX, op1=gv.ALU_SUB, rev0=1, rev1=1, **base),
                  mem) == 0
    got = mem.sbuf[:, 2048:2096].copy().view(np.float32).reshape(4, 12).T
    for p in range(4):
        r = np.float32(0.5)
        for i in range(12):
            r = np.float32(b[i, p] - max(a[i, p], r))
            assert got[i, p] == r, (seed, p, i)


def test_max8_values_and_indices(seed):
    """MAX8 against Python's sort of floats (NaN-free data with ties and signed zeros), the
    index form, fewer than 8 elements, and totalOrder for NaN and zeros."""
    rng = np.random.default_rng([seed, 7])
    x = rng.integers(-6, 7, (19, 4)).astype(np.float32) * np.float32(0.5)
    x[3, 0] = -0.0
    bits = x.view(np.uint32)
    vals, idx = gv.top8(bits)
    for p in range(4):
        order = sorted(range(19), key=lambda i: (-float(x[i, p]), i))
        # -0 < +0 in totalOrder: move every -0 after the +0 entries of its tie group
        order = sorted(order, key=lambda i: (-float(x[i, p]), bool(np.signbit(x[i, p])), i))
        assert idx[:, p].tolist() == order[:8], (seed, p)
        assert vals[:, p].tolist() == [int(bits[i, p]) for i in order[:8]]
    v, i = gv.top8(np.array([[0x7FC00000], [0x7F800000], [0xFFC00000], [0x80000000], [0]],
                            np.uint32))
    assert v[:, 0].tolist() == [0x7FC00000, 0x7F800000, 0, 0x80000000, 0xFFC00000] + [
        0xFFFFFFFF] * 3
    assert i[:, 0].tolist() == [0, 1, 4, 3, 2, -1, -1, -1]
    cfg = SMALL
    mem = gv.VecMemory(cfg)
    mem.sbuf[:, 0:76] = x.T.copy().view(np.uint8).reshape(4, 76)
    ins = gv.VecInstr(opcode=gv.OP_MAX8, op1=1, src0=_ap(SBUF, 0, 4, 0, ((1, 19),)),
                      dst=_ap(SBUF, 0, 4, 512, ((1, 8),)))
    assert gv.run(cfg, ins, mem) == 0
    got = mem.sbuf[:, 512:544].copy().view(np.float32).reshape(4, 8).T
    assert (got == idx.astype(np.float32)).all()
    assert gv.check(cfg, gv.VecInstr(**{**ins.__dict__, "op1": 2})) == gv.E_OPCODE
    assert gv.check(cfg, gv.VecInstr(**{**ins.__dict__,
                                        "dst": _ap(SBUF, 0, 4, 512, ((1, 7),))})) == gv.E_SHAPE


def _find_first(data_bits, v):
    """The reference of FIND_INDEX8 for one partition and one value: numpy's flatnonzero of
    the bit-pattern equality (-1 if none)."""
    hits = np.flatnonzero(np.asarray(data_bits, np.uint32) == np.uint32(v))
    return int(hits[0]) if hits.size else -1


def test_find_index8_against_flatnonzero(seed):
    """FIND_INDEX8 over a 2-D pattern with negative steps on partitions 2..3 (the others
    untouched): duplicates (the first in pattern order wins), absent values, NaNs of several
    patterns, -0 and +0 told apart, repeated values; against a hand-walked pattern and
    np.flatnonzero. Then a bf16 source (widened: the values compare with the FP32 of the bf16
    codes, a NaN payload becomes the canonical NaN) into a bf16 destination, a broadcast values
    AP (step 0), and every shape/format status with nothing written."""
    rng = np.random.default_rng([seed, 44])
    cfg = SMALL
    P = cfg.partitions
    mem = gv.VecMemory(cfg)
    specials = np.array([0x80000000, 0, 0x7FC00000, 0xFFC00000, 0x7F800001], np.uint32)
    n0, n1 = 7, 3                                     # 21 elements: 7 x 3, steps -1 and 8
    raw = (rng.integers(-3, 4, (P, 24)).astype(np.float32) * np.float32(0.5)).view(np.uint32)
    raw[:, rng.integers(0, 24, 6)] = rng.choice(specials, (P, 6))
    mem.sbuf[:, 0:96] = raw.view(np.uint8)
    # element (i, j) of the pattern at word 6 - i + 8 * j (pattern order: i fastest)
    order = [6 - i + 8 * j for j in range(n1) for i in range(n0)]
    vals = np.zeros((P, 8), np.uint32)
    for p in range(P):
        pick = raw[p, order][rng.integers(0, len(order), 4)]
        vals[p] = np.concatenate([pick, [0x80000000, 0x7FC00000, 0x40A00000, pick[0]]])
    mem.sbuf[:, 256:288] = vals.view(np.uint8)
    before = mem.sbuf.copy()
    ins = gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=_ap(SBUF, 2, 2, 24, ((-1, n0), (8, n1))),
                      src1=_ap(SBUF, 2, 2, 256, ((1, 8),)), dst=_ap(SBUF, 2, 2, 512, ((1, 8),)))
    assert gv.run(cfg, ins, mem) == 0
    got = mem.sbuf[:, 512:544].copy().view(np.float32)
    for p in range(P):
        if p not in (2, 3):
            assert (mem.sbuf[p] == before[p]).all(), (seed, p)
            continue
        want = [_find_first(raw[p, order], v) for v in vals[p]]
        assert got[p].tolist() == [float(w) for w in want], (seed, p, want)
        assert want[4] == _find_first(raw[p, order], 0x80000000)     # -0 only as -0
        if 0 in raw[p, order] and 0x80000000 not in raw[p, order]:
            assert want[4] == -1
    # bf16 data, FP32 values, bf16 destination (indices < 256: exact; -1 -> 0xBF80)
    bf = gv.DTYPE_CODES["bf16"]
    d = rng.integers(-4, 5, (P, 12)).astype(np.float32)
    d16 = (d.view(np.uint32) >> 16).astype(np.uint16)
    d16[:, 5] = 0x7F81                                 # a NaN with a payload
    d16[:, 9] = 0x8000                                 # -0
    mem.sbuf[:, 1024:1048] = d16.view(np.uint8)
    widened = np.where((d16 & 0x7FFF) > 0x7F80, (d16.astype(np.uint32) & 0x8000) << 16
                       | 0x7FC00000, d16.astype(np.uint32) << 16).astype(np.uint32)
    v2 = np.zeros((P, 8), np.uint32)
    v2[:, :4] = widened[:, [11, 3, 5, 9]]
    v2[:, 4:] = [0x7F810000, 0x3FC00000, 0, 0xC0800000]
    mem.sbuf[:, 1100:1132] = v2.view(np.uint8)
    ins2 = gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=_ap(SBUF, 0, P, 1024, ((1, 12),)),
                       src0_dtype=bf, src1=_ap(SBUF, 0, P, 1100, ((1, 8), (32, 1))),
                       dst=_ap(PSUM, 0, P, 64, ((1, 8),)), dst_dtype=bf)
    assert gv.run(cfg, ins2, mem) == 0
    got = mem.psum[:, 64:80].copy().view(np.uint16)
    for p in range(P):
        want = [_find_first(widened[p], v) for v in v2[p]]
        assert want[2] == 5 and want[4] == -1         # canonical NaN found, payload NaN not
        assert got[p].tolist() == [int(np.float32(w).view(np.uint32)) >> 16 for w in want]
    # a broadcast values AP: one value 8 times
    ins3 = dataclasses.replace(ins2, src1=_ap(SBUF, 0, P, 1100, ((0, 8),)))
    assert gv.run(cfg, ins3, mem) == 0
    got = mem.psum[:, 64:80].copy().view(np.uint16)
    for p in range(P):
        w = _find_first(widened[p], v2[p, 0])
        assert got[p].tolist() == [int(np.float32(w).view(np.uint32)) >> 16] * 8
    # statuses: nothing written
    rep = dataclasses.replace
    bad = [(rep(ins, src1=_ap(SBUF, 2, 2, 256, ((1, 7),))), gv.E_SHAPE),
           (rep(ins, src1=_ap(SBUF, 2, 2, 256, ((1, 8), (8, 2)))), gv.E_SHAPE),
           (rep(ins, src1=_ap(SBUF, 2, 2, 256, ((1, 4), (4, 2)))), gv.E_SHAPE),
           (rep(ins, src1=_ap(SBUF, 0, 2, 256, ((1, 8),))), gv.E_SHAPE),
           (rep(ins, src1=_ap(SBUF, 2, 3, 256, ((1, 8),))), gv.E_SHAPE),
           (rep(ins, dst=_ap(SBUF, 2, 2, 512, ((1, 7),))), gv.E_SHAPE),
           (rep(ins, dst=_ap(SBUF, 2, 2, 512, ((1, 8), (8, 2)))), gv.E_SHAPE),
           (rep(ins, src0=_ap(SBUF, 2, 1, 24, ((-1, n0), (8, n1)))), gv.E_SHAPE),
           (rep(ins, src1_dtype=8), gv.E_FORMAT),
           (rep(ins, src1_dtype=12, src1=_ap(SBUF, 2, 2, 256, ((1, 7),))), gv.E_FORMAT),
           (rep(ins, src1=_ap(SBUF, 2, 2, cfg.sbuf_bytes_per_partition - 16, ((1, 8),))),
            E_AP_RANGE),
           (rep(ins, src1=_ap(0, 2, 2, 256, ((1, 8),))), E_AP_FORM),
           (rep(ins, src0=_ap(SBUF, 3, 2, 24, ((-1, n0), (8, n1))),
                src1=_ap(SBUF, 3, 2, 256, ((1, 8),)), dst=_ap(SBUF, 3, 2, 512, ((1, 8),))),
            E_AP_PART)]
    before = (mem.sbuf.copy(), mem.psum.copy())
    for k, (b, code) in enumerate(bad):
        assert gv.run(cfg, b, mem) == code, (k, b)
        assert (mem.sbuf == before[0]).all() and (mem.psum == before[1]).all(), k
    # op/sel/rev/imm fields are ignored
    odd = rep(ins, op0=gv.ALU_ADD, op1=7, sel0=1, sel1=1, rev0=1, rev1=1, imm0=bits_of(3.0))
    assert gv.check(cfg, odd) == 0


def test_find_index8_finds_what_max8_returns(seed):
    """max8 values fed to find_index8 give the max8 indices (first occurrence: ties in element
    order, NaN and signed zeros included)."""
    rng = np.random.default_rng([seed, 45])
    cfg = SMALL
    P = cfg.partitions
    mem = gv.VecMemory(cfg)
    x = (rng.integers(-5, 6, (P, 30)).astype(np.float32) * np.float32(0.25)).view(np.uint32)
    x[:, rng.integers(0, 30, 5)] = rng.choice(
        np.array([0x80000000, 0, 0x7FC00000, 0xFFC00000, 0x7F800000], np.uint32), (P, 5))
    mem.sbuf[:, 0:120] = x.view(np.uint8)
    src = _ap(SBUF, 0, P, 0, ((1, 30),))
    top = gv.VecInstr(opcode=gv.OP_MAX8, src0=src, dst=_ap(SBUF, 0, P, 512, ((1, 8),)))
    assert gv.run(cfg, top, mem) == 0
    assert gv.run(cfg, dataclasses.replace(top, op1=1, dst=_ap(SBUF, 0, P, 600, ((1, 8),))),
                  mem) == 0
    fi = gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=src, src1=_ap(SBUF, 0, P, 512, ((1, 8),)),
                     dst=_ap(SBUF, 0, P, 700, ((1, 8),)))
    assert gv.run(cfg, fi, mem) == 0
    idx8 = mem.sbuf[:, 600:632].copy().view(np.float32)
    found = mem.sbuf[:, 700:732].copy().view(np.float32)
    vals = mem.sbuf[:, 512:544].copy().view(np.uint32)
    for p in range(P):
        for j in range(8):
            first = _find_first(x[p], vals[p, j])
            assert found[p, j] == first and first <= idx8[p, j], (seed, p, j)
            if vals[p, j] not in vals[p, :j]:          # first occurrence of the value
                assert found[p, j] == idx8[p, j], (seed, p, j)


def test_find_index8_lanes_edge_cases():
    """An empty-free minimum (one element), a value absent everywhere, every slot the same."""
    x = np.array([[0x3F800000, 0x80000000]], np.uint32)
    v = np.array([[0x3F800000, 0], [0, 0x80000000]] + [[0x7FC00000, 0x7FC00000]] * 6, np.uint32)
    assert gv.find_index8_lanes(x, v).tolist() == [[0, -1], [-1, 0]] + [[-1, -1]] * 6


# --- bn_stats / bn_aggr, affine_select, transpose -----------------------------------------------

U = 2.0 ** -24


def _fp32_rows(ap_mem, cfg, p, off, vals):
    b = np.asarray(vals, np.float32).view(np.uint8)
    ap_mem.sbuf[p, off:off + b.size] = b


def _bn_chain(cfg, x, chunk, dst_dtype=0):
    """bn_stats over each ``chunk`` elements of ``x`` (``(P, n)`` float32) in SBUF, the stats
    as FP32 triples, then bn_aggr: returns (mean, var) float32 of every lane and the stats."""
    P, n = x.shape
    k = n // chunk
    mem = gv.VecMemory(cfg)
    mem.sbuf[:, :4 * n] = np.ascontiguousarray(x, np.float32).view(np.uint8)
    st0 = 4 * n
    for c in range(k):
        ins = gv.VecInstr(opcode=gv.OP_BN_STATS, src0=AP(memory=SBUF, offset=4 * c * chunk,
                                                         dims=((1, chunk),), num_partitions=P),
                          dst=AP(memory=SBUF, offset=st0 + 12 * c, dims=((1, 3),),
                                 num_partitions=P))
        assert gv.run(cfg, ins, mem) == 0
    out = st0 + 12 * k
    ins = gv.VecInstr(opcode=gv.OP_BN_AGGR, src0=AP(memory=SBUF, offset=st0,
                                                    dims=((1, 3), (3, k)), num_partitions=P),
                      dst=AP(memory=SBUF, offset=out, dims=((1, 2),), num_partitions=P),
                      dst_dtype=dst_dtype)
    assert gv.run(cfg, ins, mem) == 0
    res = mem.sbuf[:, out:out + 8].copy().view(np.float32)
    stats = mem.sbuf[:, st0:st0 + 12 * k].copy().view(np.float32).reshape(P, k, 3)
    return res[:, 0], res[:, 1], stats


@pytest.mark.parametrize("n,chunk", [(1, 1), (7, 7), (64, 16), (512, 512), (600, 40)])
def test_bn_stats_aggr_against_float64_bound(n, chunk, seed):
    """Mean and variance of rows with means from 0 to 100 std: the counts and sums are
    exact where they must be, and |mean - mean64| <= L u mean|x|, |var - var64| <= 2 L u
    mean(x^2) with L = ceil(n/K) + ceil(k/K) + 2K + 8 (the longest chain of roundings:
    docs/vector.md §1.7)."""
    rng = np.random.default_rng([seed, 40, n])
    P, K = SMALL.partitions, gv.reduce_ways(SMALL)
    mu = np.array([0.0, 1.0, 10.0, 100.0])[:P]
    x = (rng.standard_normal((P, n)) * rng.uniform(0.1, 4) + mu[:, None]).astype(np.float32)
    mean, var, stats = _bn_chain(SMALL, x, chunk)
    k = n // chunk
    assert np.all(stats[:, :, 0] == chunk)
    x64 = x.astype(np.float64)
    L = -(-n // K) + -(-k // K) + 2 * K + 8
    m64, v64 = x64.mean(1), x64.var(1)
    assert np.all(np.abs(mean - m64) <= L * U * np.abs(x64).mean(1)), (seed, mean, m64)
    assert np.all(np.abs(var - v64) <= 2 * L * U * (x64 ** 2).mean(1)), (seed, var, v64)
    assert np.all(var >= 0)


def test_bn_stats_is_the_documented_order():
    """bn_stats' S and Q against plain float32 loops in the interleaved order (Q with an exact
    fma through fractions), bn_aggr's reciprocal within 1 ulp of 1/n for every count up to
    2**24 sampled, and exact for powers of two."""
    rng = np.random.default_rng(41)
    K = 4
    x = (rng.standard_normal((37, 2)) * 3).astype(np.float32)
    r = gv.bn_stats_lanes(x.view(np.uint32), K).view(np.float32)
    for lane in range(2):
        s = [np.float32(-0.0)] * K
        q = [0] * K
        for i in range(37):
            s[i % K] = np.float32(s[i % K] + x[i, lane])
            q[i % K] = f32(rne_fp32(Fraction(float(x[i, lane])) ** 2 + Fraction(float(q[i % K]))))
        S = s[0]
        Q = np.float32(q[0])
        for j in range(1, K):
            S = np.float32(S + s[j])
            Q = np.float32(Q + np.float32(q[j]))
        assert (r[0, lane], r[1, lane], r[2, lane]) == (37.0, S, Q)
    n = np.concatenate([np.arange(1, 1 << 12), rng.integers(1, 1 << 24, 4000)]).astype(np.float32)
    trip = np.zeros((3, n.size), np.uint32)
    trip[0] = n.view(np.uint32)
    trip[1] = np.float32(1).view(np.uint32)
    mean = gv.bn_aggr_lanes(trip, K)[0].view(np.float32).astype(np.float64)
    exact = 1 / n.astype(np.float64)
    assert np.all(np.abs(mean - exact) <= np.spacing(mean.astype(np.float32)))
    pw = n == np.exp2(np.round(np.log2(n)))
    assert np.all(mean[pw] == exact[pw])


def test_affine_select_against_loop(seed):
    rng = np.random.default_rng([seed, 42])
    P = SMALL.partitions
    # the causal diagonal p - i (e < 0, == 0 and > 0 all occur), and a random expression
    cases = [(cmp, 0, -1, 1) for cmp in gv.AFFINE_CMPS]
    cases += [(int(rng.choice(gv.AFFINE_CMPS)), int(rng.integers(-9, 10)),
               int(rng.integers(-3, 4)), int(rng.integers(-3, 4))) for _ in range(6)]
    for k, (cmp, off, ci, cp) in enumerate(cases):
        mem = gv.VecMemory(SMALL)
        mem.sbuf[:, :64] = rng.integers(0, 256, (P, 64), np.uint8)
        fill = 0xFF800000
        ins = gv.VecInstr(opcode=gv.OP_AFFINE_SELECT, op0=cmp, imm0=fill,
                          imm1=gv.affine_imm1(off, ci, cp),
                          src0=AP(memory=SBUF, offset=60, dims=((-1, 4), (-4, 4)),
                                  elem_bytes=4, num_partitions=P),
                          dst=AP(memory=PSUM, offset=0, dims=((1, 4), (4, 4)), num_partitions=P))
        before = mem.sbuf.copy()
        assert gv.run(SMALL, ins, mem) == 0
        fn = {gv.ALU_EQ: lambda e: e == 0, gv.ALU_NE: lambda e: e != 0,
              gv.ALU_LT: lambda e: e < 0, gv.ALU_LE: lambda e: e <= 0,
              gv.ALU_GT: lambda e: e > 0, gv.ALU_GE: lambda e: e >= 0}[cmp]
        hits = 0
        for p in range(P):
            for i in range(16):
                a, b = divmod(i, 4)                 # outer, inner index
                addr = 60 - 4 * b - 16 * a
                src = int.from_bytes(bytes(before[p, addr:addr + 4]), "little")
                want = src if fn(off + cp * p + ci * i) else fill
                hits += fn(off + cp * p + ci * i)
                got = int.from_bytes(bytes(mem.psum[p, 4 * i:4 * i + 4]), "little")
                assert got == want, (cmp, p, i)
        assert k >= len(gv.AFFINE_CMPS) or 0 < hits < 16 * P
    assert gv.affine_fields(gv.affine_imm1(-32768, -128, 127)) == (-32768, -128, 127)
    with pytest.raises(ValueError, match="'ci'"):
        gv.affine_imm1(0, 128, 0)


def test_transpose_and_new_statuses(seed):
    rng = np.random.default_rng([seed, 43])
    P = SMALL.partitions
    B = gv.transpose_block(SMALL)
    assert B == min(32, P)
    mem = gv.VecMemory(SMALL)
    x = rng.standard_normal((P, B)).astype(np.float32)
    mem.sbuf[:, 64:64 + 4 * B] = x[:, ::-1].copy().view(np.uint8)     # read with step -1
    ins = gv.VecInstr(opcode=gv.OP_TRANSPOSE, src0=AP(memory=SBUF, offset=64 + 4 * (B - 1),
                                                      dims=((-1, B),), num_partitions=B),
                      dst=AP(memory=SBUF, offset=512, dims=((1, B),), num_partitions=B),
                      dst_dtype=gv.DTYPE_CODES["bf16"])
    assert gv.run(SMALL, ins, mem) == 0
    got = mem.sbuf[:, 512:512 + 2 * B].copy().view(np.uint16)
    want = (x.T.astype(np.float32).view(np.uint32) + 0x7FFF + ((x.T.view(np.uint32) >> 16) & 1)) >> 16
    assert np.array_equal(got, want.astype(np.uint16))
    rep = __import__("dataclasses").replace
    base = ins
    assert gv.check(SMALL, rep(base, src0=rep(base.src0, num_partitions=B - 1),
                               dst=rep(base.dst, num_partitions=B - 1))) == gv.E_SHAPE
    assert gv.check(SMALL, rep(base, src0=rep(base.src0, dims=((-1, B - 1),)),
                               dst=rep(base.dst, dims=((1, B - 1),)))) == gv.E_SHAPE
    bn = gv.VecInstr(opcode=gv.OP_BN_STATS, src0=AP(memory=SBUF, dims=((1, 8),)),
                     dst=AP(memory=SBUF, offset=512, dims=((1, 3),)))
    assert gv.check(SMALL, bn) == 0
    assert gv.check(SMALL, rep(bn, dst=rep(bn.dst, dims=((1, 2),)))) == gv.E_SHAPE
    ag = rep(bn, opcode=gv.OP_BN_AGGR, src0=AP(memory=SBUF, dims=((1, 3), (3, 2))),
             dst=rep(bn.dst, dims=((1, 2),)))
    assert gv.check(SMALL, ag) == 0
    assert gv.check(SMALL, rep(ag, src0=AP(memory=SBUF, dims=((1, 6),)))) == gv.E_SHAPE
    aff = gv.VecInstr(opcode=gv.OP_AFFINE_SELECT, op0=gv.ALU_GE, src0=AP(memory=SBUF),
                      dst=AP(memory=SBUF, offset=512))
    assert gv.check(SMALL, aff) == 0
    for bad in (gv.ALU_ADD, gv.ALU_SEL, gv.ALU_BYPASS):
        assert gv.check(SMALL, rep(aff, op0=bad)) == gv.E_OPCODE
