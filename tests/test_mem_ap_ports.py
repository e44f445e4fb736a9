# SPDX-License-Identifier: Apache-2.0
"""The AP reader and writer (``rtl/mem/apport.py``) on SBUF and PSUM row ports, in Amaranth's
simulator. Every address comes from ``golden/ap.py`` (random legal patterns with negative and
zero steps, 1..``ap_dims`` dimensions, partial partition ranges, 1/2/4-byte elements at every
alignment), every datum from a byte model of the memory; back-pressure on the output, gaps on the
element input and a priority port stealing the memory (the hog) on top."""

from __future__ import annotations

import numpy as np
import pytest

from golden.ap import AP, E_AP_FORM, E_AP_RANGE, E_OK, PSUM, SBUF, error_code
from rtl.config import get_preset
from rtl.mem.ap import APGenerator
from rtl.mem.apport import APReader, APWriter
from tb.amsim import SimBench
from tb.ap.program import bad_aps, random_legal_ap
from tb.mem.rig import (APRig, apply_writes, dump_sbuf, expected_reads, preload_sbuf, reader_job,
                        run_jobs, writer_job)

SMALL = get_preset("small")
MEMS = {SBUF: "sbuf", PSUM: "psum"}


@pytest.fixture(scope="module")
def rigs():
    cache = {}

    def get(mem, prefetch=False):
        if (mem, prefetch) not in cache:
            cache[mem, prefetch] = SimBench(APRig(SMALL, MEMS[mem], prefetch=prefetch))
        return cache[mem, prefetch]
    return get


def compare_reads(out, want, seed):
    """``out`` (a :func:`reader_job` dict) against ``want`` (:func:`expected_reads`)."""
    res, errs = want
    assert out["errs"] == errs, f"seed {seed}: error codes {out['errs']} vs {errs}"
    got = out["res"]
    assert len(got) == len(res), (len(got), len(res))
    for k, (g, w) in enumerate(zip(got, res)):
        assert len(g) == len(w), f"seed {seed} AP {k}: {len(g)} elements vs {len(w)}"
        for e, ((gm, gl, gd), (wm, wl, wd)) in enumerate(zip(g, w)):
            assert (gm, gl) == (wm, wl), f"seed {seed} AP {k} element {e}: mask/last"
            for p, x in enumerate(wd):
                assert x is None or gd[p] == x, \
                    f"seed {seed} AP {k} element {e} partition {p}: {gd[p]:#x} != {x:#x}"


@pytest.mark.parametrize("prefetch", [False, True])
def test_sbuf_reader_random_patterns_back_pressure_and_hog(rigs, prefetch, seed):
    b = rigs(SBUF, prefetch)
    rng = np.random.default_rng([seed, 50])
    mem = rng.integers(0, 256, (SMALL.partitions, SMALL.sbuf_bytes_per_partition), np.uint8)
    aps = [random_legal_ap(rng, SMALL, max_elems=24, memory=SBUF) for _ in range(40)]
    # directed: every byte position of a lane, 2-byte elements at both, the last byte of SBUF
    aps += [AP(offset=1, elem_bytes=1, dims=((1, 7),), num_partitions=4),
            AP(offset=4094, elem_bytes=2, dims=((-1, 5), (-9, 2)), start_partition=2,
               num_partitions=2),
            AP(offset=SMALL.sbuf_bytes_per_partition - 1, elem_bytes=1, dims=((-5, 3),),
               start_partition=3, num_partitions=1)]
    assert any(s < 0 for ap in aps for s, n in ap.dims if n > 1)

    async def preload(ctx):
        preload_sbuf(ctx, b.dut.mem, mem)
    job, out = reader_job(b.dut, aps, rng=rng, p_ready=0.6, p_hog=0.3)
    run_jobs(b, preload, job)
    compare_reads(out, expected_reads(SMALL, aps, mem), seed)


def test_sbuf_writer_random_patterns_then_contents(rigs, seed):
    """Random legal APs written with random elements (gaps, hog): the SBUF afterwards equals
    the golden writes applied in order to the same initial contents."""
    b = rigs(SBUF)
    rng = np.random.default_rng([seed, 51])
    P = SMALL.partitions
    mem = rng.integers(0, 256, (P, SMALL.sbuf_bytes_per_partition), np.uint8)
    aps = [random_legal_ap(rng, SMALL, max_elems=24, memory=SBUF) for _ in range(30)]
    elems = [[[int(x) for x in rng.integers(0, 1 << 32, P, dtype=np.uint64)]
              for _ in range(ap.count)] for ap in aps]
    want = apply_writes(SMALL, aps, elems, mem.copy())
    res = {}

    async def preload(ctx):
        preload_sbuf(ctx, b.dut.mem, mem)

    async def dump(ctx):
        res["mem"] = dump_sbuf(ctx, b.dut.mem)
    job, out = writer_job(b.dut, aps, elems, rng=rng, p_valid=0.7, p_hog=0.3)
    run_jobs(b, preload, job, dump)
    assert out["done"] == len(aps) and not out["errs"]
    assert len(out["writes"]) == sum(ap.count for ap in aps)
    diff = np.argwhere(res["mem"] != want)
    assert diff.size == 0, f"seed {seed}: {len(diff)} bytes differ, first (partition, byte) " \
                           f"{diff[:4].tolist()}"


def test_psum_writer_then_reader_round_trip(rigs, seed):
    """PSUM: random APs written, then random APs read back in the same run: lanes
    p < pe_cols hold the golden writes, the reader returns the golden lanes (0 beyond)."""
    b = rigs(PSUM)
    rng = np.random.default_rng([seed, 52])
    P = SMALL.partitions
    mem = np.zeros((P, SMALL.psum_bytes_per_partition), np.uint8)
    aps = [random_legal_ap(rng, SMALL, max_elems=24, memory=PSUM) for _ in range(30)]
    elems = [[[int(x) for x in rng.integers(0, 1 << 32, P, dtype=np.uint64)]
              for _ in range(ap.count)] for ap in aps]
    # read back mostly what was written: the same APs, plus random ones
    rd_aps = aps[::2] + [random_legal_ap(rng, SMALL, max_elems=24, memory=PSUM)
                         for _ in range(15)]
    want_mem = apply_writes(SMALL, aps, elems, mem, lanes=SMALL.pe_cols)
    wjob, w = writer_job(b.dut, aps, elems, rng=rng, p_valid=0.8, p_hog=0.2)
    rjob, r = reader_job(b.dut, rd_aps, rng=rng, p_ready=0.7, p_hog=0.2)
    run_jobs(b, wjob, rjob)
    assert w["done"] == len(aps)
    compare_reads(r, expected_reads(SMALL, rd_aps, want_mem), seed)


@pytest.mark.parametrize("mem,prefetch", [(SBUF, False), (PSUM, False), (SBUF, True)])
def test_bad_descriptors_report_and_access_nothing(rigs, mem, prefetch, seed):
    """Every bad class (and a descriptor for the other memory, E_AP_FORM) between legal ones
    (also two bad ones in a row): its code, no access for it, the legal ones read correctly in
    order."""
    b = rigs(mem, prefetch)
    rng = np.random.default_rng([seed, 53])
    other = PSUM if mem == SBUF else SBUF
    wrong = random_legal_ap(rng, SMALL, max_elems=4, memory=other)
    cases = [(ap, code) for _n, ap, code in bad_aps(SMALL)] + [(wrong, E_AP_FORM)]
    aps = []
    for ap, _code in cases:
        aps += [ap, random_legal_ap(rng, SMALL, max_elems=4, memory=mem)]
    aps[2:2] = [cases[0][0]]               # two bad descriptors in a row
    cases[1:1] = [cases[0]]
    job, out = reader_job(b.dut, aps, rng=rng, p_ready=0.8)
    run_jobs(b, job)
    # a descriptor for the other memory is E_AP_FORM here, whatever else is wrong with it
    want = [E_AP_FORM if ap.memory == other else c for ap, c in cases]
    assert out["errs"] == want
    n_ok = sum(ap.count for ap in aps if ap.memory == mem and error_code(SMALL, ap) == E_OK)
    assert len(out["reqs"]) >= n_ok
    assert sum(len(r) for r in out["res"]) == n_ok
    # writer: same descriptors, elements only for the accepted ones; nothing else written
    legal = [ap for ap in aps if ap.memory == mem and error_code(SMALL, ap) == E_OK]
    elems = [[[7] * SMALL.partitions] * ap.count for ap in legal]
    if not prefetch:
        job, w = writer_job(b.dut, aps, elems, rng=rng)
        run_jobs(b, job)
        assert w["errs"] == want
        assert len(w["writes"]) == n_ok and w["done"] == len(legal)
    # the legal ones read the right data in order
    res_want = [len(addresses_of(ap)) for ap in legal]
    assert [len(r) for r in out["res"]] == res_want


def addresses_of(ap):
    from golden.ap import addresses
    return addresses(ap).tolist()


def test_prefetch_reader_joins_descriptors_without_gaps(rigs):
    """With two generators, back-to-back descriptors of at least ``overhead + 1`` elements give
    one element per cycle across the boundaries, after the first ``latency`` cycles; a rejected
    descriptor in between costs at most ``overhead + 1`` cycles; a single generator pays
    ``overhead`` cycles at every boundary."""
    gsig = APGenerator.Signature(SMALL)
    aps = [AP(offset=64, elem_bytes=2, dims=((1, 6),), num_partitions=4),
           AP(offset=1024, elem_bytes=1, dims=((-1, 5),), num_partitions=4),
           AP(offset=8, elem_bytes=4, dims=((2, 2), (-1, 2)), num_partitions=4),
           AP(offset=16, elem_bytes=4, dims=((1, 7),), num_partitions=4)]
    n = sum(ap.count for ap in aps)
    for prefetch in (True, False):
        b = rigs(SBUF, prefetch)
        job, out = reader_job(b.dut, aps, rng=np.random.default_rng(0), p_ready=1.0)
        run_jobs(b, job)
        e = out["elems"]
        assert e[0] == out["takes"][0] + APReader.Signature(SMALL, "sbuf").latency
        gaps = [y - x - 1 for x, y in zip(e, e[1:]) if y - x > 1]
        assert gaps == ([] if prefetch else [gsig.overhead] * 3), (prefetch, gaps)
    bad = AP(offset=SMALL.sbuf_bytes_per_partition, elem_bytes=4, dims=((1, 2),))
    b = rigs(SBUF, True)
    job, out = reader_job(b.dut, aps[:2] + [bad] + aps[2:], rng=np.random.default_rng(0),
                          p_ready=1.0)
    run_jobs(b, job)
    e = out["elems"]
    assert len(e) == n and out["errs"] == [E_AP_RANGE]
    gaps = [y - x - 1 for x, y in zip(e, e[1:]) if y - x > 1]
    assert len(gaps) <= 1 and all(g <= gsig.overhead + 1 for g in gaps), gaps


@pytest.mark.parametrize("p_ready", [1.0, 0.5])
def test_prefetch_reader_bad_descriptor_checked_during_a_walk(rigs, p_ready):
    """A rejected descriptor whose check ends while the other generator is still walking (its
    error is remembered until its turn), and one whose check ends on its own turn: each is
    skipped once, in descriptor order, and every legal descriptor around them reads its data."""
    b = rigs(SBUF, True)
    rng = np.random.default_rng([7, int(p_ready * 10)])
    mem = rng.integers(0, 256, (SMALL.partitions, SMALL.sbuf_bytes_per_partition), np.uint8)
    bad = AP(offset=SMALL.sbuf_bytes_per_partition, elem_bytes=4, dims=((1, 2),))
    long_ap = AP(offset=64, elem_bytes=2, dims=((1, 24),), num_partitions=4)
    short = AP(offset=8, elem_bytes=4, dims=((1, 1),), num_partitions=4)
    other = AP(offset=200, elem_bytes=1, dims=((-1, 9),), num_partitions=4)
    # the generators take descriptors alternately: the first ``bad`` and ``other`` go to one,
    # so its remembered error must make the walks wait their turn (``other`` after ``short``)
    aps = [long_ap, bad, short, other, long_ap, bad, bad, short, bad, other]

    async def preload(ctx):
        preload_sbuf(ctx, b.dut.mem, mem)
    job, out = reader_job(b.dut, aps, rng=rng, p_ready=p_ready)
    run_jobs(b, preload, job)
    assert out["errs"] == [E_AP_RANGE] * 4
    compare_reads(out, expected_reads(SMALL, aps, mem), p_ready)


def test_reader_full_rate_and_latency(rigs):
    """Output always ready, no hog: elements of one AP on consecutive cycles, the first
    ``latency`` cycles after the descriptor was taken; one element per cycle overall except
    the generator's overhead between descriptors."""
    b = rigs(SBUF)
    sig = APReader.Signature(SMALL, "sbuf")
    aps = [AP(offset=64, elem_bytes=2, dims=((1, 20),), num_partitions=4),
           AP(offset=1024, elem_bytes=1, dims=((-1, 9),), num_partitions=4)]
    job, out = reader_job(b.dut, aps, rng=np.random.default_rng(0), p_ready=1.0)
    run_jobs(b, job)
    t0, t1 = out["takes"]
    e = out["elems"]
    assert e[:20] == list(range(t0 + sig.latency, t0 + sig.latency + 20)), (t0, e[:20])
    assert e[20:] == list(range(t1 + sig.latency, t1 + sig.latency + 9))
    assert sig.latency == 3 + 1 + 1


def test_signatures():
    s = APReader.Signature(SMALL, "psum", mem_latency=2)
    assert s.depth == 4 and s.latency == 6
    assert APWriter.Signature(SMALL, "sbuf").latency == 3
    with pytest.raises(ValueError, match="memory must be 'sbuf' or 'psum', not 'dram'"):
        APReader.Signature(SMALL, "dram")
    with pytest.raises(ValueError, match=r"mem_latency must be an integer in \[0, 8\], not 9"):
        APReader.Signature(SMALL, "sbuf", mem_latency=9)
