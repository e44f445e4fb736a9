# SPDX-License-Identifier: Apache-2.0
"""The Vector engine (``rtl/vector/``) in Amaranth's simulator on the small preset, joined to a
real SBUF and PSUM (``tb/vector/rig.py``): random programs of every opcode, ALU op and enabled
format over random APs (negative and zero steps, partial partition ranges, SBUF and PSUM,
per-partition scalars, stochastic rounding), with instruction gaps, ``done`` back-pressure and
bank-stealing hogs; every error status. Statuses and both memories afterwards are compared bit
for bit with ``golden/vector.py`` run over the same program."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import golden.vector as gv
from golden.ap import AP, PSUM, SBUF
from golden.prng import XorWowLanes
from rtl.config import get_preset
from rtl.vector.engine import VectorEngine
from rtl.vector.isa import OPCODES, dtype_table, instr_layout
from tb.amsim import SimBench
from tb.vector.program import bad_instrs, random_instr, random_memories
from tb.vector.rig import VecRig, apply_write, program_job

SMALL = get_preset("small")


@pytest.fixture(scope="module")
def bench():
    return SimBench(VecRig(SMALL))


def golden_run(cfg, instrs, sbuf, psum):
    mem = gv.VecMemory(cfg, sbuf=sbuf, psum=psum)
    prng = XorWowLanes(cfg.sr_seed, cfg.partitions)
    return [gv.run(cfg, i, mem, prng) for i in instrs], mem


def run_and_compare(bench, instrs, rng, seed, mems=None, **kw):
    """Run ``instrs``; after every instruction, the memories with the RTL's writes so far
    applied equal golden's (so a result overwritten later is still checked); the statuses and
    the final memory dumps equal golden's. ``mems``: the initial ``(sbuf, psum)`` (default
    random)."""
    sbuf, psum = random_memories(rng, SMALL) if mems is None else mems
    job, out = program_job(bench.dut, instrs, sbuf=sbuf, psum=psum, rng=rng, **kw)
    bench.run(job)
    mem = gv.VecMemory(SMALL, sbuf=sbuf, psum=psum)
    prng = XorWowLanes(SMALL.sr_seed, SMALL.partitions)
    rs, rp = sbuf.copy(), psum.copy()
    want = []
    for k, ins in enumerate(instrs):
        want.append(gv.run(SMALL, ins, mem, prng))
        for w in out["writes"][k]:
            apply_write(rs, rp, w)
        for name, got, exp in (("SBUF", rs, mem.sbuf), ("PSUM", rp, mem.psum)):
            diff = np.argwhere(got != exp)
            assert diff.size == 0, (
                f"seed {seed}: after instruction {k} ({gv.OPCODES.get(ins.opcode)}, status "
                f"{want[k]:#x}) {len(diff)} {name} bytes differ, first (partition, byte) "
                f"{diff[0].tolist()}: {got[tuple(diff[0])]:#x} vs {exp[tuple(diff[0])]:#x}; "
                f"{ins}")
        if want[k] != 0:
            assert not out["writes"][k], f"seed {seed}: failing instruction {k} wrote"
    assert out["status"] == want, f"seed {seed}: statuses {out['status']} vs {want}"
    for name, got, exp in (("SBUF", out["sbuf"], mem.sbuf), ("PSUM", out["psum"], mem.psum)):
        diff = np.argwhere(got != exp)
        if diff.size:
            p, a = diff[0]
            culprit = [k for k, i in enumerate(instrs)
                       if want[k] == 0 and i.dst.memory == (1 if name == "SBUF" else 2)]
            raise AssertionError(f"seed {seed}: {len(diff)} {name} bytes differ, first "
                                 f"partition {p} byte {a}: {got[p, a]:#x} vs {exp[p, a]:#x}; "
                                 f"instructions writing {name}: {culprit}")
    return out


@pytest.mark.parametrize("opcode", sorted(gv.OPCODES))
def test_each_opcode_random_aps_formats(bench, opcode, seed):
    rng = np.random.default_rng([seed, 20, opcode])
    # a scan runs one element per 9 cycles: shorter patterns
    n = 10 if opcode == gv.OP_TENSOR_TENSOR_SCAN else 20
    instrs = [random_instr(rng, SMALL, opcodes=[opcode], max_elems=n) for _ in range(6)]
    run_and_compare(bench, instrs, rng, seed)


def test_mixed_program_with_gaps_back_pressure_and_hogs(bench, seed):
    rng = np.random.default_rng([seed, 21])
    instrs = [random_instr(rng, SMALL) for _ in range(14)]
    run_and_compare(bench, instrs, rng, seed, p_gap=0.3, p_ready=0.5, p_hog=0.3)


def test_every_alu_op_in_both_stages(bench, seed):
    """Every ALU op alone in stage 0 (random operands, swapped or not, immediate or src1) and
    alone in stage 1 with src1 = src0 (equal operands: the comparisons' equal case, x - x,
    max/min of equals); chains of random ops are in the other tests."""
    rng = np.random.default_rng([seed, 22])
    instrs = []
    for k in range(16):
        i = random_instr(rng, SMALL, max_elems=8, opcodes=[gv.OP_TENSOR_SCALAR], sr=False)
        d = i.__dict__
        instrs.append(gv.VecInstr(**{**d, "op0": k, "op1": gv.ALU_BYPASS}))
        instrs.append(gv.VecInstr(**{**d, "op0": gv.ALU_BYPASS, "rev0": 0, "op1": k, "sel1": 1,
                                     "src1": i.src0, "src1_dtype": i.src0_dtype}))
    run_and_compare(bench, instrs, rng, seed)


def test_every_format_as_source_and_destination(bench, seed):
    rng = np.random.default_rng([seed, 23])
    instrs = []
    for d in gv.vector_formats(SMALL):
        for role in ("src0", "dst"):
            i = random_instr(rng, SMALL, opcodes=[gv.OP_TENSOR_COPY], sr=False)
            for _ in range(50):
                if getattr(i, f"{role}_dtype") == d:
                    break
                i = random_instr(rng, SMALL, opcodes=[gv.OP_TENSOR_COPY])
            instrs.append(i)
    got = {(i.src0_dtype, i.dst_dtype) for i in instrs}
    assert {s for s, _ in got} >= set(gv.vector_formats(SMALL)) - {99}
    run_and_compare(bench, instrs, rng, seed)


def test_every_error_status_writes_nothing_and_engine_continues(bench, seed):
    rng = np.random.default_rng([seed, 24])
    bad = bad_instrs(rng, SMALL)
    codes = {c for _, _, c in bad}
    assert codes == {gv.E_OPCODE, gv.E_FORMAT, gv.E_SHAPE, 0x03, 0x04, 0x0E, 0x0F}
    instrs = []
    for _, ins, _ in bad:
        instrs += [ins, random_instr(rng, SMALL, max_elems=6)]
    out = run_and_compare(bench, instrs, rng, seed, p_ready=0.7)
    assert out["status"][0::2] == [c for _, _, c in bad]


def test_reduce_long_rows_all_ops(bench, seed):
    """Reductions over more elements than partials, with a pre-op, every reduce op."""
    rng = np.random.default_rng([seed, 25])
    instrs = []
    for op1 in gv.REDUCE_OPS:
        for _ in range(2):
            i = random_instr(rng, SMALL, max_elems=40, opcodes=[gv.OP_TENSOR_REDUCE])
            instrs.append(gv.VecInstr(**{**i.__dict__, "op1": op1}))
    run_and_compare(bench, instrs, rng, seed, p_hog=0.2)


def test_signature_and_layouts():
    sig = VectorEngine.Signature(SMALL)
    assert sig.ways == SMALL.mul_stages + SMALL.add_stages + 1 == gv.reduce_ways(SMALL)
    lay = instr_layout(SMALL)
    assert lay.size == sig.instr_layout.size
    assert set(dtype_table(SMALL)) == set(gv.vector_formats(SMALL))
    assert set(OPCODES) == set(gv.OPCODES)
    bf = get_preset("bf16_only")
    assert set(dtype_table(bf)) == set(gv.vector_formats(bf)) == {0, 2}
    with pytest.raises(TypeError):
        VectorEngine.Signature("small")


def test_iota_index_conversion_exact(seed):
    """The IOTA index converter (unsigned 24-bit -> FP32) against numpy for 0, powers of two,
    their neighbours, the maximum and random values."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from rtl.vector.fu import u24_to_fp32
    m = Module()
    n = Signal(24)
    out = u24_to_fp32(m, n, "t")
    rng = np.random.default_rng([seed, 26])
    vals = {0, (1 << 24) - 1} | {v for k in range(24) for v in ((1 << k) - 1, 1 << k,
                                                               (1 << k) + 1)}
    vals |= set(int(v) for v in rng.integers(0, 1 << 24, 300))
    vals = sorted(v for v in vals if v < 1 << 24)
    res = {}

    async def tb(ctx):
        for v in vals:
            ctx.set(n, v)
            res[v] = ctx.get(out)
    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    for v in vals:
        assert res[v] == int(np.float32(v).view(np.uint32)), (v, hex(res[v]))


@pytest.mark.parametrize("stages", [
    (0, 1),
    pytest.param((0, 0), marks=pytest.mark.full),
])
def test_other_alu_latencies_reduce_and_elementwise(stages, seed):
    """Shorter FMA pipelines change the reduction's partial count (K = latency + 1: 2, and 1
    with no combine step at all) and the BN tail programs' step timing; reductions, BN_STATS /
    BN_AGGR, transposes, MAX8, FIND_INDEX8 and elementwise ops stay bit-exact with golden."""
    cfg = SMALL.replace(mul_stages=stages[0], add_stages=stages[1])
    b = SimBench(VecRig(cfg))
    assert b.dut.dut.signature.ways == gv.reduce_ways(cfg) == sum(stages) + 1
    rng = np.random.default_rng([seed, 27])
    instrs = [random_instr(rng, cfg, max_elems=30, opcodes=[op])
              for op in (gv.OP_TENSOR_REDUCE, gv.OP_TENSOR_REDUCE, gv.OP_BN_STATS,
                         gv.OP_BN_AGGR, gv.OP_TRANSPOSE, gv.OP_AFFINE_SELECT, gv.OP_MAX8,
                         gv.OP_FIND_INDEX8, gv.OP_FIND_INDEX8)]
    instrs += [random_instr(rng, cfg, max_elems=12,
                            opcodes=[gv.OP_TENSOR_TENSOR, gv.OP_TENSOR_SCALAR])
               for _ in range(3)]
    sbuf, psum = random_memories(rng, cfg)
    job, out = program_job(b.dut, instrs, sbuf=sbuf, psum=psum, rng=rng, p_ready=0.7)
    b.run(job)
    mem = gv.VecMemory(cfg, sbuf=sbuf, psum=psum)
    prng = XorWowLanes(cfg.sr_seed, cfg.partitions)
    rs, rp = sbuf.copy(), psum.copy()
    for k, ins in enumerate(instrs):
        assert out["status"][k] == gv.run(cfg, ins, mem, prng), (seed, k)
        for w in out["writes"][k]:
            apply_write(rs, rp, w)
        assert np.array_equal(rs, mem.sbuf) and np.array_equal(rp, mem.psum), \
            f"seed {seed}: instruction {k} ({gv.OPCODES[ins.opcode]}) differs: {ins}"


def test_bn_chain_affine_diagonal_and_transpose(bench, seed):
    """Directed: bn_stats over two chunks (FP32 and BF16 sources) into FP32 triples, bn_aggr of
    those into mean/var (FP32, ordinary data: the Newton steps and the final max matter);
    affine_select on the causal diagonal ``p - i`` for every comparison (``e == 0`` occurs);
    transposes into every enabled format."""
    rng = np.random.default_rng([seed, 28])
    P = SMALL.partitions
    sbuf, psum = random_memories(rng, SMALL)
    x = (rng.standard_normal((P, 64)) * 2 + rng.uniform(-5, 5, (P, 1))).astype(np.float32)
    sbuf[:, :256] = x.view(np.uint8)
    bf, f32 = gv.DTYPE_CODES["bf16"], gv.DTYPE_CODES["fp32"]
    st = 2048

    def ap(mem, off, dims, **kw):
        return AP(memory=mem, offset=off, dims=dims, num_partitions=kw.pop("n", P), **kw)
    instrs = [
        gv.VecInstr(opcode=gv.OP_BN_STATS, src0=ap(SBUF, 0, ((1, 20), (-20, 2))),
                    dst=ap(SBUF, st, ((1, 3),))),
        gv.VecInstr(opcode=gv.OP_BN_STATS, src0=ap(SBUF, 256, ((1, 17),)), src0_dtype=bf,
                    dst=ap(SBUF, st + 12, ((1, 3),))),
        gv.VecInstr(opcode=gv.OP_BN_STATS, src0=ap(SBUF, 200, ((1, 1),)),
                    dst=ap(PSUM, 2 * SMALL.psum_bank_bytes, ((1, 3),))),
    ]
    instrs.append(gv.VecInstr(opcode=gv.OP_BN_AGGR, src0=ap(SBUF, st, ((1, 3), (3, 2))),
                              dst=ap(SBUF, st + 64, ((1, 2),)), dst_dtype=f32))
    instrs.append(gv.VecInstr(opcode=gv.OP_BN_AGGR, src0=ap(SBUF, st, ((1, 3), (3, 1))),
                              dst=ap(PSUM, 2 * SMALL.psum_bank_bytes + 16, ((1, 2),))))
    for k, cmp in enumerate(gv.AFFINE_CMPS):
        instrs.append(gv.VecInstr(opcode=gv.OP_AFFINE_SELECT, op0=cmp, imm0=0xFF800000,
                                  imm1=gv.affine_imm1(k % 2, -1, 1),
                                  src0=ap(SBUF, 4 * k, ((1, 6),)),
                                  dst=ap(SBUF, st + 128 + 32 * k, ((1, 6),))))
    B = gv.transpose_block(SMALL)
    for k, d in enumerate(gv.vector_formats(SMALL)):
        instrs.append(gv.VecInstr(opcode=gv.OP_TRANSPOSE, src0=ap(SBUF, 8 * k + 124, ((-1, B),),
                                                                  n=B),
                                  dst=ap(SBUF, st + 512 + 128 * k, ((1, B),), n=B),
                                  dst_dtype=d, sr=k % 2))
    run_and_compare(bench, instrs, rng, seed, mems=(sbuf, psum), p_hog=0.2, p_ready=0.7)


def test_find_index8_directed(bench, seed):
    """FIND_INDEX8 on data with duplicates (the first in pattern order), absent values, NaNs
    of several patterns and both zeros (told apart), over a 2-D pattern with a negative step
    on a partial partition range; broadcast values (step 0); a data row longer than the 24
    beats of any other test; every enabled format as data and values (the same codes: found
    after widening, NaN payloads made canonical) and as destination, SR on some; max8's values
    fed back (its indices found again); the shape, format and AP statuses in between."""
    rng = np.random.default_rng([seed, 29])
    P = SMALL.partitions
    sbuf, psum = random_memories(rng, SMALL)
    specials = np.array([0x80000000, 0, 0x7FC00000, 0xFFC00000, 0x7F800001], np.uint32)
    x = (rng.integers(-3, 4, (P, 64)).astype(np.float32) * np.float32(0.5)).view(np.uint32)
    x[:, rng.integers(0, 64, 12)] = rng.choice(specials, (P, 12))
    sbuf[:, 0:256] = x.view(np.uint8)
    vals = np.concatenate([x[:, rng.integers(0, 40, 4)],
                           np.tile(np.array([0x80000000, 0x7FC00000, 0x40A00000],
                                            np.uint32), (P, 1)), x[:, 20:21]], axis=1)
    sbuf[:, 512:544] = vals.view(np.uint8)
    st = 2048

    def ap(mem, off, dims, **kw):
        return AP(memory=mem, offset=off, dims=dims, num_partitions=kw.pop("n", P), **kw)

    def fi(src0, src1, dst, **kw):
        return gv.VecInstr(opcode=gv.OP_FIND_INDEX8, src0=src0, src1=src1, dst=dst, **kw)
    h = P // 2
    instrs = [
        fi(ap(SBUF, 4 * 9, ((-1, 10), (16, 3)), n=h, start_partition=h),
           ap(SBUF, 512, ((1, 8),), n=h, start_partition=h),
           ap(SBUF, st, ((1, 8),), n=h, start_partition=h)),
        fi(ap(SBUF, 0, ((1, 40),)), ap(SBUF, 512 + 4 * 5, ((0, 8),)),
           ap(PSUM, 2 * SMALL.psum_bank_bytes, ((1, 8),))),
        fi(ap(SBUF, 4 * 63, ((-1, 64),)), ap(SBUF, 512, ((1, 8), (8, 1))),
           ap(SBUF, st + 64 + 28, ((-1, 8),))),
    ]
    fmts = gv.vector_formats(SMALL)
    for k, d in enumerate(fmts):
        w = gv.elem_bytes_of(SMALL, d)
        instrs.append(fi(ap(SBUF, 1024, ((1, 30),)), ap(SBUF, 1024 + w * 3, ((2, 8),)),
                         ap(SBUF, st + 128 + 32 * k, ((1, 8),)), src0_dtype=d, src1_dtype=d,
                         dst_dtype=fmts[(k + 3) % len(fmts)], sr=k % 2))
    instrs += [gv.VecInstr(opcode=gv.OP_MAX8, src0=ap(SBUF, 0, ((1, 40),)),
                           dst=ap(SBUF, st + 512, ((1, 8),))),
               gv.VecInstr(opcode=gv.OP_MAX8, op1=1, src0=ap(SBUF, 0, ((1, 40),)),
                           dst=ap(SBUF, st + 544, ((1, 8),))),
               fi(ap(SBUF, 0, ((1, 40),)), ap(SBUF, st + 512, ((1, 8),)),
                  ap(SBUF, st + 576, ((1, 8),)))]
    base = instrs[1]
    bad = [(dataclasses.replace(base, src1=ap(SBUF, 512, ((1, 7),))), gv.E_SHAPE),
           (dataclasses.replace(base, dst=ap(PSUM, 2 * SMALL.psum_bank_bytes, ((1, 9),))),
            gv.E_SHAPE),
           (dataclasses.replace(base, src1_dtype=9), gv.E_FORMAT),
           (dataclasses.replace(base, src1=ap(PSUM, 16 * SMALL.psum_bank_bytes, ((1, 8),))),
            0x04),
           (dataclasses.replace(base, src0=ap(3, 0, ((1, 40),))), 0x0F)]
    for k, (b, code) in enumerate(bad):
        assert gv.check(SMALL, b) == code, (k, b)
        instrs.insert(2 + 2 * k, b)
    run_and_compare(bench, instrs, rng, seed, mems=(sbuf, psum), p_hog=0.2, p_ready=0.7)
    # the expected indices are neither all -1 (5.0 is absent) nor all missing (element 20)
    mem = gv.VecMemory(SMALL, sbuf=sbuf, psum=psum)
    assert gv.run(SMALL, instrs[0], mem) == 0
    got = mem.sbuf[h:, st:st + 32].copy().view(np.float32)
    assert (got == -1).any() and (got >= 0).any()


def test_decoder_new_opcodes_reach_the_engine_fields():
    """bn_stats, bn_aggr, affine_select (imm1 as raw bits), transpose and find_index8 (three
    APs: the values in ap2) are dve opcodes of the encoding (well formed for the dve
    sequencer) and the VectorDecoder fills the engine's fields from them, as for the older
    opcodes."""
    from amaranth.sim import Simulator

    from golden.asm import parse_instr
    from rtl import isa
    from rtl.core.engine_decode import VectorDecoder
    texts = {
        gv.OP_BN_STATS: "bn_stats ap0=sbuf.fp32[0:4]@0x40{1x3} ap1=psum.bf16[0:4]@0x0{1x9}",
        gv.OP_BN_AGGR: "bn_aggr ap0=sbuf.fp32[0:4]@0x40{1x2} ap1=sbuf.fp32[0:4]@0x0{1x3,3x2}",
        gv.OP_AFFINE_SELECT: ("affine_select ap0=sbuf.bf16[0:4]@0x40{1x8} "
                              "ap1=sbuf.fp32[0:4]@0x0{1x8} op0=11 imm0=-inf "
                              f"imm1=bits:0x{gv.affine_imm1(-3, -1, 1):08x}"),
        gv.OP_TRANSPOSE: "block_transpose.sr ap0=sbuf.bf16[0:4]@0x40{1x4} ap1=sbuf.fp32[0:4]@0x0{-1x4}",
        gv.OP_FIND_INDEX8: ("find_index8 ap0=sbuf.bf16[0:4]@0x40{1x8} ap1=psum.fp32[0:4]@0x0{1x20} "
                            "ap2=sbuf.fp8_e4m3[0:4]@0x100{0x8}"),
    }
    for code, text in texts.items():
        raw = isa.encode(parse_instr(text))
        assert isa.check_reserved(raw, "dve") is None, text
        dut = VectorDecoder(SMALL)
        res = {}

        async def tb(ctx, dut=dut, raw=raw, res=res):
            ctx.set(dut.issue.payload.raw, int.from_bytes(raw, "little"))
            ctx.set(dut.issue.valid, 1)
            ctx.set(dut.instr.ready, 1)
            assert ctx.get(dut.instr.valid)
            res["i"] = ctx.get(dut.instr.payload)
        sim = Simulator(dut)
        sim.add_testbench(tb)
        sim.run()
        i = res["i"]
        assert i.opcode == code, text
        if code == gv.OP_AFFINE_SELECT:
            assert (i.op0, i.imm0, i.imm1) == (11, 0xFF800000, gv.affine_imm1(-3, -1, 1))
            assert gv.affine_fields(i.imm1) == (-3, -1, 1)
        if code == gv.OP_TRANSPOSE:
            assert (i.sr, i.dst_dtype, i.src0.dims[0].step) == (1, 2, -1)
        if code == gv.OP_FIND_INDEX8:
            assert (i.src0.dims[0].num, i.src1.dims[0].num, i.src1.dims[0].step,
                    i.src1_dtype, i.dst.dims[0].num) == (20, 8, 0, 5, 8)
        if code == gv.OP_BN_AGGR:
            assert (i.src0.dims[0].num, i.src0.dims[1].num, i.dst.dims[0].num) == (3, 2, 2)
