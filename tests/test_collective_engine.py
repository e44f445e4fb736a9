# SPDX-License-Identifier: Apache-2.0
"""The collective engine (rtl/collective/engine.py) in amaranth.sim on a ring of 2 (small
preset): random data, each built operation, against the golden multi-core simulator
(golden/collective/multicore.py, data by golden/collective/algos.py) bit for bit over the whole
SBUF; the checks and their codes; a cut link -> E_LINK on every rank."""

import zlib

import numpy as np
import pytest

from golden.asm import assemble
from golden.collective import algos
from golden.collective.multicore import MultiCoreSim
from golden.isasim import E_FORMAT, E_LINK, E_OPCODE, E_SHAPE
from rtl.config import LINK_FAULTS, SMALL
from rtl.isa import E_AP_FORM, E_AP_RANGE
from tb.amsim import SimBench
from tb.multicore.program import dst_shape
from tb.multicore.rig import EngineRing, run_engines

CFG = SMALL
SRC, DST = 0x000, 0x400


def ap(off, dtype, parts, per, start=0, step=1):
    s = f"{step}x{per}" if step != 1 else f"1x{per}"
    return f"sbuf.{dtype}[{start}:{start + parts}]@{off:#x}{{{s}}}"


@pytest.fixture(scope="module")
def bench():
    rig = EngineRing(CFG)
    return rig, SimBench(rig)


def golden_run(n, texts, images, cfg=CFG):
    m = MultiCoreSim(cfg, n, dram_bytes=4096)
    for r in range(n):
        m.cores[r].sbuf[...] = images[r]
    errs = m.run([{"cc": assemble(t)} for t in texts])
    return m, errs


def rand_images(rng, n):
    return [rng.integers(0, 256, (CFG.partitions, CFG.sbuf_bytes_per_partition), np.uint8)
            for _ in range(n)]


def fill(rng, img, dtype, parts, per, start=0, off=SRC, special=True):
    """Random finite codes (some specials) of ``dtype`` into ``img`` at ``off``."""
    x = rng.standard_normal(parts * per).astype(np.float32) * np.float32(4.0)
    if special and x.size > 8:
        k = rng.integers(0, x.size, 4)
        x[k] = np.array([0.0, -0.0, np.inf, np.nan], np.float32)[rng.integers(0, 4, 4)]
    codes = algos.encode(x, dtype).astype(np.uint32)
    eb = {"fp32": 4, "bf16": 2, "fp16": 2}.get(dtype, 1)
    by = ((codes[:, None] >> (8 * np.arange(eb, dtype=np.uint32))) & 0xFF).astype(np.uint8)
    img[start:start + parts, off:off + per * eb] = by.reshape(parts, per * eb)


def check(bench, texts, images, seed):
    return check_cfg(bench, texts, images, seed)


def check_cfg(bench, texts, images, seed):
    rig, sb = bench
    n = rig.n
    m, errs = golden_run(n, texts, [i.copy() for i in images], rig.cfg)
    st, inf, imgs, cyc = run_engines(sb, rig, [assemble(t) for t in texts], images,
                                     watchdog=2000)
    want = [(e.code, e.info) if e is not None else (0, 0) for e in errs]
    assert list(zip(st, inf)) == want, f"seed {seed}: {texts}"
    for r in range(n):
        diff = np.nonzero(imgs[r] != m.cores[r].sbuf)
        assert diff[0].size == 0, (f"seed {seed} rank {r}: {diff[0].size} bytes differ, first "
                                   f"at partition {diff[0][0]} byte {diff[1][0]}: {texts[r]}")
    return cyc


CASES = [
    ("all_reduce", "fp32", "fp32", 1, 4, 5),
    ("all_reduce", "bf16", "bf16", 4, 4, 9),
    ("all_reduce", "fp16", "fp32", 5, 3, 7),
    ("all_reduce", "fp32", "bf16", 1, 2, 30),
    ("reduce_scatter", "fp32", "fp32", 1, 4, 7),
    ("reduce_scatter", "bf16", "fp16", 5, 3, 5),
    ("all_gather", "fp32", "fp32", None, 4, 6),
    ("all_gather", "fp8_e4m3", "fp8_e4m3", None, 3, 5),
    ("all_gather", "bf16", "bf16", None, 2, 17),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-op{c[3]}")
def test_engine_vs_golden(bench, case):
    op, sdt, ddt, red, parts, per = case
    n = bench[0].n
    seed = hash(case) & 0xFFFF
    rng = np.random.default_rng(seed)
    images = rand_images(rng, n)
    texts = []
    for r in range(n):
        fill(rng, images[r], sdt, parts, per)
        dparts, dper = dst_shape(op, r, n, parts, per)
        extra = f" op={red}" if red is not None else ""
        texts.append(f"{op} ap0={ap(DST, ddt, dparts, dper)} ap1={ap(SRC, sdt, parts, per)}"
                     f"{extra} stream=3")
    check(bench, texts, images, seed)


@pytest.mark.parametrize("text,code,info", [
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4} op=2", E_OPCODE, 0),
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp8_e4m3[0:2]@0x0{1x4} op=1",
     E_FORMAT, 1),
    ("all_gather ap0=sbuf.bf16[0:1]@0x400{1x8} ap1=sbuf.fp16[0:2]@0x0{1x2}", E_FORMAT, 0),
    ("all_reduce ap0=sbuf.fp32[0:1]@0xffc{1x8} ap1=sbuf.fp32[0:2]@0x0{1x4} op=1",
     E_AP_RANGE, 0),
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0xff8{1x4} op=1",
     E_AP_RANGE, 1),
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x7} ap1=sbuf.fp32[0:2]@0x0{1x4} op=1", E_SHAPE, 0),
    ("all_reduce ap0=sbuf.fp32[0:1]@0x400{1x8} ap1=sbuf.fp32[0:2]@0x0{1x2,4x2} op=1",
     E_AP_FORM, 1),
])
def test_engine_checks(bench, text, code, info):
    """Every rank rejects its own instruction with the golden's code (the last two: the
    golden's E_SHAPE, and the engine's documented E_AP_FORM for a 2-D AP)."""
    rig, sb = bench
    n = rig.n
    st, inf, _, _ = run_engines(sb, rig, [assemble(text)] * n,
                                [np.zeros((CFG.partitions, CFG.sbuf_bytes_per_partition),
                                          np.uint8)] * n, watchdog=500)
    assert st == [code] * n and inf == [info] * n


def test_engine_not_built_ops(bench):
    from rtl.collective.engine import INFO_NOT_BUILT
    rig, sb = bench
    text = "send_recv ap0=sbuf.fp32[0:1]@0x400{1x4} ap1=sbuf.fp32[0:1]@0x0{1x4} d=1"
    st, inf, _, _ = run_engines(sb, rig, [assemble(text)] * rig.n,
                                [np.zeros((CFG.partitions, CFG.sbuf_bytes_per_partition),
                                          np.uint8)] * rig.n)
    assert st == [E_OPCODE] * rig.n and inf == [INFO_NOT_BUILT] * rig.n


def test_engine_cut_link(bench):
    """Link 0 -> 1 cut mid-collective: every rank ends with E_LINK within the watchdog, and
    nothing is written outside the destination."""
    rig, sb = bench
    n = rig.n
    rng = np.random.default_rng(7)
    images = rand_images(rng, n)
    text = f"all_reduce ap0={ap(DST, 'fp32', 1, 64)} ap1={ap(SRC, 'fp32', 4, 16)} op=1"
    st, inf, imgs, cyc = run_engines(sb, rig, [assemble(text)] * n, images, watchdog=100,
                                     cut=0)
    assert st == [E_LINK] * n, (st, inf)
    assert all(i in (LINK_FAULTS["silent"], LINK_FAULTS["credit_timeout"]) for i in inf)
    for r in range(n):
        outside = imgs[r].copy()
        outside[0, DST:DST + 256] = images[r][0, DST:DST + 256]
        assert np.array_equal(outside, images[r])


@pytest.mark.full
def test_allreduce_4kib_cycles(bench, record_property):
    """4 KiB of FP32 per core (4 partitions x 256), all-reduce add on the ring of 2: bit-exact,
    and the cycles from issue to the last status (reported as ``allreduce_4kib_cycles``)."""
    rig, sb = bench
    n = rig.n
    rng = np.random.default_rng(11)
    images = rand_images(rng, n)
    for r in range(n):
        fill(rng, images[r], "fp32", 4, 256, special=False)
    text = (f"all_reduce ap0={ap(0x800, 'fp32', 4, 256)} ap1={ap(SRC, 'fp32', 4, 256)} op=1")
    cyc = check(bench, [text] * n, images, 11)
    record_property("allreduce_4kib_cycles", cyc)
    print(f"allreduce_4kib_cycles {cyc}")
    # per segment of seg flits: 2n - 2 sending phases (the receive-only phase runs beside the
    # next segment's first), each at least seg cycles and at least the wait for the upstream
    # rank's result of the previous phase (latency + a hop) (docs/collectives.md §14.4)
    sig = rig.eng[0].signature
    seg = sig.seg
    segs = -(-1024 // n // seg)
    wait = sig.latency + CFG.link_latency + 4
    assert cyc < segs * (2 * n - 2) * max(seg, wait) + 200


def _cases_on(n, seed):
    rng = np.random.default_rng(seed)
    rig = EngineRing(CFG.replace(ring_size=n))
    bench = (rig, SimBench(rig))
    for k, (op, sdt, ddt, red, parts, per) in enumerate(CASES):
        images = rand_images(rng, n)
        texts = []
        for r in range(n):
            fill(rng, images[r], sdt, parts, per)
            dparts, dper = dst_shape(op, r, n, parts, per)
            if dper == 0:
                break
            extra = f" op={red}" if red is not None else ""
            texts.append(f"{op} ap0={ap(DST, ddt, dparts, dper)} "
                         f"ap1={ap(SRC, sdt, parts, per)}{extra} stream={k}")
        if len(texts) == n:
            check(bench, texts, images, seed * 100 + k)


@pytest.mark.full
@pytest.mark.parametrize("n", [1, 4])
def test_engine_rings_of_1_and_4(n, seed):
    """Every case of :data:`CASES` on a ring of one (a local copy, rounded like the golden's)
    and on a ring of four."""
    _cases_on(n, seed)


def fast_shape(op, rank, n, parts, per):
    """A destination each flit's slots reach in one row write: the source's rows (all-reduce),
    the chunk's rows (reduce-scatter of whole-partition chunks), n times the rows (gather)."""
    if op == "all_gather":
        return parts * n, per
    if op == "reduce_scatter":
        return parts // n, per
    return parts, per


#: K > 1 (several elements per flit): (link_bits, ring size, op, src, dst, op, parts, per,
#: destination shape rule); whole-partition chunks take the packed wire order, the others one
#: element per flit; ``fast_shape`` destinations take one row write per flit, and so do a
#: gather's ``dst_shape`` rows ``2**x`` times the source's when the source partitions are a
#: multiple of ``2**x`` (the slots source partitions ``2**x`` apart).
WIDE = [
    (128, 2, "all_reduce", "fp32", "fp32", 1, 4, 6, fast_shape),
    (128, 2, "all_reduce", "bf16", "fp16", 4, 4, 5, dst_shape),
    (128, 2, "reduce_scatter", "fp16", "bf16", 5, 4, 3, fast_shape),
    (128, 2, "all_gather", "fp8_e4m3", "fp8_e4m3", None, 3, 5, fast_shape),
    (128, 2, "all_gather", "fp32", "fp32", None, 4, 7, dst_shape),
    (128, 2, "all_reduce", "fp32", "bf16", 1, 3, 5, dst_shape),
    (64, 4, "all_reduce", "fp32", "fp32", 1, 4, 9, fast_shape),
    (64, 4, "all_reduce", "fp16", "fp32", 5, 4, 4, dst_shape),
    (64, 4, "reduce_scatter", "fp32", "fp32", 1, 4, 5, fast_shape),
    (64, 4, "all_gather", "bf16", "bf16", None, 3, 4, dst_shape),
    (64, 2, "all_gather", "fp32", "fp32", None, 4, 5, dst_shape),
    (64, 4, "all_reduce", "fp32", "fp32", 1, 3, 5, dst_shape),
]


@pytest.fixture(scope="module")
def wide_benches():
    made = {}

    def get(bits, n):
        if (bits, n) not in made:
            rig = EngineRing(CFG.replace(link_bits=bits, ring_size=n))
            made[bits, n] = (rig, SimBench(rig))
        return made[bits, n]
    return get


#: The fast tier runs one case per path (packed/fast write, packed gather, slot-by-slot
#: write, a ring of 4, a gather into longer rows: slots partitions apart, and a ring of 4 whose
#: 15 elements leave a remainder of 3 over the chunks); ``make test-full`` every case.
_WIDE_FAST = (0, 3, 5, 8, 10, 11)


@pytest.mark.parametrize("case", [c if i in _WIDE_FAST else pytest.param(c, marks=pytest.mark.full)
                                  for i, c in enumerate(WIDE)], ids=lambda c: f"{c[0]}b-n{c[1]}-{c[2]}-{c[3]}-{c[4]}-"
                         f"{c[6]}x{c[7]}-{c[8].__name__}")
def test_engine_wide_flits(wide_benches, case):
    """Several elements per flit (``link_bits`` 64 and 128): bit-exact against the golden on
    the fast (one row write per flit) and the slot-by-slot destination paths."""
    bits, n, op, sdt, ddt, red, parts, per, shape = case
    bench = wide_benches(bits, n)
    seed = zlib.crc32(repr(case[:8]).encode()) & 0xFFFF
    rng = np.random.default_rng(seed)
    images = rand_images(rng, n)
    texts = []
    for r in range(n):
        fill(rng, images[r], sdt, parts, per)
        dparts, dper = shape(op, r, n, parts, per)
        extra = f" op={red}" if red is not None else ""
        texts.append(f"{op} ap0={ap(DST, ddt, dparts, dper)} ap1={ap(SRC, sdt, parts, per)}"
                     f"{extra} stream=1")
    check_cfg(bench, texts, images, seed)
