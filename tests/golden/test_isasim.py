# SPDX-License-Identifier: Apache-2.0
"""The golden ISA simulator (golden/isasim/): every error class it detects, scheduler
determinism over random interleavings, random race-free programs against a sequential
reference, the race detector, and the cycle model's formulas.

Independent references: the sequential reference below runs the same operations in their global
order with numpy slicing and golden.tensor (no APs, no semaphores, no scheduler); expected error
codes come from docs/isa.md §6 and docs/architecture.md §11.2.
"""

import random

import numpy as np
import pytest

from golden import dma as gdma
from golden.asm import assemble
from golden.isasim import (E_AP_ALIGN, E_AP_FORM, E_AP_RANGE, E_AXI, E_DESC,
                           E_QUEUE,
                           E_FLAGS, E_FORMAT, E_OPCODE, E_SEM, E_SHAPE, E_SPARSE_TAG, E_TIMEOUT,
                           IsaSim,
                           Timing, find_races, pe_latency, pe_swap_guard,
                           register_op)
from golden.tensor import matmul, psum_update, transpose
from rtl.config import DEFAULT, SMALL
from rtl.isa import (AP_SLOTS, DTYPES, FLAG_BITS, IMM_BYTE, INSTR_BYTES, OPS_BY_CODE, OPS_BY_NAME,
                     APEnc, Instr, encode)

CFG = SMALL
SBP = CFG.sbuf_bytes_per_partition
BANK = CFG.psum_bank_bytes
DRAM_BYTES = 1 << 14
DESC_BASE = 0x0                  # descriptors live at DRAM [0, 0x1000)
DATA_BASE = 0x1000               # 8 tiles of 4 rows x 64 bytes
SLOT = 64                        # SBUF tile: 64 bytes per partition at slot * 64


def _state(sim):
    return (bytes(sim.mem.dram), bytes(sim.mem.sbuf), sim.psum.tobytes(), tuple(sim.sems))


# --- random race-free programs -------------------------------------------------------------------

def _load_desc(a, b, sem):
    """DRAM tile a -> SBUF tile b (4 partitions x 64 bytes), posting ``sem``."""
    return gdma.Descriptor(src=DATA_BASE + 256 * a, dst=SLOT * b, src_space=gdma.DRAM,
                           dst_space=gdma.SBUF, dims=((32, 2, 2), (4, 64, SBP)), src_dtype=2,
                           dst_dtype=2, post=True, sem=sem, inc=1)


def _store_desc(a, b, sem):
    return gdma.Descriptor(src=SLOT * b, dst=DATA_BASE + 256 * a, src_space=gdma.SBUF,
                           dst_space=gdma.DRAM, dims=((32, 2, 2), (4, SBP, 64)), src_dtype=2,
                           dst_dtype=2, post=True, sem=sem, inc=1)


def gen_program(seed, n_ops=24):
    """A random race-free program: a global sequence of operations (DMA loads/stores on random
    queues, load_stationary, multiply_moving, transpose), each given to its engine with waits on
    every earlier conflicting operation of another completion stream (sem 0 counts PE
    instructions, sem 1 + q the descriptors of DMA queue q). Returns (ops, programs, dram)."""
    rng = random.Random(seed)
    drng = np.random.default_rng(seed)
    dram = bytearray(DRAM_BYTES)
    dram[DATA_BASE:DATA_BASE + 8 * 256] = drng.integers(0, 256, 8 * 256, dtype=np.uint8).tobytes()
    ops = []
    loaded = False
    while len(ops) < n_ops:
        kind = rng.choice(["load", "load", "store", "ls", "mm", "mm", "tr"])
        if kind in ("mm", "tr") and not loaded:
            kind = "ls"
        op = {"kind": kind, "a": rng.randrange(8), "b": rng.randrange(8), "q": rng.randrange(2),
              "bank": rng.randrange(CFG.psum_banks), "n": rng.randint(1, 32),
              "acc": rng.random() < 0.5, "m": rng.randint(1, 4)}
        loaded |= kind == "ls"
        if kind == "load":
            op["r"], op["w"] = {("dram", op["a"])}, {("sbuf", op["b"])}
        elif kind == "store":
            op["r"], op["w"] = {("sbuf", op["b"])}, {("dram", op["a"])}
        elif kind == "ls":
            op["r"], op["w"] = {("sbuf", op["b"])}, set()
        elif kind == "mm":
            op["r"] = {("sbuf", op["b"])} | ({("psum", op["bank"])} if op["acc"] else set())
            op["w"] = {("psum", op["bank"])}
        else:
            op["r"], op["w"] = set(), {("psum", op["bank"])}
        ops.append(op)
    # streams, waits, counters
    count = {"pe": 0, 0: 0, 1: 0}                  # completions so far per completion stream
    done_at = []                                   # (completion stream, its count) per op
    progs = {"pe": [], "sp": [], "act": [], "dve": []}
    desc_n = 0
    for j, op in enumerate(ops):
        cs = "pe" if op["kind"] in ("ls", "mm", "tr") else op["q"]
        need = {}
        for i in range(j):
            o = ops[i]
            if (o["w"] & (op["r"] | op["w"])) or (op["w"] & o["r"]):
                s, k = done_at[i]
                if s != cs:
                    need[s] = max(need.get(s, 0), k)
        waits = [((0 if s == "pe" else 1 + s), k) for s, k in sorted(need.items(), key=str)]
        issuer = "pe" if cs == "pe" else "sp"
        for w in waits[:-1]:
            progs[issuer].append(Instr(op="nop", wait=w))
        wait = waits[-1] if waits else None
        sb = f"sbuf.bf16[0:4]@{SLOT * op['b']:#x}"
        if cs == "pe":
            if op["kind"] == "ls":
                ins = Instr(op="load_stationary", wait=wait, post=(0, 1),
                            aps=_aps(f"ap1={sb}{{1x{op['m']}}}"))
            elif op["kind"] == "mm":
                ins = Instr(op="multiply_moving", wait=wait, post=(0, 1),
                            flags=frozenset({"acc"} if op["acc"] else ()),
                            aps=_aps(f"ap0=psum.fp32[0:MM]@{op['bank'] * BANK:#x}"
                                     f"{{1x{op['n']}}} ap1={sb}{{1x{op['n']}}}"))
            else:
                ins = Instr(op="transpose", wait=wait, post=(0, 1),
                            aps=_aps(f"ap0=psum.fp32[0:MM]@{op['bank'] * BANK:#x}{{1x4}}"))
            progs["pe"].append(ins)
        else:
            d = (_load_desc if op["kind"] == "load" else _store_desc)(op["a"], op["b"], 1 + cs)
            dram[DESC_BASE + 64 * desc_n:DESC_BASE + 64 * desc_n + 64] = d.pack()
            progs["sp"].append(Instr(op="dma_start", wait=wait, imm={
                "engine": 0, "queue": cs, "count": 1, "desc_addr": DESC_BASE + 64 * desc_n}))
            desc_n += 1
        count[cs] += 1
        done_at.append((cs, count[cs]))
    # bystander engines: nops/notifies waiting on reachable counts
    for e in ("act", "dve"):
        for _ in range(rng.randint(0, 3)):
            s = rng.choice(["pe", 0, 1])
            w = ((0 if s == "pe" else 1 + s), rng.randint(0, count[s]))
            progs[e].append(Instr(op=rng.choice(["nop", "notify"]), wait=w, post=(8, 1)))
    return ops, progs, dram


def _aps(text):
    """``{"ap0": "<AP text>", ...}``; ``MM`` in a PSUM AP stands for the last load's M."""
    return dict(w.split("=", 1) for w in text.split())


def _finish(progs):
    """Resolve the M of the PSUM APs (the last load's columns, in PE program order) and encode."""
    from golden.asm import parse_ap
    out = {}
    for e, lst in progs.items():
        m = None
        enc = []
        for ins in lst:
            if ins.op == "load_stationary":
                m = parse_ap(ins.aps["ap1"]).dims[0][1]
            aps = {k: parse_ap(v.replace("MM", str(m))) for k, v in ins.aps.items()}
            enc.append(encode(Instr(op=ins.op, flags=ins.flags, wait=ins.wait, post=ins.post,
                                    aps=aps, imm=ins.imm)))
        out[e] = b"".join(enc)
    return out


def reference(ops, dram):
    """Run ``ops`` sequentially with numpy slicing: DRAM, SBUF [P, SBP], PSUM [P, banks, fp32]."""
    dram = bytearray(dram)
    sbuf = np.zeros((CFG.partitions, SBP), dtype=np.uint8)
    psum = np.zeros((CFG.partitions, CFG.psum_banks, CFG.psum_bank_fp32), dtype=np.uint32)
    w = None
    for op in ops:
        a, b = DATA_BASE + 256 * op["a"], SLOT * op["b"]
        if op["kind"] == "load":
            sbuf[:, b:b + 64] = np.frombuffer(bytes(dram[a:a + 256]), np.uint8).reshape(4, 64)
        elif op["kind"] == "store":
            dram[a:a + 256] = sbuf[:, b:b + 64].tobytes()
        elif op["kind"] == "ls":
            w = sbuf[:, b:b + 2 * op["m"]].copy().view("<u2").astype(np.uint32)
        elif op["kind"] == "mm":
            x = sbuf[:, b:b + 2 * op["n"]].copy().view("<u2").astype(np.uint32)
            M, n = w.shape[1], op["n"]
            r = matmul(w, "bf16", x, "bf16", CFG)
            psum[:M, op["bank"], :n] = psum_update(psum[:M, op["bank"], :n], r, op["acc"])
        else:
            M = w.shape[1]
            psum[:M, op["bank"], :4] = transpose(w, "bf16", CFG)
    return bytes(dram), sbuf.tobytes(), psum


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_match_reference_under_any_interleaving(seed):
    ops, progs, dram = gen_program(seed)
    raw = _finish(progs)
    ref_dram, ref_sbuf, ref_psum = reference(ops, dram)
    states = []
    for policy in ["timed"] + [random.Random(1000 * seed + k) for k in range(4)]:
        sim = IsaSim(CFG, dram_bytes=dram)
        err = sim.run(raw, policy=policy)
        assert err is None, f"seed {seed} policy {policy}: {err}"
        assert bytes(sim.mem.dram) == ref_dram, f"seed {seed}: DRAM differs"
        assert bytes(sim.mem.sbuf) == ref_sbuf, f"seed {seed}: SBUF differs"
        assert np.array_equal(sim.psum32, ref_psum), f"seed {seed}: PSUM differs"
        states.append(_state(sim))
        if policy == "timed":
            assert find_races(sim) == [], f"seed {seed}: race in a race-free program"
    assert all(s == states[0] for s in states), f"seed {seed}: interleavings differ"


@pytest.mark.parametrize("seed", range(6))
def test_race_detector_finds_dropped_waits(seed):
    ops, progs, dram = gen_program(seed)
    n_waits = sum(ins.wait is not None for e in ("pe", "sp") for ins in progs[e])
    assert n_waits, f"seed {seed}: generator made no dependency"
    bare = {e: [Instr(op=i.op, flags=i.flags, post=i.post, aps=i.aps, imm=i.imm)
                for i in lst] for e, lst in progs.items()}
    sim = IsaSim(CFG, dram_bytes=dram)
    assert sim.run(_finish(bare)) is None
    assert find_races(sim), f"seed {seed}: waits dropped but no race found"


@pytest.mark.parametrize("seed", range(10))
def test_random_corruption_gives_one_error_under_any_interleaving(seed):
    """One random byte of one pe/sp instruction changed: the error (if any) is that
    instruction's (E_OPCODE exactly when check_reserved says so), or a deadlock's E_TIMEOUT, and
    the same under every policy."""
    from rtl.isa import check_reserved
    ops, progs, dram = gen_program(seed)
    raw = _finish(progs)
    rng = random.Random(seed)
    eng = rng.choice(["pe", "sp"])
    idx = rng.randrange(len(raw[eng]) // INSTR_BYTES)
    b = bytearray(raw[eng])
    pos = idx * INSTR_BYTES + rng.randrange(INSTR_BYTES)
    b[pos] = rng.choice([v for v in range(256) if v != b[pos]])
    raw[eng] = bytes(b)
    errs = []
    for policy in ["timed", random.Random(seed), random.Random(seed + 99)]:
        sim = IsaSim(CFG, dram_bytes=dram)
        errs.append(sim.run(raw, policy=policy))
    e = errs[0]
    key = [None if x is None else (x.code, x.source, x.index) for x in errs]
    assert all(k == key[0] for k in key), f"seed {seed} byte {pos}: {key}"
    malformed = check_reserved(bytes(b[idx * INSTR_BYTES:(idx + 1) * INSTR_BYTES]), eng)
    if malformed:
        assert (e.code, e.source, e.index) == (E_OPCODE, eng, idx), f"seed {seed}: {e}"
    else:
        assert e is None or e.code == E_TIMEOUT or (e.source, e.index) == (eng, idx) \
            or e.source.startswith("dma"), f"seed {seed} byte {pos}: {e}"


# --- errors -------------------------------------------------------------------------------------

def _run(programs, dram=None, cfg=CFG):
    sim = IsaSim(cfg, dram_bytes=dram if dram is not None else DRAM_BYTES)
    before = _state(sim)
    err = sim.run({e: assemble(p) if isinstance(p, str) else p for e, p in programs.items()})
    return sim, err, before


LS = "load_stationary ap1=sbuf.bf16[0:4]@0x0{1x4}\n"
MM = "multiply_moving ap0=psum.fp32[0:4]@0x0{1x8} ap1=sbuf.bf16[0:4]@0x40{1x8}\n"

ERROR_CASES = [
    # (name, programs, code, source, index, info)
    ("opcode_foreign", {"dve": "nop\n" + LS}, E_OPCODE, "dve", 1, 0),
    ("wait_sem_range", {"pe": "nop\nnop wait=s16>=0"}, E_SEM, "pe", 1, 16),
    ("post_sem_range", {"act": "nop post=s200+1"}, E_SEM, "act", 0, 200),
    ("post_overflow", {"act": "nop post=s3+255\nnop post=s3+1"}, E_SEM, "sem", 1, 3),
    ("deadlock", {"pe": "nop post=s1+1\nnop wait=s2>=1",
                  "act": "nop wait=s1>=1\nnop wait=s3>=1\nnop post=s2+1"},
     E_TIMEOUT, "pe", 1, 2),
    # tensor engine (rtl/core/tensor_decode.py): the decoder's static checks, the reader's AP
    # codes and the engine's own (after the AP was accepted) all report ERR_INFO 0
    ("sparse_pattern_not_enabled",
     {"pe": "load_stationary.sparse ap1=sbuf.bf16[0:4]@0x0{1x4} sp_n=3 sp_m=4"},
     E_SPARSE_TAG, "pe", 0, 0),
    ("sparse_fp32_weights",
     {"pe": "load_stationary.sparse ap1=sbuf.fp32[0:4]@0x0{1x4} sp_n=2 sp_m=4"},
     E_FORMAT, "pe", 0, 0),
    ("sparse_partial_group",
     {"pe": "load_stationary.sparse ap1=sbuf.fp8_e4m3[0:2]@0x0{1x4} sp_n=4 sp_m=16"},
     E_SHAPE, "pe", 0, 0),
    ("sparse_duplicate_tags",      # SBUF is zero: every tag 0, the 2 of a group collide
     {"pe": "load_stationary.sparse ap1=sbuf.bf16[0:4]@0x0{1x4} sp_n=2 sp_m=4"},
     E_SPARSE_TAG, "pe", 0, 0),
    ("sparse_pair_ap_range",       # 4-byte pairs: the 4 elements end past the partition
     {"pe": "load_stationary.sparse ap1=sbuf.bf16[0:4]@0xff4{1x4} sp_n=2 sp_m=4"},
     E_AP_RANGE, "pe", 0, 0),
    ("acc_flag_on_load", {"pe": "nop\nload_stationary.mx ap1=sbuf.bf16[0:4]@0x0{1x4}"},
     E_FLAGS, "pe", 1, 0),
    ("format_e8m0_weights", {"pe": "load_stationary ap1=sbuf.e8m0[0:4]@0x0{1x4}"},
     E_FORMAT, "pe", 0, 0),
    ("format_fp4", {"pe": "nop\nload_stationary ap1=sbuf.fp4_e2m1[0:4]@0x0{1x4}"},
     E_FORMAT, "pe", 1, 0),
    ("format_pair", {"pe": "load_stationary ap1=sbuf.fp32[0:4]@0x0{1x4}\n" + MM},
     E_FORMAT, "pe", 1, 0),
    ("ap_form", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0x0{1x2,1x0,1x2}"},
     E_AP_FORM, "pe", 0, 0),
    ("ap_align", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0x1{1x4}"}, E_AP_ALIGN, "pe", 0, 0),
    ("ap_range", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0xffc{1x4}"},
     E_AP_RANGE, "pe", 0, 0),
    ("ap_range_moving", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x0{1x8} "
                         "ap1=sbuf.bf16[0:4]@0xff8{1x8}"}, E_AP_RANGE, "pe", 1, 0),
    ("shape_psum_offset", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0xf8{1x8} "
                           "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_bank", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x400{1x8} "
                         "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_before_ap_range", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0xffc{1x5}"},
     E_SHAPE, "pe", 0, 0),
    ("shape_m", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0x0{1x5}"}, E_SHAPE, "pe", 0, 0),
    ("shape_m_zero_dim_counts_1", {"pe": "load_stationary ap1=sbuf.bf16[0:4]@0x0{1x4,1x0,1x2}"},
     E_SHAPE, "pe", 0, 0),
    ("shape_start", {"pe": "load_stationary ap1=sbuf.bf16[2:2]@0x0{1x4}"},
     E_SHAPE, "pe", 0, 0),
    ("shape_psum_memory", {"pe": "load_stationary ap1=psum.bf16[0:4]@0x0{1x4}"},
     E_SHAPE, "pe", 0, 0),
    ("shape_no_load", {"pe": MM}, E_SHAPE, "pe", 0, 0),
    ("shape_k", {"pe": "load_stationary ap1=sbuf.bf16[0:2]@0x0{1x4}\n"
                 "multiply_moving ap0=psum.fp32[0:4]@0x0{1x8} ap1=sbuf.bf16[0:4]@0x40{1x8}"},
     E_SHAPE, "pe", 1, 0),
    ("shape_n", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x0{1x8} "
                 "ap1=sbuf.bf16[0:4]@0x40{1x65}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_m", {"pe": LS + "multiply_moving ap0=psum.fp32[0:2]@0x0{1x8} "
                      "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_entry", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x4{1x8} "
                          "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_dims", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x0{1x4,4x2} "
                         "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_dtype", {"pe": LS + "multiply_moving ap0=psum.bf16[0:4]@0x0{1x8} "
                          "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_psum_step", {"pe": LS + "multiply_moving ap0=psum.fp32[0:4]@0x0{2x8} "
                         "ap1=sbuf.bf16[0:4]@0x40{1x8}"}, E_SHAPE, "pe", 1, 0),
    ("shape_transpose", {"pe": LS + "transpose ap0=psum.fp32[0:4]@0x0{1x8}"},
     E_SHAPE, "pe", 1, 0),
    ("dma_desc_align", {"sp": "dma_start count=1 desc_addr=0x20"}, E_DESC, "sp", 0, 0),
    ("dma_queue_range", {"sp": f"dma_start queue={CFG.dma_queues} count=1 desc_addr=0"},
     E_DESC, "sp", 0, 0),
    ("dma_engine_range", {"sp": f"dma_start engine={CFG.dma_engines} count=1 desc_addr=0"},
     E_DESC, "sp", 0, 0),
    ("dma_desc_window", {"sp": f"dma_start count=2 desc_addr={DRAM_BYTES - 64}"},
     E_AXI, "sp", 0, 0),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_error_classes(case):
    name, programs, code, source, index, info = case
    cfg = CFG.replace(semaphore_bits=8) if name == "post_overflow" else CFG
    sim, err, before = _run(programs, cfg=cfg)
    assert err is not None, name
    assert (err.code, err.source, err.index, err.info) == (code, source, index, info), \
        f"{name}: {err}"
    if code not in (E_SEM, E_TIMEOUT):
        # the failing instruction wrote nothing (what ran before it wrote nothing either here)
        assert _state(sim)[:3] == before[:3], name


def test_error_stops_every_stream_and_nothing_after_runs():
    # act fails at index 1; pe's later instructions wait on what act would post
    sim, err, _ = _run({"act": "nop post=s1+1\nnop post=s99+1\nnop post=s2+1",
                        "pe": "nop wait=s1>=1 post=s3+1\nnop wait=s2>=1 post=s4+1"})
    assert (err.code, err.source, err.index) == (E_SEM, "act", 1)
    assert sim.sems[2] == 0 and sim.sems[4] == 0


def test_descriptor_errors_name_the_queue():
    dram = bytearray(DRAM_BYTES)
    good = _load_desc(0, 0, 5)
    bad = gdma.Descriptor(src=DATA_BASE, dst=4 * SBP - 8, dims=((32, 2, 2),), src_dtype=2,
                          dst_dtype=2)                                 # past the SBUF end
    badaxi = gdma.Descriptor(src=DRAM_BYTES - 8, dst=0, dims=((32, 2, 2),), src_dtype=2,
                             dst_dtype=2)
    dram[0:64], dram[64:128], dram[128:192] = good.pack(), bad.pack(), badaxi.pack()
    sim, err, _ = _run({"sp": "dma_start queue=2 count=2 desc_addr=0"}, dram)
    assert (err.code, err.source, err.index) == (E_AP_RANGE, "dma0.q2", 1), err
    assert err.info & 0xFF == gdma.F_RANGE and err.info >> 8 & 1 == 1
    assert sim.sems[5] == 1                                   # the good one ran and posted
    sim, err, _ = _run({"sp": "dma_start queue=1 count=1 desc_addr=128"}, dram)
    assert (err.code, err.source, err.index) == (E_AXI, "dma0.q1", 0), err
    rsv = gdma.Descriptor(src=DATA_BASE, dst=0, dims=((32, 2, 2),), src_dtype=2, dst_dtype=2,
                          reserved=1)
    dram[0:64] = rsv.pack()
    sim, err, before = _run({"sp": "dma_start count=1 desc_addr=0"}, dram)
    assert (err.code, err.source, err.info) == (E_DESC, "dma0.q0", gdma.F_RESERVED)
    assert _state(sim)[:3] == before[:3]


def test_opcode_unknown_and_reserved_bits():
    raw = bytearray(encode(Instr(op="nop")))
    raw[0] = 0x7F
    sim, err, _ = _run({"pool": bytes(raw)})
    assert (err.code, err.source, err.index) == (E_OPCODE, "pool", 0)
    raw = bytearray(encode(Instr(op="nop")))
    raw[12] = 1
    sim, err, _ = _run({"cc": encode(Instr(op="nop")) + bytes(raw)})
    assert (err.code, err.source, err.index) == (E_OPCODE, "cc", 1)


def test_unhooked_opcode_raises_not_implemented():
    from golden.isasim import OP_HOOKS
    old = OP_HOOKS.pop("tensor_tensor")
    try:
        with pytest.raises(NotImplementedError, match="tensor_tensor"):
            _run({"dve": "tensor_tensor ap0=sbuf.fp32[0:4]@0x0{1x4} ap1=sbuf.fp32[0:4]@0x0{1x4} "
                         "ap2=sbuf.fp32[0:4]@0x0{1x4} op0=1"})
    finally:
        OP_HOOKS["tensor_tensor"] = old


def test_every_engine_opcode_has_a_hook():
    """Every opcode rtl.isa gives to pe, dve, act or sp runs in the simulator."""
    from golden.isasim import OP_HOOKS
    missing = [op.name for op in OPS_BY_CODE.values()
               if op.engine in ("pe", "dve", "act", "sp") and op.name not in OP_HOOKS]
    assert missing == []


def test_register_op_hook_runs_and_validates():
    calls = []

    def memset(sim, ins):
        ap = sim.check_ap(ins.aps["ap0"], "ap0")
        calls.append(ins.imm.get("imm0", 0.0))
        sim.write_ap(ap, np.full((ap.num_partitions, ap.count), 0x3F800000, dtype=np.uint32))

    old = None
    try:
        from golden.isasim import OP_HOOKS
        old = OP_HOOKS.get("memset")
        register_op("memset", memset)
        sim, err, _ = _run({"dve": "memset ap0=sbuf.fp32[0:4]@0x10{1x2} imm0=1.0 post=s0+1",
                            "pe": "nop wait=s0>=1"})
        assert err is None and calls == [1.0]
        assert np.all(sim.sbuf[:, 0x10:0x18].copy().view("<u4") == 0x3F800000)
        assert sim.sbuf[:, :0x10].sum() == 0 and sim.sbuf[:, 0x18:].sum() == 0
        ev = [e for e in sim.timeline if e.op == "memset"][0]
        assert ev.done == ev.start + 2 + sim.timing.vector_latency
        sim, err, _ = _run({"dve": "memset ap0=sbuf.fp32[0:4]@0xffc{1x2} imm0=1.0"})
        assert (err.code, err.source, err.info) == (E_AP_RANGE, "dve", 0)
    finally:
        from golden.isasim import OP_HOOKS
        if old is None:
            OP_HOOKS.pop("memset", None)
        else:
            OP_HOOKS["memset"] = old
    with pytest.raises(ValueError, match="register_op"):
        register_op("nop", memset)


def test_halt_notify_irq():
    sim, err, _ = _run({"act": "notify code=7\nnop irq\nhalt\nnop post=s0+1"})
    assert err is None
    assert sim.notifies == [("act", 0, 7), ("act", 1, -1)]
    assert sim.sems[0] == 0                                   # after halt nothing runs


def test_bad_arguments():
    with pytest.raises(TypeError, match="IsaSim cfg"):
        IsaSim("small")
    with pytest.raises(ValueError, match="programs keys"):
        IsaSim(CFG).run({"vector": b""})
    with pytest.raises(ValueError, match="multiple of 128"):
        IsaSim(CFG).run({"pe": b"\0" * 100})
    with pytest.raises(TypeError, match="policy"):
        IsaSim(CFG).run({}, policy="random")
    with pytest.raises(ValueError, match="Timing field 'seq_issue'"):
        Timing(seq_issue=0)
    with pytest.raises(ValueError, match="Timing field 'issue_depth'"):
        Timing(issue_depth=17)


# --- cycle model --------------------------------------------------------------------------------

@pytest.mark.parametrize("N", [32, 9, 8, 7, 1])
@pytest.mark.parametrize("tiles", [1, 3, 8])
def test_back_to_back_tiles_follow_the_tensor_engine_formula(tiles, N):
    M = CFG.pe_cols
    prog = "".join(f"load_stationary ap1=sbuf.bf16[0:4]@{0x100 * t:#x}{{1x4}}\n"
                   f"multiply_moving ap0=psum.fp32[0:4]@{(t % 4) * BANK:#x}{{1x{N}}} "
                   f"ap1=sbuf.bf16[0:4]@0x800{{1x{N}}}\n" for t in range(tiles))
    sim = IsaSim(CFG, timing=Timing(fetch_cycles=0))          # the engine's own formula
    assert sim.run({"pe": assemble(prog)}) is None
    t0 = sim.timeline[0].start
    last = max(e.done for e in sim.timeline)
    # docs/tensor-engine.md: cycles = M + 1 + (T - 1) * max(N, G) + N + L, G = M + guard + 3
    G = M + 1 + 3
    assert G == 8 == M + pe_swap_guard(CFG) + 3
    assert last - t0 == M + 1 + (tiles - 1) * max(N, G) + N + pe_latency(CFG)
    # input register, row skew, PE (registered buses, multiplier, adder), de-skew (at least one
    # register per column), PSUM read/add/write
    L = 1 + (CFG.pe_rows - 1) * CFG.add_stages + 1 + CFG.mul_stages + CFG.add_stages \
        + CFG.pe_cols + 1 + CFG.add_stages
    assert pe_latency(CFG) == L == 18


def test_dma_cycles_and_semaphore_latency():
    tm = Timing(dram_latency=5, post_latency=3, wait_latency=2)
    dram = bytearray(DRAM_BYTES)
    dram[0:64] = _load_desc(0, 1, 4).pack()
    sim = IsaSim(CFG, dram_bytes=dram, timing=tm)
    assert sim.run({"sp": assemble("dma_start count=1 desc_addr=0"),
                    "pe": assemble("nop wait=s4>=1")}) is None
    start_ev, desc_ev, nop_ev = sim.timeline
    W = CFG.sbuf_word_bytes
    # the descriptor's burst on the R channel after the AXI latency, then queued (+1)
    assert start_ev.done - start_ev.issue == 1 + 5 + 64 // W + 1
    # 4 rows of 64 bytes, 8-byte words: 4 bursts of 8 beats back to back, written to SBUF (+1)
    assert desc_ev.start == start_ev.done
    assert desc_ev.done - desc_ev.start == tm.dma_desc_cycles + 5 + 4 * 64 // W + 1
    assert nop_ev.issue == desc_ev.done + 3 + 2


def test_issue_depth_bounds_outstanding():
    prog = "".join("load_stationary ap1=sbuf.bf16[0:4]@0x0{1x4}\n"
                   "multiply_moving ap0=psum.fp32[0:4]@0x0{1x64} "
                   "ap1=sbuf.bf16[0:4]@0x0{1x64}\n" for _ in range(3))
    for depth in (1, 2, 4):
        sim = IsaSim(CFG, timing=Timing(issue_depth=depth))
        assert sim.run({"pe": assemble(prog)}) is None
        ev = sim.timeline
        for i in range(depth, len(ev)):
            assert ev[i].issue >= ev[i - depth].retire
        assert all(ev[i].retire >= ev[i - 1].retire for i in range(1, len(ev)))


def test_split_program_forms():
    ins = Instr(op="nop", post=(0, 1))
    raw = encode(ins)
    a = IsaSim(CFG)
    a.run({"act": [ins, raw]})
    assert a.sems[0] == 2
    assert len(raw) == INSTR_BYTES and OPS_BY_NAME["nop"].code == raw[0]


def _queue_image(progs, base=0x1000, size=8, head=0):
    """DRAM with each engine's instructions written into a ring at ``base + 0x400 * e``."""
    dram = bytearray(DRAM_BYTES)
    q = {}
    for k, (e, text) in enumerate(progs.items()):
        raw = assemble(text)
        b = base + 0x400 * k
        n = len(raw) // INSTR_BYTES
        for i in range(n):
            slot = (head + i) % size
            dram[b + 128 * slot:b + 128 * slot + 128] = raw[128 * i:128 * i + 128]
        q[e] = (b, size, head, (head + n) % size)
    return dram, q


def test_run_queues_ring_wrap_reports_queue_indices():
    dram, q = _queue_image({"act": "nop post=s0+1\nnop post=s0+1\nnop post=s99+1\nnop"},
                           head=6)
    sim = IsaSim(CFG, dram_bytes=dram)
    err = sim.run_queues(q)
    # positions 0, 1, 2 sit in slots 6, 7, 0: the bad post is at queue index 0
    assert (err.code, err.source, err.index, err.info) == (E_SEM, "act", 0, 99)
    assert [e.index for e in sim.timeline] == [6, 7] and sim.sems[0] == 2


@pytest.mark.parametrize("q,code", [((0x1000, 6, 0, 2), E_QUEUE), ((0x1000, 8, 0, 8), E_QUEUE),
                                    ((0x1010, 8, 0, 2), E_QUEUE), ((0x1000, 0, 0, 1), E_QUEUE),
                                    ((DRAM_BYTES - 128, 4, 0, 2), E_AXI)])
def test_run_queues_bad_queue_and_fetch_outside_window(q, code):
    dram = bytearray(DRAM_BYTES)
    nop = encode(Instr(op="nop", post=(1, 1)))
    dram[DRAM_BYTES - 128:] = nop
    sim = IsaSim(CFG, dram_bytes=dram)
    err = sim.run_queues({"pool": q})
    assert err.code == code and err.source == "pool", err
    if code == E_AXI:
        assert err.index == 1 and sim.sems[1] == 1          # the first one ran
    else:
        assert err.index == q[2] and sim.sems[1] == 0
    # an empty queue (head == tail) is never checked
    assert IsaSim(CFG).run_queues({"pool": (0x1010, 6, 3, 3)}) is None


def test_watchdog_fires_on_a_long_wait_in_time_order():
    dram = bytearray(DRAM_BYTES)
    dram[0:64] = _load_desc(0, 1, 4).pack()
    progs = {"sp": assemble("dma_start count=1 desc_addr=0"),
             "act": assemble("nop\nnop wait=s4>=1")}
    tm = Timing(fetch_cycles=0)
    sim = IsaSim(CFG, dram_bytes=dram, timing=tm)
    assert sim.run(progs, watchdog=200) is None                   # the DMA posts in time
    desc = [e for e in sim.timeline if e.op == "descriptor"][0]
    visible = desc.done + sim.timing.post_latency    # act's wait starts at 1, holds at visible + 1
    sim = IsaSim(CFG, dram_bytes=dram, timing=tm)
    err = sim.run({**progs, "dve": assemble("nop wait=s9>=1")}, watchdog=20)
    # act's wait starts at cycle 1 and dve's at 0: dve fires first (cycle 20)
    assert (err.code, err.source, err.index, err.info) == (E_TIMEOUT, "dve", 0, 9)
    sim = IsaSim(CFG, dram_bytes=dram, timing=tm)
    err = sim.run(progs, watchdog=visible - 1)
    assert (err.code, err.source, err.index, err.info) == (E_TIMEOUT, "act", 1, 4)
    sim = IsaSim(CFG, dram_bytes=dram, timing=tm)
    assert sim.run(progs, watchdog=visible) is None
    with pytest.raises(ValueError, match="watchdog"):
        IsaSim(CFG).run({}, watchdog=-1)


def test_soft_reset_keeps_memory_and_clears_semaphores():
    dram = bytearray(DRAM_BYTES)
    dram[DATA_BASE:DATA_BASE + 256] = bytes(range(256))
    dram[0:64] = _load_desc(0, 0, 2).pack()
    sim = IsaSim(CFG, dram_bytes=dram)
    assert sim.run({"sp": assemble("dma_start count=1 desc_addr=0"),
                    "pe": assemble("nop wait=s2>=1\n" + LS + "nop wait=s0>=1")}) is not None
    assert sim.error.code == E_TIMEOUT and sim.sems[2] == 1
    sbuf = bytes(sim.mem.sbuf)
    sim.soft_reset()
    assert sim.error is None and sim.sems == [0] * CFG.semaphores and sim.pe_weights is None
    assert bytes(sim.mem.sbuf) == sbuf and sbuf[:64] == bytes(range(64))
    # the next program runs on the kept SBUF, its timeline from cycle 0
    assert sim.run({"pe": assemble(LS + "transpose ap0=psum.fp32[0:4]@0x0{1x4}")}) is None
    assert sim.timeline[0].issue == INSTR_BYTES // CFG.sbuf_word_bytes + sim.timing.dram_latency
    assert len(sim.timeline) == 2
    w = np.frombuffer(sbuf, np.uint8).reshape(CFG.partitions, SBP)[:, :8].copy().view("<u2")
    assert np.array_equal(sim.psum32[:4, 0, :4], w.T.astype(np.uint32))


def test_same_cycle_errors_keep_the_lower_engine():
    # act and pe both fail at cycle 0; pe is engine 0 (the CSR latch: the lower source wins)
    sim, err, _ = _run({"act": "nop post=s99+1", "pe": "nop post=s98+1"})
    assert (err.code, err.source, err.info) == (E_SEM, "pe", 98)
    # one cycle later loses
    sim, err, _ = _run({"act": "nop post=s99+1", "pe": "nop\nnop post=s98+1"})
    assert (err.source, err.info) == ("act", 99)


def test_dma_engine_serializes_its_queues_and_engines_run_in_parallel():
    cfg = DEFAULT                                   # 2 DMA engines, 128-bit words
    W = cfg.sbuf_word_bytes
    sbp = cfg.sbuf_bytes_per_partition
    dram = bytearray(1 << 14)
    dram[0x1000:0x2400] = random.Random(5).randbytes(0x1400)
    descs = [gdma.Descriptor(src=0x1000 + 0x400 * i + 4, dst=sbp * i + 4, dims=((512, 2, 2),),
                             src_dtype=2, dst_dtype=2) for i in range(3)]
    for i, d in enumerate(descs):
        dram[64 * i:64 * i + 64] = d.pack()
    prog = ("dma_start engine=0 queue=0 count=1 desc_addr=0\n"
            "dma_start engine=1 queue=0 count=1 desc_addr=128\n"
            "dma_start engine=0 queue=1 count=1 desc_addr=64\n")
    # fetches not modelled: the sequencer's prefetch reads (ahead of the descriptors' in the
    # DRAM's order) would shift the bursts this test times
    sim = IsaSim(cfg, dram_bytes=dram, timing=Timing(fetch_cycles=0))
    assert sim.run({"sp": assemble(prog)}) is None
    ev = {e.stream: e for e in sim.timeline if e.op == "descriptor"}
    beats = -(-(4 + 1024) // W)                     # one row of 1024 bytes from lane 4
    dc = sim.timing.dma_desc_cycles
    lat = sim.timing.dram_latency
    a, b, c = ev["dma0.q0"], ev["dma1.q0"], ev["dma0.q1"]
    # check, AXI latency, burst, write; the next two dma_starts' descriptor reads (one at a
    # time after this one's) may take the R channel first
    assert 0 <= a.done - a.start - (dc + lat + beats + 1) <= 2 * (gdma.DESC_BYTES // W)
    # two descriptors in flight per engine (docs/dma.md §4.1): c is checked and its reads are
    # asked for while a's data moves; completions stay in order
    assert a.start < c.start < a.done < c.done
    assert b.start < a.done                                   # the other engine in parallel
    # ... but the engines share the AXI master's R channel: one burst at a time (b's, asked
    # for first); each ends one cycle before its descriptor is done
    bursts = sorted((e.done - 1 - beats, e.done - 1) for e in (a, b, c))
    assert all(x[1] <= y[0] for x, y in zip(bursts, bursts[1:]))
    assert b.done >= a.done + beats                          # (c's descriptor read may go first)
    assert c.done == max(c.start + dc + lat, b.done - 1) + beats + 1
    for i in range(3):
        assert bytes(sim.mem.sbuf[sbp * i + 4:sbp * i + 1028]) == bytes(
            dram[0x1000 + 0x400 * i + 4:0x1000 + 0x400 * i + 1028])


def test_fetch_bursts_and_fetch_depth():
    fc = INSTR_BYTES // CFG.sbuf_word_bytes                     # 16 beats of 8 bytes
    sim = IsaSim(CFG, timing=Timing(dram_latency=3))
    assert sim.run({"pe": assemble("nop\n" * 6)}) is None
    # fetch-bound: instruction i arrives when its burst ends
    assert [e.issue for e in sim.timeline] == [(i + 1) * fc + 3 for i in range(6)]
    # a blocked instruction holds the fetches fetch_depth (4) ahead of it
    sim = IsaSim(CFG, timing=Timing(dram_latency=3))
    prog = {"act": assemble("nop\n" * 20 + "nop post=s0+1"),
            "pe": assemble("nop wait=s0>=1\n" + "nop\n" * 6)}
    assert sim.run(prog) is None
    pe = [e.issue for e in sim.timeline if e.stream == "pe"]
    t = pe[0]                                                  # the wait released
    assert t > 20 * fc and pe[1:4] == [t + 1, t + 2, t + 3]   # 1..3 fetched while blocked
    assert pe[4] == t + 1 + 3 + fc and pe[5] == pe[4] + fc    # 4 asked for at t + 1


def test_descriptor_too_large_to_simulate_is_refused_clearly():
    dram = bytearray(DRAM_BYTES)
    huge = gdma.Descriptor(src=DATA_BASE, dst=0, dims=((1, 1, 1), (4096, 0, 0), (4096, 0, 0),
                                                        (2, 0, 0)), src_dtype=9, dst_dtype=9)
    dram[0:64] = huge.pack()
    with pytest.raises(NotImplementedError, match="more than the model simulates"):
        _run({"sp": "dma_start count=1 desc_addr=0"}, dram)


@pytest.mark.parametrize("seed", range(3))
def test_random_bytes_never_crash_the_simulator(seed):
    """Random instruction bytes (a tensor, vector, scalar or sync opcode, fields random, the
    reserved bytes often zero): the simulator reports a §11.2 code or runs; it never raises.
    (No tf32 operand on the scalar engine: golden.activation does not mask a 4-byte tf32
    element to its 19-bit code yet.)"""
    from golden.isasim import ERROR_NAMES
    rng = random.Random(seed)
    codes = [op.code for op in OPS_BY_CODE.values() if op.engine in (None, "pe", "dve", "act",
                                                                      "sp")]
    seen = set()
    for _ in range(300):
        raw = bytearray(rng.randbytes(INSTR_BYTES))
        raw[0] = rng.choice(codes)
        if rng.random() < 0.8:                              # mostly well-formed
            op = OPS_BY_CODE[raw[0]]
            raw[1] &= sum(1 << FLAG_BITS[f] for f in op.flags
                          if f == "acc" or rng.random() < 0.2)
            raw[10] &= 0x07
            raw[11:16] = bytes(5)
            for slot, base in AP_SLOTS.items():
                if slot not in op.aps:
                    raw[base:base + 24] = bytes(24)
                else:
                    ap = APEnc(mem=rng.choice([1, 1, 1, 2, 2, 0, 3]),
                               start=rng.choice([0, 0, 0, 1, 2]),
                               count=rng.choice([1, 2, 3, 4, 4, 4, 5]),
                               dtype=rng.choice([d for d in DTYPES + ("bf16",) * 4
                                                 if d != "tf32" or op.engine != "act"]),
                               offset=rng.choice([0, 0x40, 4 * rng.randrange(1024),
                                                  rng.randrange(1 << 13)]),
                               dims=tuple((rng.randint(-2, 2), rng.randint(0, 9))
                                          for _ in range(rng.randint(1, 2))))
                    raw[base:base + 24] = ap.word().to_bytes(24, "little")
            raw[2], raw[3] = rng.randrange(CFG.semaphores + 2), rng.randrange(CFG.semaphores + 2)
            raw[4:8] = bytes(4)
            w = int.from_bytes(raw[IMM_BYTE:], "little")
            w &= sum(((1 << f.width) - 1) << f.lsb for f in op.imm)
            if "count" in op.imm_fields:
                w &= ~(0xFFFF << op.imm_fields["count"].lsb) | (3 << op.imm_fields["count"].lsb)
            raw[IMM_BYTE:] = w.to_bytes(INSTR_BYTES - IMM_BYTE, "little")
        eng = OPS_BY_CODE[raw[0]].engine or "pool"
        ld = encode(Instr(op="load_stationary", aps={"ap1": parse_ap_text(
            "sbuf.bf16[0:4]@0x0{1x4}")}))
        sim = IsaSim(CFG, dram_bytes=rng.randbytes(DRAM_BYTES))
        try:
            err = sim.run({eng: (ld if eng == "pe" else b"") + bytes(raw)})
        except NotImplementedError as e:
            assert "more than the model simulates" in str(e)
            continue
        if err is not None:
            assert err.code in ERROR_NAMES, err
            seen.add(err.name)
        else:
            seen.add("ok")
    assert {"ok", "E_OPCODE", "E_SEM", "E_AP_PART", "E_AP_RANGE", "E_SHAPE",
            "E_FORMAT"} <= seen, seen


def parse_ap_text(text):
    from golden.asm import parse_ap
    return parse_ap(text)


@pytest.mark.parametrize("cols,race", [(16, False), (17, True)])
def test_race_detector_dram_byte_runs(cols, race):
    """Two unsynchronized stores (two queues) of column blocks of the same DRAM rows: the
    blocks interleave (their extents overlap), so only the byte runs tell whether they meet.
    Columns [0, 16) and [16, 32) of 4 rows do not; [0, 17) and [16, 32) share one bf16 per
    row."""
    dram = bytearray(DRAM_BYTES)
    d0 = gdma.Descriptor(src=0, dst=DATA_BASE, src_space=gdma.SBUF, dst_space=gdma.DRAM,
                         dims=((cols, 2, 2), (4, SBP, 64)), src_dtype=2, dst_dtype=2,
                         post=True, sem=3, inc=1)
    d1 = gdma.Descriptor(src=64, dst=DATA_BASE + 32, src_space=gdma.SBUF, dst_space=gdma.DRAM,
                         dims=((16, 2, 2), (4, SBP, 64)), src_dtype=2, dst_dtype=2,
                         post=True, sem=4, inc=1)
    dram[0:64], dram[64:128] = d0.pack(), d1.pack()
    sim, err, _ = _run({"sp": "dma_start queue=0 count=1 desc_addr=0\n"
                              "dma_start queue=1 count=1 desc_addr=64\n"}, dram)
    assert err is None
    races = find_races(sim)
    assert len(races) == (1 if race else 0), races
    if race:
        assert {races[0][0].stream, races[0][1].stream} == {"dma0.q0", "dma0.q1"}


@pytest.mark.parametrize("order", ["read_then_write", "write_then_read", "synced"])
def test_race_detector_single_pairs(order):
    """One PE read of SBUF tile 0 and one DMA write of it: a race exactly when unsynchronized,
    whichever comes first in the run."""
    dram = bytearray(DRAM_BYTES)
    dram[0:64] = _load_desc(0, 0, 3).pack()
    dma = "dma_start count=1 desc_addr=0"
    if order == "read_then_write":       # the read runs first (the DMA starts later)
        progs = {"pe": LS, "sp": "nop\n" * 3 + dma}
    elif order == "write_then_read":     # the read runs long after the write, unordered
        progs = {"pe": "nop\n" * 12 + LS, "sp": dma}
    else:
        progs = {"pe": "nop wait=s3>=1\n" + LS, "sp": dma}
    sim, err, _ = _run(progs, dram)
    assert err is None
    ls = [e for e in sim.timeline if e.op == "load_stationary"][0]
    desc = [e for e in sim.timeline if e.op == "descriptor"][0]
    assert (sim.timeline.index(ls) < sim.timeline.index(desc)) == (order == "read_then_write")
    races = find_races(sim)
    if order == "synced":
        assert races == []
    else:
        assert len(races) == 1 and {races[0][0].op, races[0][1].op} == {"load_stationary",
                                                                         "descriptor"}
