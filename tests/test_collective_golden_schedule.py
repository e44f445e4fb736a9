# SPDX-License-Identifier: Apache-2.0
"""The ring schedules (golden/collective/schedule.py) executed symbolically here, and the cycle
estimate and NCCL bandwidths (golden/collective/perf.py) against hand-worked figures and the
definitions of https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md."""

from collections import Counter
from fractions import Fraction

import pytest

from golden.collective.link import LinkModel, credit_round_trip
from golden.collective.perf import OPS, bus_factor, estimate, ring_cycles
from golden.collective.schedule import (all_gather_schedule, all_reduce_schedule,
                                        all_to_all_schedule, chunk_bounds, owner,
                                        permute_schedule, reduce_scatter_schedule, sum_order)
from rtl.config import get_preset

SMALL = get_preset("small")
DEFAULT = get_preset("default")
RANKS = (1, 2, 3, 4, 5, 8, 64)


def _one_per_link_per_step(sched, n):
    steps = sorted({t.step for t in sched})
    for s in steps:
        rows = [t for t in sched if t.step == s]
        assert sorted(t.src for t in rows) == list(range(n))
        assert sorted(t.dst for t in rows) == list(range(n))
    return steps


def _ring_vc(src, n):
    return 1 if src == n - 1 else 0


@pytest.mark.parametrize("n", RANKS)
def test_reduce_scatter_order_and_owner(n):
    sched = reduce_scatter_schedule(n)
    assert len(sched) == n * (n - 1)
    assert _one_per_link_per_step(sched, n) == list(range(n - 1))
    # symbolic run: each (rank, chunk) holds the list of contributors in the order combined
    held = {(r, c): [r] for r in range(n) for c in range(n)}
    for s in range(n - 1):
        rows = [t for t in sched if t.step == s]
        sent = [(t, list(held[t.src, t.chunk])) for t in rows]
        for t, contrib in sent:
            assert t.dst == (t.src + 1) % n and t.vc == _ring_vc(t.src, n)
            held[t.dst, t.chunk] = contrib + [t.dst]
    for c in range(n):
        assert owner(c, n) == c
        order = [(c + 1 + k) % n for k in range(n)]
        assert held[c, c] == order == sum_order(c, n)


@pytest.mark.parametrize("n", RANKS)
def test_all_gather_and_all_reduce(n):
    sched = all_gather_schedule(n)
    assert _one_per_link_per_step(sched, n) == list(range(n - 1))
    have = [{r} for r in range(n)]
    for t in sched:
        assert t.chunk in have[t.src] and t.chunk not in have[t.dst]
        assert t.vc == _ring_vc(t.src, n)
        have[t.dst].add(t.chunk)
    assert all(h == set(range(n)) for h in have)
    ar = all_reduce_schedule(n)
    assert len(ar) == 2 * n * (n - 1)
    assert sorted({t.step for t in ar}) == list(range(2 * (n - 1)))


def _crossed_dateline(src, hop, n):
    """Whether a flit injected at ``src`` has crossed link n-1 -> 0 by the end of hop ``hop``."""
    return any((src + h) % n == n - 1 for h in range(hop + 1))


@pytest.mark.parametrize("n", RANKS)
def test_all_to_all_routes(n):
    sched = all_to_all_schedule(n)
    at = {o * n + f: o for o in range(n) for f in range(n)}
    hops = dict.fromkeys(at, 0)
    crossed = dict.fromkeys(at, False)            # has the block taken link n-1 -> 0 yet
    for t in sched:
        assert at[t.chunk] == t.src and t.dst == (t.src + 1) % n and t.step == hops[t.chunk]
        crossed[t.chunk] |= t.src == n - 1
        assert t.vc == int(crossed[t.chunk])
        at[t.chunk] = t.dst
        hops[t.chunk] += 1
    for chunk, rank in at.items():
        o, f = divmod(chunk, n)
        assert rank == f and hops[chunk] == (f - o) % n
    loads = Counter(t.src for t in sched)
    assert [loads[i] for i in range(n)] == [n * (n - 1) // 2] * n


@pytest.mark.parametrize("perm", ([0], [1, 0], [2, 0, 1], [1, 2, 3, 0], [3, 1, 0, 2],
                                  [(r + 5) % 64 for r in range(64)]))
def test_permute_routes(perm):
    n = len(perm)
    at = {r: r for r in range(n)}
    for t in permute_schedule(perm):
        assert at[t.chunk] == t.src and t.dst == (t.src + 1) % n
        assert t.vc == int(_crossed_dateline(t.chunk, t.step, n))
        at[t.chunk] = t.dst
    assert all(at[r] == perm[r] for r in range(n))


def test_chunk_bounds():
    assert chunk_bounds(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert chunk_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    with pytest.raises(ValueError, match="elems must be an int >= 0"):
        chunk_bounds(-1, 2)
    with pytest.raises(ValueError, match="n must be >= 1, not 0"):
        reduce_scatter_schedule(0)
    with pytest.raises(TypeError, match="n must be an int"):
        all_gather_schedule(2.0)


# --- cycles and bandwidths ---------------------------------------------------------------------

@pytest.mark.parametrize("n", (1, 2, 3, 4, 8, 64))
def test_bus_factor_is_nccls(n):
    assert Fraction(bus_factor("all_reduce", n)).limit_denominator(1000) == Fraction(2 * (n - 1), n)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert Fraction(bus_factor(op, n)).limit_denominator(1000) == Fraction(n - 1, n)
    assert bus_factor("permute", n) == 1
    with pytest.raises(ValueError, match="op must be one of"):
        bus_factor("broadcast", n)


def test_ring_cycles_by_hand():
    # small: 32-bit flits, rate 1 (12 credits = 2*4+4), hop 6 cycles
    # all-reduce, 2 ranks, 8 FP32 elements: chunks of 4 -> 4 flits per step, 2 steps;
    # step 1 starts at max(4, 6) = 6, ends 6 + 4, the last flit arrives 6 later: 16
    e = estimate("all_reduce", 2, 8, "fp32", SMALL)
    assert e.cycles == 16 and e.size == 32
    assert e.algbw == 2.0 and e.busbw == 2.0 and e.fraction == 0.5
    # bandwidth-bound: 4 ranks, 4096 elements: 1024 flits a step, 6 steps: 6*1024 + 6
    assert ring_cycles([1024] * 6, SMALL) == 6 * 1024 + 6
    # 4 credits: one flit every 3 cycles (round trip 12)
    few = SMALL.replace(link_credits=4)
    assert ring_cycles([10], few) == 30 + 6
    assert ring_cycles([], SMALL) == 0
    assert ring_cycles([4, 4], SMALL, core_cycles=3) == 9 + 4 + 9


@pytest.mark.parametrize("credits, latency", [(12, 4), (32, 8), (4, 4), (8, 8)])
@pytest.mark.parametrize("flits", [1, 7, 50])
def test_one_step_against_the_link_cycle_model(credits, latency, flits):
    """One step of F flits through golden's cycle-level link (sender always valid, receiver
    always ready): at full rate the estimate is the cycle after the last flit arrives; with
    too few credits it is at most one credit round trip later (it spreads the last burst)."""
    cfg = SMALL.replace(link_credits=credits, link_latency=latency)
    link = LinkModel(cfg)
    p = {"data": 1, "src": 0, "last": 0, "stream": 0, "chunk": 0}
    sent = got = 0
    last = None
    for t in range(20 * flits * credit_round_trip(cfg)):
        ready, taken = link.step([int(sent < flits), 0], [p, None], [1, 1])
        sent += int(sent < flits and ready[0])
        if taken[0] is not None:
            got += 1
            if got == flits:
                last = t
                break
    assert last is not None
    est = ring_cycles([flits], cfg)
    if credits >= credit_round_trip(cfg):
        assert est == last + 1
    else:
        assert last + 1 <= est <= last + 1 + credit_round_trip(cfg)


def test_estimate_figures():
    n = 4
    for op in OPS:
        assert estimate(op, 1, 64, "fp32", DEFAULT).cycles == 0
    big = estimate("all_reduce", n, 1 << 18, "fp32", DEFAULT)
    assert 0.99 < big.fraction <= 1.0
    # bf16 all-reduce: the reduce-scatter carries FP32, twice the bytes of the all-gather
    bf = estimate("all_reduce", n, 1 << 18, "bf16", DEFAULT)
    assert abs(bf.fraction - (2 / 3)) < 0.01
    # all-to-all on a unidirectional ring: a link carries n(n-1)/2 blocks, busbw <= 2/n peak
    a2a = estimate("all_to_all", n, 1 << 18, "fp32", DEFAULT)
    assert a2a.fraction <= 2 / n and a2a.fraction > 0.49
    # permute to the neighbour: the whole message on every link, busbw -> peak
    p = estimate("permute", n, 1 << 18, "fp8_e4m3", DEFAULT)
    assert p.cycles == (1 << 18) // 16 + 10 and p.size == 1 << 18
    far = estimate("permute", n, 1 << 10, "fp32", DEFAULT, perm=[3, 0, 1, 2])
    assert far.cycles == 3 * 256 + 3 * 10
    ag = estimate("all_gather", n, 256, "fp32", DEFAULT)
    assert ag.size == n * 256 * 4 and ag.cycles == 2 * max(64, 10) + 64 + 10


@pytest.mark.parametrize("kw, exc, words", [
    (dict(op="bcast"), ValueError, "op must be one of"),
    (dict(elems=-1), ValueError, "elems must be an int >= 0"),
    (dict(dtype="int8"), ValueError, "dtype"),
    (dict(op="all_reduce", dtype="fp8_e4m3"), ValueError, "dtype"),
    (dict(op="all_to_all", elems=6), ValueError, "multiple of n"),
    (dict(core_cycles=-2), ValueError, "core_cycles"),
])
def test_estimate_bad_input(kw, exc, words):
    args = dict(op="all_gather", n=4, elems=64, dtype="fp32", cfg=DEFAULT) | kw
    with pytest.raises(exc, match=words):
        estimate(**args)


@pytest.mark.full
@pytest.mark.parametrize("n", range(1, 65))
def test_schedules_every_n(n):
    test_reduce_scatter_order_and_owner(n)
    test_all_gather_and_all_reduce(n)
    test_all_to_all_routes(n)
