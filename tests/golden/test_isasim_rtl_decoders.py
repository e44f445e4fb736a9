# SPDX-License-Identifier: Apache-2.0
"""The golden simulator's view of an instruction against the RTL decoders themselves
(amaranth.sim, small preset with ap_dims = 2 so the decoders' own E_AP_FORM is reachable):

* VectorDecoder / ScalarDecoder: every field of the decoded instruction the engine receives
  equals golden.isasim.vec_instr / act_instr, and the decoder's E_AP_FORM (ERR_INFO 0) comes
  exactly when the golden's does;
* TensorDecoder: after a load, the status and ERR_INFO of the decoder's static checks equal the
  golden's static fault (ERR_INFO 0, detail marked ``STATIC_DETAIL``), and an instruction the
  decoder issues is one the golden's static checks pass (the model engine dispatches every
  command a cycle after taking it).

Random well-formed instructions: random AP fields (memory codes, partitions, dtypes, dims
including slots beyond ap_dims), random immediates."""

import random

from amaranth.sim import Simulator

from golden.isasim import (E_AP_FORM, STATIC_DETAIL, Fault, IsaSim, act_instr, act_slots,
                           decoder_form,
                           vec_instr)
from rtl import isa
from rtl.config import SMALL
from rtl.core.engine_decode import ScalarDecoder, VectorDecoder
from rtl.core.tensor_decode import TensorDecoder

CFG = SMALL.replace(ap_dims=2)


def _rand_ap(r, dtypes):
    nd = r.choice([1, 1, 2, 2, 3, 4])
    dims = tuple((r.randint(-3, 3), r.choice([0, 1, 2, 3, 5, 8, 64])) for _ in range(nd))
    if r.random() < 0.7:                          # mostly no slot beyond ap_dims in use
        dims = tuple((s, n if k < CFG.ap_dims else 0) for k, (s, n) in enumerate(dims))
    return isa.APEnc(mem=r.choice([1, 1, 2, 0, 3]), start=r.choice([0, 0, 1, 2]),
                     count=r.choice([1, 2, 4, 4, 5]), dtype=r.choice(dtypes),
                     offset=r.choice([0, 0x40, r.randrange(1 << 13), r.getrandbits(32)]),
                     dims=dims)


def _rand_instr(r, engine):
    ops = [op for op in isa.OPCODES if op.engine == engine]
    op = r.choice(ops)
    aps = {s: _rand_ap(r, isa.DTYPES) for s in op.aps if r.random() < 0.9}
    imm = {}
    for f in op.imm:
        if r.random() < 0.7:
            v = r.getrandbits(f.width) if r.random() < 0.5 else r.randrange(4)
            imm[f.name] = isa.F32Bits(v) if f.kind == "f32" else v
    flags = frozenset(f for f in op.flags if r.random() < 0.3)
    return isa.Instr(op=op.name, flags=flags, aps=aps, imm=imm)


def _ap_fields(v, cfg):
    return (v.mem, v.start, v.count, v.offset,
            tuple((v.dims[d].step, v.dims[d].num) for d in range(cfg.ap_dims)))


def _gap_fields(ap, cfg):
    dims = tuple(ap.dims) + ((0, 0),) * (cfg.ap_dims - len(ap.dims))
    return (ap.memory, ap.start_partition, ap.num_partitions, ap.offset, dims[:cfg.ap_dims])


def _run_engine_decoder(cls, instrs):
    """``[(form_error, status, info, payload)]`` of each raw instruction through ``cls``."""
    dut = cls(CFG)
    out = []

    async def bench(ctx):
        ctx.set(dut.instr.ready, 1)
        ctx.set(dut.done.ready, 1)
        for raw in instrs:
            ctx.set(dut.issue.payload.raw, int.from_bytes(raw, "little"))
            ctx.set(dut.issue.valid, 1)
            if ctx.get(dut.done.valid):               # the decoder's own E_AP_FORM
                assert not ctx.get(dut.instr.valid)
                out.append((True, ctx.get(dut.done.payload.status),
                            ctx.get(dut.done.payload.info), None))
                await ctx.tick()
                continue
            assert ctx.get(dut.instr.valid)
            payload = ctx.get(dut.instr.payload)
            await ctx.tick()
            ctx.set(dut.issue.valid, 0)
            ctx.set(dut.eng_done.valid, 1)
            ctx.set(dut.eng_done.payload.status, 0x05)
            assert ctx.get(dut.done.valid)
            out.append((False, ctx.get(dut.done.payload.status),
                        ctx.get(dut.done.payload.info), payload))
            await ctx.tick()
            ctx.set(dut.eng_done.valid, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_vector_decoder_fields_and_form_check_match_the_golden():
    r = random.Random(1)
    instrs = [_rand_instr(r, "dve") for _ in range(60)]
    raws = [isa.encode(i) for i in instrs]
    sim = IsaSim(CFG)
    forms = 0
    for raw, (form, status, info, p) in zip(raws, _run_engine_decoder(VectorDecoder, raws)):
        ins = isa.decode(raw)
        try:
            decoder_form(sim, ins)
            g_form = False
        except Fault as f:
            g_form = (f.code, f.info) == (E_AP_FORM, 0)
        assert form == g_form, ins
        assert info == 0
        if form:
            assert status == E_AP_FORM
            forms += 1
            continue
        assert status == 0x05                     # the engine's status passed through
        v = vec_instr(sim, ins)
        assert (p.opcode, p.sr, p.op0, p.op1, p.rev0, p.rev1, p.sel0, p.sel1, p.imm0,
                p.imm1) == (v.opcode, v.sr, v.op0, v.op1, v.rev0, v.rev1, v.sel0, v.sel1,
                            v.imm0, v.imm1), ins
        assert (p.dst_dtype, p.src0_dtype, p.src1_dtype) == (v.dst_dtype, v.src0_dtype,
                                                             v.src1_dtype), ins
        for name in ("dst", "src0", "src1"):
            assert _ap_fields(getattr(p, name), CFG) == _gap_fields(getattr(v, name), CFG), \
                (name, ins)
    assert 5 <= forms <= 55, forms


def test_scalar_decoder_fields_and_form_check_match_the_golden():
    r = random.Random(2)
    instrs = [_rand_instr(r, "act") for _ in range(50)]
    raws = [isa.encode(i) for i in instrs]
    sim = IsaSim(CFG)
    for raw, (form, status, info, p) in zip(raws, _run_engine_decoder(ScalarDecoder, raws)):
        ins = isa.decode(raw)
        try:
            decoder_form(sim, ins, act_slots(ins))
            g_form = False
        except Fault:
            g_form = True
        assert form == g_form and info == 0, ins
        assert status == (E_AP_FORM if form else 0x05), ins
        if form or ins.op != "activation":
            continue
        a = act_instr(sim, ins)
        assert (p.opcode, p.func, p.reduce_cmd, p.sr, p.scale, p.bias) == (
            a.opcode, a.func, a.reduce_cmd, int(a.sr), a.scale, a.bias), ins
        assert (p.bias_src, p.scale_src) == (int(a.bias_ap is not None),
                                             int(a.scale_ap is not None)), ins
        assert (p.dst_dtype, p.src_dtype) == (a.dst_dtype, a.src_dtype), ins
        assert _ap_fields(p.dst, CFG) == _gap_fields(a.dst, CFG), ins
        assert _ap_fields(p.src, CFG) == _gap_fields(a.src, CFG), ins
        if a.bias_ap is not None:
            assert p.bias_dtype == a.bias_dtype
            assert _ap_fields(p.bias_ap, CFG) == _gap_fields(a.bias_ap, CFG), ins
        if a.scale_ap is not None:
            assert _ap_fields(p.scale_ap, CFG) == _gap_fields(a.scale_ap, CFG), ins


def _tensor_instr(r):
    op = r.choice(["load_stationary", "multiply_moving", "multiply_moving", "transpose"])
    K, M = CFG.pe_rows, CFG.pe_cols
    n = r.choice([1, 4, 8, 64, 65])
    src = isa.APEnc(mem=r.choice([1, 1, 1, 2]), start=r.choice([0, 0, 0, 1]),
                    count=r.choice([1, 2, K, K, K + 1]),
                    dtype=r.choice(["bf16", "bf16", "fp32", "e8m0", "fp4_e2m1", "fp8_e4m3",
                                    "fp16", "tf32", "reserved11"]),
                    offset=r.choice([0, 0x40, 0xff8, 1]),
                    dims=r.choice([((1, n),), ((1, 2), (1, 2)), ((1, 2), (0, 0), (1, 2)),
                                   ((1, M),), ((1, 4), (1, 1), (1, 1))]))
    psum = isa.APEnc(mem=r.choice([2, 2, 2, 1]), start=r.choice([0, 0, 0, 1]),
                     count=r.choice([M, M, M, 2]),
                     dtype=r.choice(["fp32", "fp32", "fp32", "bf16"]),
                     offset=r.choice([0, CFG.psum_bank_bytes, 4, CFG.psum_banks
                                      * CFG.psum_bank_bytes]),
                     dims=r.choice([((1, n),), ((1, K),), ((2, n),), ((1, n), (1, 2))]))
    flags = frozenset(f for f in isa.OPS_BY_NAME[op].flags if r.random() < 0.2)
    aps = {"load_stationary": {"ap1": src}, "multiply_moving": {"ap0": psum, "ap1": src},
           "transpose": {"ap0": psum}}[op]
    imm = {}
    if op != "transpose":       # the N:M pattern: enabled ones, one that is not, none
        imm = dict(zip(("sp_n", "sp_m"), r.choice([(4, 16), (2, 4), (1, 2), (3, 4), (0, 0)])))
    return isa.Instr(op=op, flags=flags, aps=aps, imm=imm)


def test_tensor_decoder_static_checks_match_the_golden():
    r = random.Random(3)
    from golden.asm import parse_instr
    good = parse_instr(f"load_stationary ap1=sbuf.bf16[0:{CFG.pe_rows}]@0x0"
                       f"{{1x{CFG.pe_cols}}}")
    cases = [_tensor_instr(r) for _ in range(100)]
    dut = TensorDecoder(CFG)
    res = []

    async def bench(ctx):
        ctx.set(dut.done.ready, 1)
        ctx.set(dut.cmd.ready, 1)
        for ins in cases:
            for idx, x in ((4, good), (5, ins)):     # queue indices 4, 5 (not a slot)
                ctx.set(dut.issue.payload.raw, int.from_bytes(isa.encode(x), "little"))
                ctx.set(dut.issue.payload.index, idx)
                ctx.set(dut.issue.valid, 1)
                issued = disp = False
                for _ in range(40):
                    ctx.set(dut.eng_disp, disp)
                    fire = bool(ctx.get(dut.cmd.valid))
                    issued |= fire
                    disp = fire
                    took = ctx.get(dut.issue.ready)
                    if ctx.get(dut.done.valid):
                        if idx == 5:
                            res.append((ctx.get(dut.done.payload.status),
                                        ctx.get(dut.done.payload.info), issued))
                        await ctx.tick()
                        break
                    await ctx.tick()
                    if took:
                        ctx.set(dut.issue.valid, 0)
                else:
                    raise AssertionError(f"no completion for {x}")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    kinds = set()
    for ins, (status, info, issued) in zip(cases, res):
        s = IsaSim(CFG)
        err = s.run({"pe": [isa.Instr(op="nop")] * 4 + [good, ins]})
        static = (err is not None and err.index == 5
                  and err.detail.startswith(STATIC_DETAIL))
        if issued:
            assert status == 0 and not static, (ins, err)
            kinds.add("issued")
        else:
            assert static and (status, info) == (err.code, 0), (ins, err, status)
            kinds.add(err.name)
    assert {"issued", "E_SHAPE", "E_FORMAT", "E_FLAGS", "E_AP_FORM", "E_SPARSE_TAG"} <= kinds, \
        kinds


def test_pe_latency_is_the_engines():
    """golden.isasim.pe_latency (its timing model's matmul drain) and pe_swap_guard (its load
    after a weight swap) equal the RTL's ``TensorEngine.latency`` and ``swap_guard`` for every
    preset and the pipeline settings a user can pick."""
    from golden.isasim import pe_latency, pe_swap_guard
    from rtl.config import PRESETS
    from rtl.tensor.engine import TensorEngine
    for name, cfg in PRESETS.items():
        for mul, add in ((cfg.mul_stages, cfg.add_stages), (0, 0), (2, 6), (1, 4)):
            c = cfg.replace(mul_stages=mul, add_stages=add)
            sig = TensorEngine.Signature(c)
            assert pe_latency(c) == sig.latency, (name, mul, add)
            assert pe_swap_guard(c) == sig.swap_guard, (name, mul, add)
