# SPDX-License-Identifier: Apache-2.0
"""The access-pattern generator (``rtl/mem/ap.py``) in Amaranth's own simulator.

Every expected address, partition mask and error code comes from ``golden/ap.py``; the timing
expectations (``latency`` from a descriptor taken to its first beat or ``err``, one beat per
cycle while ``o.ready`` is high, ``overhead`` cycles per descriptor) from the block's documented
``Signature`` (docs/memory.md). Every run is bounded: a testbench that sees no progress for
longer than the documented worst case fails naming what it waited for.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from golden.ap import AP, E_OK, PSUM, SBUF, addresses, error_code, extent, partition_mask
from rtl.config import get_preset
from rtl.mem.ap import APGenerator
from tb.ap.program import bad_aps, pack_ap, random_legal_ap
from tb.amsim import SimBench

SMALL = get_preset("small")
#: The exhaustive range check's config: 2 partitions, 64 B of SBUF, 2 PSUM banks of 16 B, 2 dims.
TINY = SMALL.replace(partitions=2, pe_rows=2, pe_cols=2, sbuf_bytes_per_partition=64,
                     psum_banks=2, psum_bank_fp32=4, ap_dims=2, sbuf_banks=1)
CONFIGS = {"small": SMALL, "default": get_preset("default"),
           "small_2dims": SMALL.replace(ap_dims=2), "tiny": TINY}


class Bench(SimBench):
    """One simulator per config (building it is most of the cost), reset between runs."""

    def __init__(self, cfg):
        super().__init__(APGenerator(cfg))
        self.cfg = cfg
        self.sig = APGenerator.Signature(cfg)

    def stream(self, aps, *, rng=None, p_ready=1.0, p_valid=1.0):
        """Offer ``aps`` in order on ``i`` (each held until taken; between descriptors ``i.valid``
        drops with probability ``1 - p_valid``), take ``o`` with probability ``p_ready`` per
        cycle. Returns the trace: ``takes`` (cycle each descriptor was taken), ``beats``
        (``(cycle, addr, mask, last, err_code)`` per beat taken), ``errs`` (``(cycle, code)``
        per ``err`` strobe), ``cycles``."""
        dut, sig = self.dut, self.sig
        words = [pack_ap(sig.in_layout, ap, self.cfg.ap_dims) for ap in aps]
        n_elems = sum(ap.count if error_code(self.cfg, ap) == E_OK else 0 for ap in aps)
        # The documented worst case with o.ready high a fraction p of the time, doubled.
        limit = int(2 * ((n_elems / max(p_ready, 0.05)) + (sig.overhead + 2) * len(aps)
                         / max(p_valid, 0.05))) + 50
        rng = rng or np.random.default_rng(0)
        trace = {"takes": [], "beats": [], "errs": [], "cycles": 0}

        async def job(ctx):
            from amaranth.hdl import Value
            j, cycle = 0, 0
            pending = len(aps)                    # descriptors not finished (beats or err)
            while pending:
                offer = j < len(aps) and rng.random() < p_valid
                ctx.set(dut.i.valid, int(offer))
                if offer:
                    ctx.set(Value.cast(dut.i.payload), words[j])
                ctx.set(dut.o.ready, int(rng.random() < p_ready))
                if offer and ctx.get(dut.i.ready):
                    trace["takes"].append(cycle)
                    j += 1
                if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                    p = dut.o.payload
                    last = ctx.get(p.last)
                    trace["beats"].append((cycle, ctx.get(p.addr), ctx.get(p.mask), last,
                                           ctx.get(dut.err_code)))
                    pending -= last
                if ctx.get(dut.err):
                    trace["errs"].append((cycle, ctx.get(dut.err_code)))
                    pending -= 1
                await ctx.tick()
                cycle += 1
                if cycle > limit:
                    raise AssertionError(f"{pending} of {len(aps)} descriptors not finished "
                                         f"within {limit} cycles (a hung AP generator)")
            ctx.set(dut.i.valid, 0)
            trace["cycles"] = cycle
        self.run(job)
        return trace


@pytest.fixture(scope="module")
def benches():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Bench(CONFIGS[name])
        return cache[name]
    return get


def outcomes(cfg, trace):
    """Per descriptor, in order: ``("ok", [addr...], mask)`` or ``("err", code)``, rebuilt from
    the trace's beats and err strobes in time order."""
    events = [(c, 0, b) for c, *b in trace["beats"]] + [(c, 1, e) for c, e in trace["errs"]]
    events.sort(key=lambda e: e[:2])
    out, cur, masks = [], [], set()
    for _c, kind, ev in events:
        if kind == 1:
            assert not cur, "err strobe in the middle of a walk"
            out.append(("err", ev))
            continue
        addr, mask, last, code = ev
        assert code == E_OK, f"err_code {code:#x} while walking an accepted descriptor"
        cur.append(addr)
        masks.add(mask)
        if last:
            assert len(masks) == 1, "partition mask changed within one descriptor"
            out.append(("ok", cur, masks.pop()))
            cur = []
    assert not cur, "beats after the last descriptor's last beat"
    return out


def expected(cfg, aps):
    out = []
    for ap in aps:
        code = error_code(cfg, ap)
        out.append(("ok", addresses(ap).tolist(), partition_mask(ap)) if code == E_OK
                   else ("err", code))
    return out


def check_stream(cfg, aps, trace):
    got, want = outcomes(cfg, trace), expected(cfg, aps)
    assert len(got) == len(want), (len(got), len(want))
    for k, (g, w, ap) in enumerate(zip(got, want, aps)):
        assert g == w, f"descriptor {k} {ap}: got {g}, want {w}"


# --- random legal descriptors, random back-pressure -----------------------------------------

@pytest.mark.parametrize("name", ["small", "default", "small_2dims"])
def test_random_legal_patterns_under_back_pressure(benches, name, seed):
    b = benches(name)
    rng = np.random.default_rng([seed, 1])
    aps = [random_legal_ap(rng, b.cfg, max_elems=32) for _ in range(60)]
    assert {len(ap.dims) for ap in aps} == set(range(1, b.cfg.ap_dims + 1))
    assert any(s < 0 for ap in aps for s, n in ap.dims if n > 1)
    trace = b.stream(aps, rng=rng, p_ready=0.6, p_valid=0.7)
    check_stream(b.cfg, aps, trace)


def test_long_single_dimension_and_full_partitions(benches):
    b = benches("small")
    cfg = b.cfg
    from golden.ap import AP, PSUM
    aps = [AP(offset=cfg.sbuf_bytes_per_partition - 400, elem_bytes=4, dims=((1, 100),),
              num_partitions=cfg.partitions),
           AP(memory=PSUM, offset=2 * cfg.psum_bank_bytes - 2, elem_bytes=2,
              dims=((-1, cfg.psum_bank_fp32 * 2),)),
           AP(offset=7, elem_bytes=1, dims=((0, 5), (-1, 3), (2, 2), (1, 2)),
              start_partition=3, num_partitions=1)]
    trace = b.stream(aps, rng=np.random.default_rng(3), p_ready=0.8)
    check_stream(cfg, aps, trace)


# --- bad descriptors ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["small", "default"])
def test_every_bad_class_sets_its_code_and_issues_nothing(benches, name, seed):
    """Each bad descriptor between two legal ones: its code on ``err``, zero beats, the next
    descriptor accepted and walked."""
    b = benches(name)
    rng = np.random.default_rng([seed, 2])
    aps = []
    for _name, ap, code in bad_aps(b.cfg):
        assert error_code(b.cfg, ap) == code           # the directed case hits its class
        aps += [ap, random_legal_ap(rng, b.cfg, max_elems=6)]
    trace = b.stream(aps, rng=rng, p_ready=0.7)
    check_stream(b.cfg, aps, trace)
    assert len(trace["errs"]) == len(bad_aps(b.cfg))


# --- the range property: exhaustive simulation on a tiny config, and a bounded formal check -----
# The property: every issued address lies in the descriptor's closed-form [lo, hi] and inside
# the SBUF partition / the PSUM bank of its offset; an illegal descriptor issues nothing.
# yowasp-sby is installed but no SMT solver is (no z3/yices/boolector), so the formal check runs
# on yosys' own SAT solver (tb/ap/formal.py), which is slow through the span multipliers: it is
# bounded in depth and in the descriptor's steps and counts, and runs only in the full tier.
# The simulation below covers every descriptor of a small space instead.

def tiny_space():
    """Every descriptor of TINY with memory SBUF/PSUM, elements of 1/2/4 bytes, byte offsets
    0..71 (past both memories), two dimensions of step -2, -1, 0, 1, 3 and num 0, 1, 3."""
    dim = [(s, n) for s in (-2, -1, 0, 1, 3) for n in (0, 1, 3)]
    for mem, w, off, d0, d1 in itertools.product((SBUF, PSUM), (1, 2, 4), range(72), dim, dim):
        yield AP(memory=mem, elem_bytes=w, offset=off, dims=(d0, d1), num_partitions=1 + off % 2)


def check_in_range(cfg, aps, trace):
    """The formal property on the trace: each beat's byte range inside [lo, hi] and the memory."""
    beats = iter(trace["beats"])
    for ap in aps:
        if error_code(cfg, ap) != E_OK:
            continue
        lo, hi = extent(ap)
        if ap.memory == SBUF:
            base, size = 0, cfg.sbuf_bytes_per_partition
        else:
            size = cfg.psum_bank_bytes
            base = ap.offset // size * size
        for _ in range(ap.count):
            a = next(beats)[1]
            assert lo <= a and a + ap.elem_bytes - 1 <= hi, ap
            assert base <= a and a + ap.elem_bytes <= base + size, ap


def run_tiny(benches, stride):
    b = benches("tiny")
    aps = list(tiny_space())[::stride]
    legal = sum(error_code(b.cfg, ap) == E_OK for ap in aps)
    assert 0 < legal < len(aps)
    for k in range(0, len(aps), 4000):
        chunk = aps[k:k + 4000]
        trace = b.stream(chunk, rng=np.random.default_rng(k), p_ready=0.9)
        check_stream(b.cfg, chunk, trace)
        check_in_range(b.cfg, chunk, trace)
    return len(aps), legal


def test_range_property_tiny_sampled(benches):
    """The fast tier: every 61st descriptor of the space (about 1,600)."""
    run_tiny(benches, 61)


@pytest.mark.full
def test_range_property_tiny_exhaustive(benches):
    """``make test-full``: all 97,200 descriptors of the space."""
    n, legal = run_tiny(benches, 1)
    assert n == 2 * 3 * 72 * 15 * 15
    print(f"{n} descriptors, {legal} legal")


@pytest.mark.full
def test_range_property_bounded_formal(tmp_path):
    """Bounded model check (6 cycles from reset: three beats of any descriptor with
    |step| <= 4, num <= 3, on 2 partitions and 2 dims) with yosys' SAT solver."""
    from tb.ap.formal import run_bmc
    cfg = SMALL.replace(partitions=2, pe_rows=2, pe_cols=2, ap_dims=2)
    ok, seconds, log = run_bmc(cfg, tmp_path, depth=6, max_num=3, max_step=4)
    assert ok, log[-3000:]
    print(f"bounded formal check passed in {seconds:.0f} s")


# --- timing ---------------------------------------------------------------------------------

def test_one_address_per_cycle_and_documented_overhead(benches, seed):
    """``o.ready`` and ``i.valid`` always high: descriptor j's first beat (or its ``err``)
    ``latency`` cycles after it was taken, its beats on consecutive cycles, the next descriptor
    taken ``n + overhead`` cycles after it (``overhead`` for a rejected one)."""
    b = benches("small")
    sig = b.sig
    assert sig.latency == sig.overhead == 3
    rng = np.random.default_rng([seed, 3])
    bad = [ap for _, ap, _ in bad_aps(b.cfg)][:4]
    aps = [random_legal_ap(rng, b.cfg, max_elems=20) for _ in range(8)]
    aps = aps[:4] + bad[:2] + aps[4:] + bad[2:]
    trace = b.stream(aps, p_ready=1.0, p_valid=1.0)
    check_stream(b.cfg, aps, trace)
    takes = trace["takes"]
    beats = iter(trace["beats"])
    errs = dict(trace["errs"])
    for k, ap in enumerate(aps):
        t = takes[k]
        if error_code(b.cfg, ap) == E_OK:
            cyc = [next(beats)[0] for _ in range(ap.count)]
            assert cyc == list(range(t + sig.latency, t + sig.latency + ap.count)), k
            busy = ap.count + sig.overhead
        else:
            assert t + sig.latency in errs, k
            busy = sig.overhead
        if k + 1 < len(aps):
            assert takes[k + 1] == t + busy, (k, takes[k + 1] - t, busy)
    total = sum(ap.count if error_code(b.cfg, ap) == E_OK else 0 for ap in aps)
    print(f"{len(aps)} descriptors, {total} addresses in {trace['cycles']} cycles "
          f"(overhead {sig.overhead} per descriptor)")


def test_signature_needs_no_elaboration():
    sig = APGenerator.Signature(SMALL)
    assert sig.latency == 3 and sig.ready and sig.out_ready
    from amaranth.hdl import Shape
    assert Shape.cast(sig.out_layout["addr"].shape).width == SMALL.ap_addr_bits
    assert Shape.cast(sig.out_layout["mask"].shape).width == SMALL.partitions
    with pytest.raises(TypeError, match="APGenerator cfg must be a CoreConfig"):
        APGenerator.Signature("small")
