# SPDX-License-Identifier: Apache-2.0
"""The golden ISA simulator's vector (dve) and scalar (act) hooks: the decoders' field mapping
(rtl/core/engine_decode.py), results against numpy / ml_dtypes references, every status with
ERR_INFO 0 and nothing written, the SR generators' seeding and soft reset, the scalar engine's
loaded table and accumulators, the cycle formulas of docs/vector.md §4 / docs/scalar.md §5, and
the footprints the race detector sees.

Independent references: numpy float32 arithmetic and ml_dtypes casts (RNE), float64 function
references within the documented ULP bounds; the field-mapping test builds the expected
golden.vector.VecInstr by hand from the raw instruction bits."""

import dataclasses
import random

import ml_dtypes
import numpy as np
import pytest

from golden import activation as ga
from golden import vector as gv
from golden.isasim import (STATIC_DETAIL, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_FORMAT, E_OPCODE, E_SHAPE,
                           IsaSim, Timing, find_races, table_words, vec_instr)
from golden.ap import AP
from golden.prng import XorWowLanes
from rtl.config import SMALL
from rtl.isa import IMM_BYTE, APEnc, Instr, decode, encode

CFG = SMALL
P = CFG.partitions
F32 = np.float32


def ap(off, n, dt="fp32", mem=1, count=P, start=0, dims=None):
    return APEnc(mem=mem, start=start, count=count, dtype=dt, offset=off,
                 dims=dims or ((1, n),))


def put(sim, off, arr):
    """Write a [P, n] array (any dtype) at byte ``off`` of every partition."""
    b = np.ascontiguousarray(arr).view(np.uint8).reshape(P, -1)
    sim.sbuf[:, off:off + b.shape[1]] = b


def get(sim, off, n, dt=F32):
    return sim.sbuf[:, off:off + n * np.dtype(dt).itemsize].copy().view(dt)


def fresh(seed=0, n=16):
    sim = IsaSim(CFG)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P, n)).astype(F32)
    y = rng.standard_normal((P, n)).astype(F32)
    put(sim, 0, x)
    put(sim, 256, y)
    return sim, x, y


def run1(sim, ins, engine="dve"):
    return sim.run({engine: [ins]})


# --- vector engine: results ---------------------------------------------------------------

def test_vector_ops_against_numpy():
    sim, x, y = fresh()
    n = 16
    bf = ml_dtypes.bfloat16
    prog = [
        Instr(op="tensor_tensor", aps={"ap0": ap(512, n), "ap1": ap(0, n), "ap2": ap(256, n)},
              imm={"op0": 1}),
        Instr(op="tensor_scalar", aps={"ap0": ap(640, n, "bf16"), "ap1": ap(0, n)},
              imm={"op0": 3, "imm0": 2.0, "op1": 2, "imm1": 0.5}),
        Instr(op="tensor_reduce", aps={"ap0": ap(704, 1), "ap1": ap(256, n)},
              imm={"op1": 4}),
        Instr(op="tensor_copy", aps={"ap0": ap(768, n, "bf16"), "ap1": ap(0, n)}),
        Instr(op="memset", aps={"ap0": ap(832, n)}, imm={"imm0": -3.5}),
        Instr(op="iota", aps={"ap0": ap(896, n)}, imm={"op0": 1, "ctl": 4}),
        Instr(op="tensor_scalar", aps={"ap0": ap(1088, n), "ap1": ap(0, n)},
              imm={"op0": 10}),                                      # x > +0: 1.0 / 0.0
        Instr(op="select", aps={"ap0": ap(960, n), "ap1": ap(1088, n), "ap2": ap(256, n)},
              imm={"imm0": -7.0}),                                   # docs/vector.md 1.2
        Instr(op="max8", aps={"ap0": ap(1024, 8), "ap1": ap(256, n)}),
        # max8's values found again; memset's -3.5 absent from normal data
        Instr(op="find_index8", aps={"ap0": ap(1152, 8), "ap1": ap(256, n),
                                     "ap2": ap(1024, 8)}),
        Instr(op="find_index8", aps={"ap0": ap(1184, 8, "bf16"), "ap1": ap(256, n),
                                     "ap2": ap(832, 8)}),
    ]
    assert sim.run({"dve": prog}) is None
    np.testing.assert_array_equal(get(sim, 512, n), x + y)
    np.testing.assert_array_equal(get(sim, 640, n, bf), (x * F32(2) - F32(0.5)).astype(bf))
    np.testing.assert_array_equal(get(sim, 704, 1)[:, 0], y.max(axis=1))
    np.testing.assert_array_equal(get(sim, 768, n, bf), x.astype(bf))
    np.testing.assert_array_equal(get(sim, 832, n), np.full((P, n), -3.5, F32))
    # iota: element index + partition index (sel0: src1 is the partition index)
    np.testing.assert_array_equal(get(sim, 896, n),
                                  np.arange(n, dtype=F32)[None, :] + np.arange(P)[:, None])
    np.testing.assert_array_equal(get(sim, 1088, n), (x > 0).astype(F32))
    np.testing.assert_array_equal(get(sim, 960, n), np.where(x > 0, y, F32(-7)))
    np.testing.assert_array_equal(get(sim, 1024, 8), -np.sort(-y, axis=1)[:, :8])
    np.testing.assert_array_equal(get(sim, 1152, 8), np.argsort(-y, axis=1, kind="stable")[:, :8])
    np.testing.assert_array_equal(get(sim, 1184, 8, bf), np.full((P, 8), -1.0, F32))


def test_vector_psum_evacuation_with_cast():
    sim, x, _ = fresh()
    sim.psum32[:, 1, :10] = x[:, :10].view(np.uint32)
    ins = Instr(op="tensor_copy", aps={"ap0": ap(0x400, 10, "fp8_e4m3"),
                                       "ap1": ap(CFG.psum_bank_bytes, 10, mem=2)})
    assert run1(sim, ins) is None
    got = sim.sbuf[:, 0x400:0x40A].copy().view(ml_dtypes.float8_e4m3)
    np.testing.assert_array_equal(got.astype(F32), x[:, :10].astype(ml_dtypes.float8_e4m3)
                                  .astype(F32))


def _raw_vec(seed):
    """A random dve instruction: random op0/op1 bytes (high bits set), ctl bits 0-7, imms."""
    r = random.Random(seed)
    name = r.choice(list(gv.OPCODES.values()))
    n = r.randint(1, 8)
    dt = lambda: r.choice(["fp32", "bf16", "fp16", "fp8_e4m3"])  # noqa: E731
    eight = name in ("max8", "find_index8")
    aps = {"ap0": ap(512, 8 if eight else 1 if name == "tensor_reduce" else n, dt())}
    if name not in ("memset", "iota"):
        aps["ap1"] = ap(0, n, dt())
    if name in ("tensor_tensor", "tensor_scalar", "select", "tensor_tensor_scan", "find_index8"):
        aps["ap2"] = ap(256 if name != "find_index8" else 4 * r.randrange(n), 8 if eight else n,
                        dt())
    imm = {"op0": r.randrange(256), "op1": r.randrange(256), "ctl": r.randrange(256),
           "imm0": float(F32(r.uniform(-4, 4))), "imm1": float(F32(r.uniform(-4, 4)))}
    if name == "tensor_reduce":
        imm["op1"] = r.choice([1, 4, 5]) | (r.randrange(16) << 4)
    if name == "max8":
        imm["op1"] = r.choice([0, 1]) | (r.randrange(16) << 4)
    if name in ("tensor_tensor", "tensor_scalar", "tensor_reduce"):
        imm["ctl"] &= ~2 if name == "tensor_reduce" else 0xFF
    flags = frozenset({"sr"}) if r.random() < 0.3 else frozenset()
    return Instr(op=name, flags=flags, aps=aps, imm=imm)


@pytest.mark.parametrize("seed", range(30))
def test_vector_field_mapping_matches_hand_decode(seed):
    """The hook's VecInstr is the decoder's: op0/op1 low 4 bits, ctl bits 0-3, raw imm bits;
    and running the raw bytes equals golden.vector.run on that hand-built instruction."""
    ins = _raw_vec(seed)
    raw = encode(ins)
    w = int.from_bytes(raw, "little") >> (8 * IMM_BYTE)
    ctl = (w >> 16) & 0xFF

    def a(slot):
        e = ins.aps.get(slot)
        if e is None:
            return AP(memory=0, start_partition=0, num_partitions=0, offset=0, elem_bytes=4,
                      dims=()), 0
        from rtl.isa import dtype_code
        return AP(memory=e.mem, start_partition=e.start, num_partitions=e.count,
                  offset=e.offset, elem_bytes=4, dims=e.dims), dtype_code(e.dtype)
    (d, dd), (s0, d0), (s1, d1) = a("ap0"), a("ap1"), a("ap2")
    want = gv.VecInstr(opcode=raw[0], dst=d, src0=s0, src1=s1, dst_dtype=dd, src0_dtype=d0,
                       src1_dtype=d1, sr=int("sr" in ins.flags), op0=w & 15,
                       op1=(w >> 8) & 15, rev0=ctl & 1, rev1=ctl >> 1 & 1, sel0=ctl >> 2 & 1,
                       sel1=ctl >> 3 & 1, imm0=(w >> 32) & 0xFFFFFFFF,
                       imm1=(w >> 64) & 0xFFFFFFFF)
    sim, _, _ = fresh(seed)
    assert vec_instr(sim, decode(raw)) == want
    mem = gv.VecMemory(CFG, sbuf=sim.sbuf.copy(), psum=sim.psum.copy())
    code = gv.run(CFG, want, mem, XorWowLanes(CFG.sr_seed, P))
    err = sim.run({"dve": [raw]})
    assert (err.code if err else 0) == code, (seed, err)
    if err:
        assert err.info == 0
    np.testing.assert_array_equal(sim.sbuf, mem.sbuf)


# --- vector engine: errors ----------------------------------------------------------------

VEC_ERRORS = [
    ("reduce op1 subtract", Instr(op="tensor_reduce", aps={"ap0": ap(512, 1), "ap1": ap(0, 4)},
                                  imm={"op1": 2}), E_OPCODE),
    ("max8 op1 = 2", Instr(op="max8", aps={"ap0": ap(512, 8), "ap1": ap(0, 4)},
                           imm={"op1": 2}), E_OPCODE),
    ("find_index8 values not 8", Instr(op="find_index8", aps={
        "ap0": ap(512, 8), "ap1": ap(0, 4), "ap2": ap(256, 7)}), E_SHAPE),
    ("find_index8 without values", Instr(op="find_index8", aps={
        "ap0": ap(512, 8), "ap1": ap(0, 4)}), E_SHAPE),
    ("find_index8 values e8m0", Instr(op="find_index8", aps={
        "ap0": ap(512, 8), "ap1": ap(0, 4), "ap2": ap(256, 8, "e8m0")}), E_FORMAT),
    ("e8m0 dst", Instr(op="tensor_copy", aps={"ap0": ap(512, 4, "e8m0"), "ap1": ap(0, 4)}),
     E_FORMAT),
    ("fp4 src", Instr(op="tensor_copy", aps={"ap0": ap(512, 4), "ap1": ap(0, 4, "fp4_e2m1")}),
     E_FORMAT),
    ("num mismatch", Instr(op="tensor_copy", aps={"ap0": ap(512, 4), "ap1": ap(0, 5)}),
     E_SHAPE),
    ("partition mismatch", Instr(op="tensor_copy", aps={"ap0": ap(512, 4, count=2),
                                                        "ap1": ap(0, 4)}), E_SHAPE),
    ("tensor_tensor without src1", Instr(op="tensor_tensor",
                                         aps={"ap0": ap(512, 4), "ap1": ap(0, 4)}), E_SHAPE),
    ("src0 out of range", Instr(op="tensor_copy", aps={"ap0": ap(512, 4),
                                                       "ap1": ap(4092, 4)}), E_AP_RANGE),
    ("dst partitions", Instr(op="memset", aps={"ap0": ap(512, 4, count=3, start=1)}),
     E_AP_PART),
    ("src0 memory 3", Instr(op="tensor_copy", aps={"ap0": ap(512, 4), "ap1": ap(0, 4, mem=3)}),
     E_AP_FORM),
]


@pytest.mark.parametrize("name,ins,code", VEC_ERRORS, ids=[e[0] for e in VEC_ERRORS])
def test_vector_errors(name, ins, code):
    sim, _, _ = fresh()
    before = (sim.sbuf.copy(), sim.psum.copy())
    err = sim.run({"dve": [Instr(op="nop"), ins]})
    assert err is not None and (err.code, err.source, err.index, err.info) == \
        (code, "dve", 1, 0), err
    np.testing.assert_array_equal(sim.sbuf, before[0])
    np.testing.assert_array_equal(sim.psum, before[1])


def test_decoder_form_beyond_ap_dims():
    """A dimension slot >= cfg.ap_dims in any slot: E_AP_FORM from the decoder, before the
    engine's own checks (here the reduce op1 would be E_OPCODE)."""
    cfg = dataclasses.replace(CFG, ap_dims=2)
    sim = IsaSim(cfg)
    bad = ap(0, 2, dims=((1, 2), (2, 1), (4, 1)))
    err = sim.run({"dve": [Instr(op="tensor_reduce", aps={"ap0": ap(512, 1), "ap1": bad},
                                 imm={"op1": 2})]})
    assert (err.code, err.info) == (E_AP_FORM, 0)
    err = IsaSim(cfg).run({"act": [Instr(op="activation", aps={"ap0": bad, "ap1": ap(0, 2)},
                                         imm={"func": 99})]})
    assert (err.code, err.info) == (E_AP_FORM, 0)
    # two dimensions are fine on this config
    ok = ap(0, 2, dims=((1, 2), (2, 1)))
    assert IsaSim(cfg).run({"dve": [Instr(op="tensor_copy", aps={"ap0": ap(512, 2, dims=ok.dims),
                                                                 "ap1": ok})]}) is None


# --- SR and soft reset ----------------------------------------------------------------------

def test_vector_sr_seeding_and_soft_reset():
    sim, x, _ = fresh()
    ins = Instr(op="tensor_copy", flags=frozenset({"sr"}),
                aps={"ap0": ap(512, 16, "bf16"), "ap1": ap(0, 16)})
    assert run1(sim, ins) is None
    first = get(sim, 512, 16, np.uint16)
    # expected: lane p's XORWOW from cfg.sr_seed, one word per element (golden.formats SR)
    from golden.formats import convert_sr_bits
    rand = XorWowLanes(CFG.sr_seed, P).next_n(16)
    want = convert_sr_bits(x.view(np.uint32).T, CFG.fmt("bf16"), rand).T
    np.testing.assert_array_equal(first, want.astype(np.uint16))
    assert run1(sim, ins) is None                     # the generator went on
    second = get(sim, 512, 16, np.uint16)
    assert not np.array_equal(first, second)
    # an fp32 destination does not step the generator
    sim.soft_reset()
    assert sim.run({"dve": [Instr(op="tensor_copy", flags=frozenset({"sr"}),
                                  aps={"ap0": ap(1024, 16), "ap1": ap(0, 16)}), ins]}) is None
    np.testing.assert_array_equal(get(sim, 512, 16, np.uint16), first)


# --- scalar engine --------------------------------------------------------------------------

def load_table(sim, name, off):
    """Put the table words at byte ``off`` (element-major over the P partitions) and return the
    act_table_load instruction."""
    w = table_words(ga.table(name), P)
    put(sim, off, w)
    return Instr(op="act_table_load", aps={"ap1": ap(off, w.shape[1])},
                 imm={"func": ga.FUNCTION_IDS[name]})


def test_activation_exp_with_bias_ap_and_reduce():
    sim, x, y = fresh()
    bias = np.arange(P, dtype=F32)[:, None] * F32(-0.25)
    put(sim, 1024, bias)
    prog = [load_table(sim, "exp", 2048),
            Instr(op="activation", aps={"ap0": ap(512, 16), "ap1": ap(0, 16),
                                        "ap2": ap(1024, 1)},
                  imm={"func": ga.FUNCTION_IDS["exp"], "scale": 0.5, "bias_ap": 1,
                       "reduce_cmd": 3})]
    assert sim.run({"act": prog}) is None
    got = get(sim, 512, 16)
    ref = np.exp(x.astype(np.float64) * 0.5 + bias)
    assert np.all(ga.ulp_error(got, ref) <= 2)
    # the accumulators: FP32 adds in element order
    acc = np.zeros(P, F32)
    for j in range(16):
        acc = acc + got[:, j]
    np.testing.assert_array_equal(sim.act_acc.view(F32), acc)
    assert sim.act_loaded == "exp"
    sim.soft_reset()
    assert sim.act_loaded is None and not sim.act_acc.any()


def test_activation_scale_immediate_absent_is_zero():
    """The decoder takes the scale bits as they are: no scale immediate is +0, so f(bias)."""
    sim, _, _ = fresh()
    prog = [load_table(sim, "exp", 2048),
            Instr(op="activation", aps={"ap0": ap(512, 16), "ap1": ap(0, 16)},
                  imm={"func": ga.FUNCTION_IDS["exp"], "bias": 1.0})]
    assert sim.run({"act": prog}) is None
    np.testing.assert_array_equal(get(sim, 512, 16), np.full((P, 16), F32(np.e), F32))


ACT_ERRORS = [
    ("no table", [Instr(op="activation", aps={"ap0": ap(512, 4), "ap1": ap(0, 4)},
                        imm={"func": 2, "scale": 1.0})], E_OPCODE),
    ("other function", ["exp", Instr(op="activation", aps={"ap0": ap(512, 4), "ap1": ap(0, 4)},
                                     imm={"func": 3, "scale": 1.0})], E_OPCODE),
    ("bad dtype", ["exp", Instr(op="activation", aps={"ap0": ap(512, 4, "e8m0"),
                                                      "ap1": ap(0, 4)},
                                imm={"func": 2, "scale": 1.0})], E_FORMAT),
    ("shape", ["exp", Instr(op="activation", aps={"ap0": ap(512, 5), "ap1": ap(0, 4)},
                            imm={"func": 2, "scale": 1.0})], E_SHAPE),
    ("bias ap shape", ["exp", Instr(op="activation", aps={"ap0": ap(512, 4), "ap1": ap(0, 4),
                                                          "ap2": ap(1024, 2)},
                                    imm={"func": 2, "bias_ap": 1})], E_SHAPE),
    ("dst range", ["exp", Instr(op="activation", aps={"ap0": ap(4092, 4), "ap1": ap(0, 4)},
                                imm={"func": 2})], E_AP_RANGE),
    ("table bf16", [Instr(op="act_table_load", aps={"ap1": ap(0, 4, "bf16")},
                          imm={"func": 2})], E_FORMAT),
    # a bad image (too short, the function id of another table): the engine's E_FORMAT
    ("table size", [Instr(op="act_table_load", aps={"ap1": ap(0, 4)}, imm={"func": 2})],
     E_FORMAT),
    ("table id", ["exp-as-3"], E_FORMAT),
    # 147 words in one partition: an image's size (one segment), unlike 147 in each of two
    ("table parts", [Instr(op="act_table_load", aps={"ap1": ap(0, 147, count=2)},
                           imm={"func": 2})], E_FORMAT),
    ("table range", [Instr(op="act_table_load",
                           aps={"ap1": ap(CFG.sbuf_bytes_per_partition - 8, 147, count=1)},
                           imm={"func": 2})], E_AP_RANGE),
]


@pytest.mark.parametrize("name,prog,code", ACT_ERRORS, ids=[e[0] for e in ACT_ERRORS])
def test_scalar_errors(name, prog, code):
    sim, _, _ = fresh()
    out = []
    for x in prog:
        if x == "exp":
            out.append(load_table(sim, "exp", 2048))
        elif x == "exp-as-3":
            t = load_table(sim, "exp", 2048)
            out.append(dataclasses.replace(t, imm={"func": 3}))
        else:
            out.append(x)
    before = (sim.sbuf.copy(), sim.psum.copy(), sim.act_acc.copy())
    err = sim.run({"act": out})
    assert err is not None and (err.code, err.source, err.index, err.info) == \
        (code, "act", len(out) - 1, 0), err
    np.testing.assert_array_equal(sim.sbuf, before[0])
    np.testing.assert_array_equal(sim.psum, before[1])
    np.testing.assert_array_equal(sim.act_acc, before[2])


def test_activation_sr_uses_lane_generators():
    sim, x, _ = fresh()
    prog = [load_table(sim, "exp", 2048),
            Instr(op="activation", flags=frozenset({"sr"}),
                  aps={"ap0": ap(512, 16, "bf16"), "ap1": ap(0, 16)},
                  imm={"func": 2, "scale": 1.0})]
    assert sim.run({"act": prog}) is None
    from golden.formats import convert_sr_bits
    y = ga.activation(x.view(np.uint32), "exp")
    rand = XorWowLanes(CFG.sr_seed, P).next_n(16).T
    want = convert_sr_bits(y, CFG.fmt("bf16"), rand)
    np.testing.assert_array_equal(get(sim, 512, 16, np.uint16), want.astype(np.uint16))


# --- timing and footprints ------------------------------------------------------------------

def test_vector_and_scalar_cycle_formulas():
    """docs/kernels.md §4: overhead + rate x elements, the rate the most streams on one SBUF
    bank or on the PSUM port (bank = offset // (sbuf_bytes_per_partition / sbuf_banks));
    the scalar engine overlaps independent instructions."""
    bb = CFG.sbuf_bytes_per_partition // CFG.sbuf_banks
    sim, _, _ = fresh()
    prog = [Instr(op="tensor_copy", aps={"ap0": ap(bb + 512, 16), "ap1": ap(0, 16)}),
            Instr(op="tensor_reduce", aps={"ap0": ap(512, 1), "ap1": ap(0, 16)},
                  imm={"op1": 1}),
            Instr(op="tensor_copy", aps={"ap0": ap(0, 16, mem=2), "ap1": ap(64, 16, mem=2)}),
            Instr(op="tensor_tensor_scan", aps={"ap0": ap(512, 16), "ap1": ap(0, 16),
                                                "ap2": ap(256, 16)}, imm={"op0": 1, "op1": 1}),
            Instr(op="max8", aps={"ap0": ap(512, 8), "ap1": ap(0, 16)}),
            Instr(op="tensor_tensor", aps={"ap0": ap(512, 16), "ap1": ap(0, 16),
                                           "ap2": ap(256, 16)}, imm={"op1": 1}),
            Instr(op="tensor_tensor", aps={"ap0": ap(2 * bb, 16), "ap1": ap(0, 16),
                                           "ap2": ap(bb, 16)}, imm={"op1": 1}),
            # the values enter before the data: one data element per cycle on one bank too
            Instr(op="find_index8", aps={"ap0": ap(512, 8), "ap1": ap(0, 16),
                                         "ap2": ap(256, 8)})]
    assert sim.run({"dve": prog}) is None
    d = [e.done - e.start for e in sim.timeline]
    L = CFG.mul_stages + CFG.add_stages
    assert d == [20 + 16, 32 + 2 * 16, 20 + 2 * 16, 12 + (2 + 2 * L + 1) * 16, 25 + 2 * 16,
                 20 + 3 * 16, 20 + 16, 33 + 16]
    # one instruction at a time: each starts when the previous is done
    assert all(b.start == a.done for a, b in zip(sim.timeline, sim.timeline[1:]))
    sim, _, _ = fresh()
    t = load_table(sim, "exp", 2048)
    acts = [Instr(op="activation", aps={"ap0": ap(bb + 512, 16), "ap1": ap(0, 16)},
                  imm={"func": 2}),
            Instr(op="activation", aps={"ap0": ap(bb + 768, 16), "ap1": ap(64, 16)},
                  imm={"func": 2}),
            Instr(op="activation", aps={"ap0": ap(2 * bb, 16), "ap1": ap(bb + 768, 16)},
                  imm={"func": 2}),
            Instr(op="activation", aps={"ap0": ap(512, 16), "ap1": ap(0, 16)},
                  imm={"func": 2})]
    assert sim.run({"act": [t, *acts]}) is None
    pipe = 2 + L + 12 * L + 4 + 3
    a, b, c, e, f = sim.timeline
    assert a.done - a.start == Timing().act_table_overhead + t.aps["ap1"].dims[0][1] * P
    over = pipe + 14                                 # docs/scalar.md §5: 574 for 512
    assert b.done - b.start == over + 16 and b.start == a.done   # after the table load
    assert c.start == b.start + 16 and c.done - c.start == over + 16   # overlapped
    # reads what c writes: waits for it, and the restart (tests/test_core.py measures it)
    assert e.start == c.done + Timing().act_raw_wait
    assert f.start == e.start + 16 and f.done - f.start == over + 2 * 16   # one bank


def test_footprints_feed_the_race_detector():
    sim, _, _ = fresh()
    ins = [Instr(op="tensor_copy", aps={"ap0": ap(512, 16), "ap1": ap(0, 16)})]
    act = [load_table(sim, "exp", 2048),
           Instr(op="activation", aps={"ap0": ap(0, 16), "ap1": ap(256, 16)},
                 imm={"func": 2})]
    assert sim.run({"dve": ins, "act": act}) is None
    races = find_races(sim)
    assert [(a.op, b.op) for a, b in races] in ([("tensor_copy", "activation")],
                                                [("activation", "tensor_copy")])
    # ordered through a semaphore: none
    sim, _, _ = fresh()
    ins = [dataclasses.replace(ins[0], post=(0, 1))]
    act[1] = dataclasses.replace(act[1], wait=(0, 1))
    assert sim.run({"dve": ins, "act": [load_table(sim, "exp", 2048), act[1]]}) is None
    assert find_races(sim) == []
    # a tensor_scalar without sel does not read its ap2
    sim, _, _ = fresh()
    ts = Instr(op="tensor_scalar", aps={"ap0": ap(512, 4), "ap1": ap(0, 4), "ap2": ap(768, 4)},
               imm={"op0": 1, "imm0": 1.0})
    assert sim.run({"dve": [ts], "act": [Instr(op="nop")]}) is None
    acc = sim.timeline[0].access if sim.timeline[0].op == "tensor_scalar" else \
        sim.timeline[1].access
    assert [(k, lo) for k, _m, _p, lo, _h in acc] == [("w", 512), ("r", 0)]


# --- tensor engine: what the TensorDecoder accepts -----------------------------------------

def _pe_setup():
    sim = IsaSim(CFG)
    rng = np.random.default_rng(4)
    w = rng.standard_normal((P, 4)).astype(ml_dtypes.bfloat16)
    x = rng.standard_normal((P, 8)).astype(ml_dtypes.bfloat16)
    put(sim, 0, w.view(np.uint16))
    put(sim, 64, x.view(np.uint16))
    return sim, w, x


def test_matmul_ap2_is_not_read_and_fewer_moving_rows_use_the_first_weight_rows():
    from golden.tensor import matmul
    ls = Instr(op="load_stationary", aps={"ap1": ap(0, 4, "bf16")})
    mm = Instr(op="multiply_moving", aps={"ap0": ap(0, 8, mem=2), "ap1": ap(64, 8, "bf16")})
    sim, w, x = _pe_setup()
    assert sim.run({"pe": [ls, mm]}) is None
    ref = sim.psum32[:4, 0, :8].copy()
    # ap2 (MX scales) without the mx flag: the decoder does not look at it
    sim2, _, _ = _pe_setup()
    mm2 = dataclasses.replace(mm, aps={**mm.aps, "ap2": ap(4000, 200, "e8m0", mem=3)})
    assert sim2.run({"pe": [ls, mm2]}) is None
    np.testing.assert_array_equal(sim2.psum32[:4, 0, :8], ref)
    # two moving partitions after a 4-row load: the first two weight rows (the decoder checks
    # count <= K; docs/isa.md says count = K)
    sim3, _, _ = _pe_setup()
    mm3 = dataclasses.replace(mm, aps={**mm.aps, "ap1": ap(64, 8, "bf16", count=2)})
    assert sim3.run({"pe": [ls, mm3]}) is None
    want = matmul(w.view(np.uint16)[:2].astype(np.uint32), "bf16",
                  x.view(np.uint16)[:2].astype(np.uint32), "bf16", CFG)
    np.testing.assert_array_equal(sim3.psum32[:4, 0, :8], want)
    assert sim3.timeline[1].work == 2 * 4 * 8


def test_mx_element_format_passes_the_decoder_and_fails_in_the_engine():
    """An MX element format that is not a dense format passes the decoder's format check
    (it is one of the engine's formats) and the engine rejects it: E_FORMAT with ERR_INFO 0,
    after the AP check; e8m0 fails in the decoder (ERR_INFO 0 too, its detail says so)."""
    cfg = CFG.replace(formats=("fp32", "bf16"))
    nop = Instr(op="nop")
    for dt, static in (("fp8_e4m3fn", False), ("e8m0", True)):
        err = IsaSim(cfg).run({"pe": [nop, Instr(op="load_stationary",
                                                 aps={"ap1": ap(0, 4, dt)})]})
        assert (err.code, err.index, err.info) == (E_FORMAT, 1, 0), (dt, err)
        assert err.detail.startswith(STATIC_DETAIL) == static, (dt, err)
    err = IsaSim(cfg).run({"pe": [nop, Instr(op="load_stationary",
                                             aps={"ap1": ap(4094, 4, "fp8_e4m3fn")})]})
    assert (err.code, err.info) == (E_AP_RANGE, 0)
