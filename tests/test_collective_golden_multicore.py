# SPDX-License-Identifier: Apache-2.0
"""The CC queue's collective instructions in the golden ISA simulator
(golden/isasim/collective_engine.py) and the multi-core golden simulator
(golden/collective/multicore.py).

Binary programs are assembled per rank and run on 1, 2, 4, 8 and 64 ranks. References: the
direct results of golden/collective/algos.py, and independent ones (numpy concatenation and
block shuffles for the moves; exact Fraction sums of values whose FP32 partial sums are exact,
rounded once with ml_dtypes, for the reductions). Expected error codes come from
docs/collectives.md §12 and docs/architecture.md §11.2.
"""

import random
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from golden.asm import assemble, parse_ap
from golden.collective import algos
from golden.collective.multicore import MultiCoreSim
from golden.collective.perf import estimate
from golden.isasim import E_FORMAT, E_LINK, E_OPCODE, E_SHAPE, IsaSim, Timing
from rtl.config import LINK_FAULTS, SMALL
from rtl.isa import CC_OPCODES, ENGINES, OPS_BY_CODE, check_reserved, decode

CFG = SMALL
DRAM = 4096
SRC, DST = 0x000, 0x200          # byte offsets in each partition
SYNC = Timing().sync_cycles     # the sequencer's cycles beyond the estimate


def ap(off, dtype, parts, per):
    return f"sbuf.{dtype}[0:{parts}]@{off:#x}{{1x{per}}}"


def instr(op, dtype, parts, per, *, dparts=None, dper=None, ddtype=None, extra=""):
    return (f"{op} ap0={ap(DST, ddtype or dtype, dparts or parts, dper or per)} "
            f"ap1={ap(SRC, dtype, parts, per)} {extra}")


def put(sim, text, codes):
    a = sim.check_ap(parse_ap(text), "ap1")
    sim.write_ap(a, np.asarray(codes, np.uint32).reshape(a.num_partitions, -1))


def get(sim, text):
    return sim.read_ap(sim.check_ap(parse_ap(text), "ap0")).reshape(-1)


def rand_codes(rng, dtype, size):
    x = rng.standard_normal(size).astype(np.float32)
    return algos.encode(x, dtype)


def run_ranks(n, lines, data, *, policies=None, watchdog=None, extra_progs=None):
    """``lines[r]``: rank r's CC program text; ``data[r]``: (AP text, codes) to preload."""
    m = MultiCoreSim(CFG, n, dram_bytes=DRAM)
    for r in range(n):
        for text, codes in data[r]:
            put(m.cores[r], text, codes)
    progs = [{"cc": assemble(lines[r]), **(extra_progs[r] if extra_progs else {})}
             for r in range(n)]
    errs = m.run(progs, policies=policies, watchdog=watchdog)
    return m, errs


# ---- the ISA ------------------------------------------------------------------------------

def test_cc_opcodes_encode_and_belong_to_cc():
    names = [OPS_BY_CODE[c].name for c in CC_OPCODES]
    assert names == ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv"]
    assert [OPS_BY_CODE[c].code for c in CC_OPCODES] == [0x60, 0x61, 0x62, 0x63, 0x64]
    raw = assemble("send_recv ap0=sbuf.bf16[0:2]@0x0{1x4} ap1=sbuf.bf16[0:2]@0x40{1x4} "
                   "stream=15 d=3 wait=s1>=2 post=s2+1")
    ins = decode(raw)
    assert (ins.imm, ins.wait, ins.post) == ({"stream": 15, "d": 3}, (1, 2), (2, 1))
    assert check_reserved(raw, "cc") is None
    for e in ENGINES:
        if e != "cc":    # the engines the RTL core builds reject them as foreign
            assert check_reserved(raw, e)[0] == E_OPCODE
    with pytest.raises(ValueError, match="stream"):
        assemble("all_gather ap0=sbuf.fp32[0:1]@0x0{1x4} ap1=sbuf.fp32[0:1]@0x40{1x4} "
                 "stream=16")
    with pytest.raises(ValueError, match="immediates"):
        assemble("all_gather ap0=sbuf.fp32[0:1]@0x0{1x4} ap1=sbuf.fp32[0:1]@0x40{1x4} op=1")


# ---- one simulator, no ring ---------------------------------------------------------------

def test_single_sim_all_reduce_is_one_rounding(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(32).astype(np.float32)
    sim = IsaSim(CFG, dram_bytes=DRAM)
    put(sim, ap(SRC, "fp32", 4, 8), x.view(np.uint32))
    prog = assemble(instr("all_reduce", "fp32", 4, 8, ddtype="bf16", extra="op=1 post=s0+1"))
    assert sim.run({"cc": prog}) is None
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)      # RNE, independent of golden
    assert (get(sim, ap(DST, "bf16", 4, 8)) == want).all()
    assert sim.sems[0] == 1 and sim.timeline[-1].op == "all_reduce"


@pytest.mark.parametrize("op", ["all_gather", "all_to_all", "send_recv", "reduce_scatter"])
def test_single_sim_moves_copy(op, seed):
    rng = np.random.default_rng(seed)
    c = rand_codes(rng, "fp16", 16)
    sim = IsaSim(CFG, dram_bytes=DRAM)
    put(sim, ap(SRC, "fp16", 2, 8), c)
    extra = "op=4" if op == "reduce_scatter" else ""
    assert sim.run({"cc": assemble(instr(op, "fp16", 2, 8, extra=extra))}) is None
    assert (get(sim, ap(DST, "fp16", 2, 8)) == c).all()


@pytest.mark.parametrize("line,code", [
    (instr("all_reduce", "fp32", 1, 4, extra="op=3"), E_OPCODE),          # multiply
    (instr("send_recv", "fp32", 1, 4, extra="d=1"), E_SHAPE),              # d >= n = 1
    (instr("all_reduce", "fp8_e4m3", 1, 4, extra="op=1"), E_FORMAT),       # FP8 reduction
    (instr("all_reduce", "tf32", 1, 4, extra="op=1"), E_FORMAT),
    (instr("all_gather", "fp32", 1, 4, ddtype="bf16"), E_FORMAT),          # a move casts
    (instr("all_reduce", "fp32", 1, 4, dper=5, extra="op=1"), E_SHAPE),
])
def test_single_sim_bad_input(line, code):
    sim = IsaSim(CFG, dram_bytes=DRAM)
    before = sim.sbuf.copy()
    err = sim.run({"cc": assemble(line)})
    assert err is not None and err.code == code and err.source == "cc", err
    assert (sim.sbuf == before).all()


# ---- many ranks ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 4, 8, 64])
def test_all_reduce_ranks(n, seed):
    rng = np.random.default_rng(seed)
    parts, per = 2, 8
    data = [rand_codes(rng, "bf16", parts * per) for _ in range(n)]
    line = instr("all_reduce", "bf16", parts, per, extra="op=1 stream=2")
    m, errs = run_ranks(n, [line] * n, [[(ap(SRC, "bf16", parts, per), d)] for d in data])
    assert errs == [None] * n
    want = algos.all_reduce(data, "bf16", "add").outputs[0]
    for c in m.cores:
        assert (get(c, ap(DST, "bf16", parts, per)) == want).all()
    (col,) = m.collectives
    est = estimate("all_reduce", n, parts * per, "bf16", CFG)
    assert col["cycles"] == est.cycles and col["done"] == col["start"] + est.cycles + SYNC
    for c in m.cores:           # every rank charges the same span
        ev = [e for e in c.timeline if e.op == "all_reduce"][0]
        assert (ev.start, ev.done) == (col["start"], col["done"])


def test_all_reduce_against_fractions(seed):
    """Dyadic values with FP32-exact partial sums: the result is the exact sum rounded once
    (RNE) into BF16 and FP16, whatever the order; max/min against numpy."""
    rng = np.random.default_rng(seed)
    n, parts, per = 4, 2, 4
    ints = [rng.integers(-2 ** 12, 2 ** 12, parts * per) for _ in range(n)]
    data = [np.float32(x * 2.0 ** -3).view(np.uint32) for x in ints]
    for ddt, npt in (("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)):
        line = instr("all_reduce", "fp32", parts, per, ddtype=ddt, extra="op=1")
        m, errs = run_ranks(n, [line] * n, [[(ap(SRC, "fp32", parts, per), d)] for d in data])
        assert errs == [None] * n
        exact = [sum(Fraction(int(x[k])) / 8 for x in ints) for k in range(parts * per)]
        want = np.array([float(e) for e in exact], np.float32).astype(npt).view(np.uint16)
        for c in m.cores:
            assert (get(c, ap(DST, ddt, parts, per)) == want).all()
    for opc, fn in ((4, np.maximum), (5, np.minimum)):
        line = instr("all_reduce", "fp32", parts, per, extra=f"op={opc}")
        m, errs = run_ranks(n, [line] * n, [[(ap(SRC, "fp32", parts, per), d)] for d in data])
        want = fn.reduce([d.view(np.float32) for d in data]).view(np.uint32)
        assert errs == [None] * n and all((get(c, ap(DST, "fp32", parts, per)) == want).all()
                                          for c in m.cores)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_moves_and_reduce_scatter(n, seed):
    rng = np.random.default_rng(seed)
    parts, per = 1, 2 * n                     # 2n elements: n blocks of 2
    data = [rand_codes(rng, "fp8_e4m3", parts * per) for _ in range(n)]
    pre = [[(ap(SRC, "fp8_e4m3", parts, per), d)] for d in data]
    # all_gather: every rank holds the concatenation in rank order
    m, errs = run_ranks(n, [instr("all_gather", "fp8_e4m3", 1, per, dper=n * per)] * n, pre)
    assert errs == [None] * n
    for c in m.cores:
        assert (get(c, ap(DST, "fp8_e4m3", 1, n * per)) == np.concatenate(data)).all()
    # all_to_all: block j of rank i lands at block i of rank j
    m, errs = run_ranks(n, [instr("all_to_all", "fp8_e4m3", 1, per)] * n, pre)
    assert errs == [None] * n
    for j, c in enumerate(m.cores):
        want = np.concatenate([data[i][2 * j:2 * j + 2] for i in range(n)])
        assert (get(c, ap(DST, "fp8_e4m3", 1, per)) == want).all()
    # send_recv d: rank r receives rank r - d's buffer
    for d in (0, 1, n - 1):
        m, errs = run_ranks(n, [instr("send_recv", "fp8_e4m3", 1, per, extra=f"d={d}")] * n, pre)
        assert errs == [None] * n
        for r, c in enumerate(m.cores):
            assert (get(c, ap(DST, "fp8_e4m3", 1, per)) == data[(r - d) % n]).all()
    # reduce_scatter of 2n + 1 elements (uneven chunks): rank r's chunk of algos' result
    fdata = [rand_codes(rng, "fp32", 2 * n + 1) for _ in range(n)]
    want = algos.reduce_scatter(fdata, "fp32", "add", out_dtype="fp16").outputs
    lines = [instr("reduce_scatter", "fp32", 1, 2 * n + 1, ddtype="fp16", dper=len(want[r]),
                   extra="op=1") for r in range(n)]
    m, errs = run_ranks(n, lines, [[(ap(SRC, "fp32", 1, 2 * n + 1), d)] for d in fdata])
    assert errs == [None] * n
    for r, c in enumerate(m.cores):
        assert (get(c, ap(DST, "fp16", 1, len(want[r]))) == want[r]).all()


def test_determinism_across_issue_orders(seed):
    """Two streams, ranks delayed differently and scheduled at random: identical bytes."""
    rng = np.random.default_rng(seed)
    n, per = 4, 8
    data = [rand_codes(rng, "fp32", per) for _ in range(n)]
    pre = [[(ap(SRC, "fp32", 1, per), d)] for d in data]
    base = (instr("all_reduce", "fp32", 1, per, extra="op=1 stream=1") + "\n"
            + f"all_gather ap0={ap(0x400, 'fp32', 1, n * per)} ap1={ap(DST, 'fp32', 1, per)} "
              "stream=7\n")
    ref, errs = run_ranks(n, [base] * n, pre)
    assert errs == [None] * n
    ref_bytes = [c.sbuf[:, DST:].tobytes() for c in ref.cores]      # the outputs
    assert len(set(ref_bytes)) == 1 and any(ref_bytes[0])
    py = random.Random(seed)
    for trial in range(3):
        lines = ["nop\n" * py.randrange(6) + base for _ in range(n)]
        pol = [random.Random(py.randrange(1 << 30)) for _ in range(n)]
        m, errs = run_ranks(n, lines, pre, policies=pol)
        assert errs == [None] * n, (seed, trial)
        assert [c.sbuf[:, DST:].tobytes() for c in m.cores] == ref_bytes, (seed, trial)


def test_semaphores_order_compute_after_collective(seed):
    """A vector copy waits on the collective's post and sees its result."""
    rng = np.random.default_rng(seed)
    n, per = 2, 8
    data = [rand_codes(rng, "fp32", per) for _ in range(n)]
    line = instr("all_reduce", "fp32", 1, per, extra="op=1 post=s3+1")
    dve = {"dve": assemble(f"tensor_copy ap0={ap(0x600, 'fp32', 1, per)} "
                           f"ap1={ap(DST, 'fp32', 1, per)} wait=s3>=1")}
    m, errs = run_ranks(n, [line] * n, [[(ap(SRC, "fp32", 1, per), d)] for d in data],
                        extra_progs=[dve] * n)
    assert errs == [None] * n
    want = algos.all_reduce(data, "fp32").outputs[0]
    for c in m.cores:
        assert (get(c, ap(0x600, "fp32", 1, per)) == want).all()
        cc = [e for e in c.timeline if e.op == "all_reduce"][0]
        cp = [e for e in c.timeline if e.op == "tensor_copy"][0]
        assert cp.issue > cc.done


# ---- ranks that disagree, or never arrive ---------------------------------------------------

GOOD = instr("all_reduce", "fp32", 1, 8, extra="op=1")


@pytest.mark.parametrize("other,code", [
    (instr("all_gather", "fp32", 1, 8, dper=32), E_OPCODE),
    (instr("all_reduce", "fp32", 1, 8, extra="op=4"), E_OPCODE),
    (instr("all_reduce", "bf16", 1, 8, ddtype="fp32", extra="op=1"), E_FORMAT),
    (instr("all_reduce", "fp32", 1, 8, ddtype="bf16", extra="op=1"), E_FORMAT),
    (instr("all_reduce", "fp32", 2, 4, extra="op=1"), None),       # same size, other shape
    (instr("all_reduce", "fp32", 1, 4, extra="op=1"), E_SHAPE),
])
def test_ranks_disagree(other, code, seed):
    rng = np.random.default_rng(seed)
    n = 4
    lines = [GOOD] * n
    lines[2] = other
    pre = [[(ap(SRC, "fp32", 2, 8), rand_codes(rng, "fp32", 16))] for _ in range(n)]
    m, errs = run_ranks(n, lines, pre)
    if code is None:
        assert errs == [None] * n
        return
    assert [e.code for e in errs] == [code] * n, errs
    assert all(e.source == "cc" and e.info == 2 for e in errs)
    for c in m.cores:                          # nothing written
        assert not get(c, ap(DST, "fp32", 2, 16)).any()


def test_missing_rank_times_out():
    n = 4
    lines = [GOOD] * n
    lines[1] = "nop"
    m, errs = run_ranks(n, lines, [[]] * n)
    assert errs[1] is None
    for r in (0, 2, 3):
        assert (errs[r].code, errs[r].info) == (E_LINK, LINK_FAULTS["silent"]), errs[r]


def test_local_reject_leaves_peers_waiting():
    n = 2
    lines = [GOOD, instr("all_reduce", "fp32", 1, 8, extra="op=3")]
    _m, errs = run_ranks(n, lines, [[]] * n)
    assert errs[1].code == E_OPCODE and errs[0].code == E_LINK


def test_streams_in_opposite_order_deadlock_to_link_error():
    a = instr("all_reduce", "fp32", 1, 8, extra="op=1 stream=0")
    b = instr("all_reduce", "fp32", 1, 8, extra="op=1 stream=1")
    _m, errs = run_ranks(2, [a + "\n" + b, b + "\n" + a], [[]] * 2)
    assert [e.code for e in errs] == [E_LINK, E_LINK]


def test_watchdog_bounds_a_late_rank():
    n = 2
    late = "nop\n" * 12 + GOOD
    _m, errs = run_ranks(n, [GOOD, late], [[]] * n, watchdog=4)
    assert [(e.code, e.info) for e in errs] == [(E_LINK, LINK_FAULTS["silent"])] * n
    _m, errs = run_ranks(n, [GOOD, late], [[]] * n, watchdog=0)     # off: no limit
    assert errs == [None] * n


@pytest.mark.parametrize("line", [
    instr("send_recv", "fp32", 1, 8, extra="d=4"),
    instr("all_to_all", "fp32", 1, 6),
    instr("all_gather", "fp32", 1, 8, dper=8),
    instr("reduce_scatter", "fp32", 1, 8, dper=8, extra="op=1"),
])
def test_ring_shape_errors(line):
    n = 4
    _m, errs = run_ranks(n, [line] * n, [[]] * n)
    assert [e.code for e in errs] == [E_SHAPE] * n


def test_bad_arguments():
    with pytest.raises(ValueError, match="n must be in"):
        MultiCoreSim(CFG, 0)
    m = MultiCoreSim(CFG, 2, dram_bytes=DRAM)
    with pytest.raises(ValueError, match="programs must be a list of 2"):
        m.run([{}])
    with pytest.raises(ValueError, match="watchdog"):
        m.run([{}, {}], watchdog=-1)


def test_collective_starts_at_the_latest_rank():
    """A rank delayed by nops sets the start of every rank's collective (its issue cycle)."""
    n = 4
    lines = [GOOD] * n
    lines[3] = "nop\n" * 9 + GOOD
    m, errs = run_ranks(n, lines, [[]] * n)
    assert errs == [None] * n
    issues = [[e for e in c.timeline if e.op == "all_reduce"][0].issue for c in m.cores]
    assert issues[3] > max(issues[:3])
    (col,) = m.collectives
    assert col["start"] == issues[3]
    assert col["done"] == issues[3] + estimate("all_reduce", n, 8, "fp32", CFG).cycles + SYNC
