# SPDX-License-Identifier: Apache-2.0
"""The permute engine (rtl/collective/permute.py: all_to_all, send_recv) in amaranth.sim on
rings of 2 and 4 (small preset, tb/multicore/rig.py): random codes, every d, FP32 / BF16 /
FP8 (and a ring of one: a local copy, FP16), sizes that do not divide into partitions, against the golden multi-core simulator
(golden/collective/multicore.py, data by golden/collective/algos.py) bit for bit over each
rank's whole SBUF; every check with its code and ERR_INFO; a cut link -> E_LINK and nothing
written outside the destination. (All-to-all then all-reduce back to back, ACCL's failing
sequence, runs on the multi-core top: tests/test_multicore.py.)"""

import numpy as np
import pytest

from golden.asm import assemble
from golden.collective import algos
from golden.collective.multicore import MultiCoreSim
from golden.isasim import E_FORMAT, E_LINK, E_OPCODE, E_SHAPE
from rtl.collective.permute import PermuteEngine
from rtl.config import LINK_FAULTS, SMALL
from rtl.isa import E_AP_FORM, E_AP_RANGE
from tb.amsim import SimBench
from tb.multicore.program import dst_shape
from tb.multicore.rig import EngineRing, empty_image, run_engines

SRC, DST = 0x000, 0x400
_EB = {"fp32": 4, "bf16": 2, "fp16": 2}


def ap(off, dtype, parts, per, start=0):
    return f"sbuf.{dtype}[{start}:{start + parts}]@{off:#x}{{1x{per}}}"


_RIGS = {}


def rig_of(n, link_bits=None):
    """The ring of ``n`` small permute engines (``link_bits``: 128 for K = 4 slots a flit)."""
    if (n, link_bits) not in _RIGS:
        c = SMALL.replace(ring_size=n)
        rig = EngineRing(c if link_bits is None else c.replace(link_bits=link_bits),
                         engine=PermuteEngine)
        _RIGS[n, link_bits] = (rig, SimBench(rig))
    return _RIGS[n, link_bits]


def rand_images(rng, cfg, n):
    return [rng.integers(0, 256, (cfg.partitions, cfg.sbuf_bytes_per_partition), np.uint8)
            for _ in range(n)]


def fill(rng, img, dtype, parts, per, off=SRC):
    x = (rng.standard_normal(parts * per) * 4).astype(np.float32)
    codes = algos.encode(x, dtype).astype(np.uint32)
    eb = _EB.get(dtype, 1)
    by = ((codes[:, None] >> (8 * np.arange(eb, dtype=np.uint32))) & 0xFF).astype(np.uint8)
    img[:parts, off:off + per * eb] = by.reshape(parts, per * eb)


def golden(cfg, n, progs, images):
    m = MultiCoreSim(cfg, n, dram_bytes=4096)
    for r in range(n):
        m.cores[r].sbuf[...] = images[r]
    return m, m.run([{"cc": assemble(p)} for p in progs])


def check(bench, texts, images, seed, watchdog=2000):
    """Run ``texts[r]`` on rank r of the RTL ring and on the golden: status, ERR_INFO and
    every byte of every rank's SBUF equal. Returns the cycles."""
    rig, sb = bench
    m, errs = golden(rig.cfg, rig.n, texts, [i.copy() for i in images])
    st, inf, imgs, cyc = run_engines(sb, rig, [assemble(t) for t in texts], images,
                                     watchdog=watchdog)
    want = [(e.code, e.info) if e is not None else (0, 0) for e in errs]
    assert list(zip(st, inf)) == want, f"seed {seed}: {texts}"
    for r in range(rig.n):
        diff = np.nonzero(imgs[r] != m.cores[r].sbuf)
        assert diff[0].size == 0, (f"seed {seed} rank {r}: {diff[0].size} bytes differ, first "
                                   f"at partition {diff[0][0]} byte {diff[1][0]}: {texts[r]}")
    return cyc


def _texts(op, n, dtype, parts, per, d=0, stream=2, *, sstart=0, dstart=0, dper=None):
    dp, dq = dst_shape(op, 0, n, parts, per)
    if dper is not None:                     # the same size in free size dper
        dp, dq = dp * dq // dper, dper
    extra = f" d={d}" if op == "send_recv" else ""
    return [f"{op} ap0={ap(DST, dtype, dp, dq, dstart)} ap1={ap(SRC, dtype, parts, per, sstart)}"
            f" stream={stream}{extra}"] * n


# (n, op, dtype, partitions, elements per partition, d)
CASES = [(2, "all_to_all", "fp32", 3, 2, 0), (2, "all_to_all", "fp8_e4m3", 1, 14, 0),
         (2, "send_recv", "bf16", 3, 5, 0), (2, "send_recv", "fp32", 2, 7, 1),
         (4, "all_to_all", "fp32", 3, 4, 0), (4, "all_to_all", "bf16", 3, 8, 0),
         (4, "all_to_all", "fp8_e5m2", 2, 10, 0)] + [
    (4, "send_recv", dt, 3, 3, d) for d, dt in enumerate(("fp32", "bf16", "fp8_e4m3", "fp32"))
] + [(1, "all_to_all", "fp16", 2, 5, 0), (1, "send_recv", "fp8_e4m3", 3, 3, 0)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_permute_vs_golden(case):
    n, op, dtype, parts, per, d = case
    bench = rig_of(n)
    seed = sum(map(ord, "-".join(map(str, case))))
    rng = np.random.default_rng(seed)
    images = rand_images(rng, bench[0].cfg, n)
    for r in range(n):
        fill(rng, images[r], dtype, parts, per)
    check(bench, _texts(op, n, dtype, parts, per, d), images, seed)


# K slots a flit (link_bits 128: 4, 64: 2): (link_bits, n, op, dtype, partitions, per, d,
# source start, destination start, destination free size (None: the source's)); packed when
# every block is whole source rows and the destination has the source's free size (groups of 1
# to K rows; a block of 3 rows on K = 2 two groups), one element a flit otherwise (another
# destination free size; an all-to-all of 3 rows on 2 ranks)
PACKED_CASES = [(128, 4, "all_to_all", "fp32", 4, 6, 0, 0, 0, None),
                (128, 2, "all_to_all", "bf16", 4, 5, 0, 0, 0, None),
                (128, 2, "send_recv", "fp32", 3, 4, 1, 1, 0, None),
                (128, 4, "send_recv", "fp8_e4m3", 4, 9, 2, 0, 0, None),
                (128, 4, "send_recv", "fp32", 2, 5, 3, 0, 2, None),
                (128, 2, "all_to_all", "fp32", 2, 6, 0, 0, 1, 4),
                (128, 2, "all_to_all", "fp32", 3, 4, 0, 0, 0, None),
                (64, 2, "send_recv", "fp32", 3, 5, 1, 1, 0, None),
                (64, 2, "all_to_all", "fp16", 4, 3, 0, 0, 0, None)]


@pytest.mark.parametrize("case", PACKED_CASES, ids=lambda c: "-".join(map(str, c)))
def test_permute_packed_vs_golden(case):
    """K elements of K source rows a flit: every rank's SBUF bit for bit as the golden's."""
    lb, n, op, dtype, parts, per, d, s0, d0, dper = case
    bench = rig_of(n, lb)
    seed = sum(map(ord, "-".join(map(str, case))))
    rng = np.random.default_rng(seed)
    images = rand_images(rng, bench[0].cfg, n)
    for r in range(n):
        fill(rng, images[r], dtype, s0 + parts, per)
    check(bench, _texts(op, n, dtype, parts, per, d, sstart=s0, dstart=d0, dper=dper or per),
          images, seed)


@pytest.mark.parametrize("text,code,info", [
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4} op=1", E_OPCODE, 0),
    ("send_recv ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4} d=4", E_SHAPE, 0),
    ("send_recv ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.e8m0[0:2]@0x0{1x4} d=4", E_SHAPE, 0),
    ("send_recv ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.e8m0[0:2]@0x0{1x4} d=1", E_FORMAT, 1),
    ("all_to_all ap0=sbuf.tf32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4}", E_FORMAT, 0),
    ("all_to_all ap0=sbuf.bf16[0:1]@0x400{1x8} ap1=sbuf.fp16[0:2]@0x0{1x4}", E_FORMAT, 0),
    ("all_to_all ap0=sbuf.fp32[0:1]@0xffc{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4}", E_AP_RANGE, 0),
    ("send_recv ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0xff8{1x4} d=1",
     E_AP_RANGE, 1),
    ("all_to_all ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x2,4x2}", E_AP_FORM, 1),
    ("all_to_all ap0=sbuf.fp32[0:1]@0x400{1x6} ap1=sbuf.fp32[0:2]@0x0{1x3}", E_SHAPE, 0),
    ("all_to_all ap0=sbuf.fp32[0:1]@0x400{1x7} ap1=sbuf.fp32[0:2]@0x0{1x4}", E_SHAPE, 0),
    ("send_recv ap0=sbuf.fp32[0:1]@0x400{1x9} ap1=sbuf.fp32[0:2]@0x0{1x4} d=2", E_SHAPE, 0),
])
def test_permute_checks(text, code, info):
    """Every rank of a ring of 4 rejects its own instruction with the golden's code and
    ERR_INFO (the 2-D AP: the engine's documented E_AP_FORM), and writes nothing."""
    rig, sb = rig_of(4)
    imgs0 = [empty_image(rig.cfg)] * 4
    if code not in (E_AP_FORM, E_OPCODE):          # the engine's own: a2a/send_recv only
        m, errs = golden(rig.cfg, 4, [text] * 4, [i.copy() for i in imgs0])
        assert [(e.code, e.info) for e in errs] == [(code, info)] * 4
    st, inf, imgs, _ = run_engines(sb, rig, [assemble(text)] * 4, imgs0, watchdog=500)
    assert st == [code] * 4 and inf == [info] * 4
    assert all(not i.any() for i in imgs)


@pytest.mark.parametrize("link_bits", [None, 128], ids=["k1", "packed"])
def test_permute_disagreeing_sizes(link_bits):
    """Rank 1's all_to_all has blocks of 3 where rank 0's have 2 (packed: 2 rows of 4 and of
    6, blocks of 4 and 6 flits): a flit that ends its block early or late -> E_SHAPE (ERR_INFO
    the sender) or E_LINK; never a hang, and nothing is written outside either destination."""
    rig, sb = rig_of(2, link_bits)
    rng = np.random.default_rng(3)
    images = rand_images(rng, rig.cfg, 2)
    rows, per = (2, (4, 6)) if link_bits else (1, (4, 6))
    texts = [f"all_to_all ap0={ap(DST, 'fp32', rows, q)} ap1={ap(SRC, 'fp32', rows, q)}"
             for q in per]
    st, inf, imgs, _ = run_engines(sb, rig, [assemble(t) for t in texts], images, watchdog=300)
    assert E_SHAPE in st and all(s in (E_SHAPE, E_LINK) for s in st), (st, inf)
    for r, size in ((0, 4 * per[0]), (1, 4 * per[1])):
        outside = imgs[r].copy()
        outside[:rows, DST:DST + size] = images[r][:rows, DST:DST + size]
        assert np.array_equal(outside, images[r])


@pytest.mark.parametrize("op", ["all_to_all", "send_recv"])
@pytest.mark.parametrize("link_bits", [None, 128], ids=["k1", "packed"])
def test_permute_cut_link(op, link_bits):
    """Link 0 -> 1 of a ring of 4 cut from the start: every rank that waits for a flit ends
    with E_LINK within the watchdog, the others complete, and nothing is written outside the
    destination (one element a flit, and packed: K = 4, the destination 4 rows of 16)."""
    rig, sb = rig_of(4, link_bits)
    rng = np.random.default_rng(5)
    images = rand_images(rng, rig.cfg, 4)
    texts = _texts(op, 4, "fp32", 4, 16, d=1, dper=16 if link_bits else None)
    rows, nbytes = (4, 64) if link_bits else (1, 256)
    st, inf, imgs, _ = run_engines(sb, rig, [assemble(t) for t in texts], images, watchdog=100,
                                   cut=0)
    # all_to_all: every rank receives through link 0 -> 1 or from a rank behind it;
    # send_recv d=1: rank 1 waits for rank 0 (silent), rank 0's TX times out
    waiting = range(4) if op == "all_to_all" else (0, 1)
    for r in range(4):
        if r in waiting:
            assert st[r] == E_LINK, (st, inf)
            assert inf[r] in (LINK_FAULTS["silent"], LINK_FAULTS["credit_timeout"])
        else:
            assert st[r] == 0, (st, inf)
        outside = imgs[r].copy()
        outside[:rows, DST:DST + nbytes] = images[r][:rows, DST:DST + nbytes]
        assert np.array_equal(outside, images[r])


@pytest.mark.full
@pytest.mark.parametrize("op,d", [("all_to_all", 0), ("send_recv", 1), ("send_recv", 3)])
def test_permute_1kib_cycles(op, d, record_property):
    """1 KiB of FP32 per rank (4 partitions x 64) on the ring of 4: bit-exact, and the cycles
    from issue to the last status (docs/collectives.md §14.6)."""
    bench = rig_of(4)
    rng = np.random.default_rng(12)
    images = rand_images(rng, bench[0].cfg, 4)
    for r in range(4):
        fill(rng, images[r], "fp32", 4, 64)
    cyc = check(bench, _texts(op, 4, "fp32", 4, 64, d), images, 12)
    name = "alltoall_1kib_cycles" if op == "all_to_all" else f"sendrecv_d{d}_1kib_cycles"
    record_property(name, cyc)
    print(f"{name} {cyc}")
    # flits on each link: all-to-all 6 blocks of 64, send/recv d messages of 256
    load = 6 * 64 if op == "all_to_all" else 256 * d
    assert load < cyc < 3 * load + 200


@pytest.mark.full
def test_permute_ring_verilator_default(seed):
    """The Verilator ring of 4 default permute engines (tb/multicore/harness.py, ``engine=
    "permute"``): a 4 KiB FP32 all-to-all and send/recv (d = 1) per rank, packed (16 rows of 64,
    4 elements a flit), every rank's SBUF bit for bit equal to MultiCoreSim's
    (run_engine_ring); the cycles between the busiest link's flits at one a cycle (all-to-all
    6 blocks of 64 flits, send/recv 256 flits) and twice that plus 200."""
    from rtl.config import DEFAULT
    from tb.multicore.build import engine_ring_sim, run_engine_ring
    cases = [{"op": "all_to_all", "size": 4 << 10, "layout": "split"},
             {"op": "send_recv", "size": 4 << 10, "layout": "split", "d": 1}]
    rows, _ = run_engine_ring(DEFAULT, cases, seed=seed,
                              sim=engine_ring_sim(DEFAULT, engine="permute"))
    for row, load in zip(rows, (6 * 64, 256)):
        assert load < row["cycles"] < 2 * load + 200, (seed, row)
