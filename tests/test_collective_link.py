# SPDX-License-Identifier: Apache-2.0
"""The ring link layer's RTL (rtl/collective/) in amaranth.sim against the golden model.

TX -> delay line -> RX with random flits, random gaps and random back-pressure: every port
output equals golden's every cycle (tb/collective/rig.py), and what the RX delivers is what the
TX took, in order, per VC (checked here from the traces, not from golden). Every fault injected
on the wire (tb/collective/program.py): a flipped bit (CRC), a dropped, duplicated or reordered
flit (sequence), a lost or duplicated credit and a silent link (watchdogs) ends in E_LINK with
the documented kind within a bounded number of cycles, and nothing is delivered from the
faulty flit on. The dateline rule on rings of 2 and 4 ports; and without the dateline, a ring
of 4 deadlocks under the same traffic.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.collective.link import crc32c, hop_latency, unpack_flit, vc_path
from rtl.collective.crc import LinkCRC
from rtl.collective.delay import DelayLine
from rtl.collective.link import LinkRX, LinkTX
from rtl.config import LINK_FAULTS, get_preset
from rtl.isa import E_LINK
from tb.amsim import SimBench
from tb.collective.program import (DropFlit, DuplicateCredit, DuplicateFlit, FlipBit,
                                  LoseCredit, ReorderFlits, Silence)
from tb.collective.rig import LinkRig, RingRig, random_payload, run_link, run_ring

CFG = get_preset("small")
_BENCH = {}


def _bench(cfg=CFG, dateline=False):
    key = (cfg, dateline)
    if key not in _BENCH:
        rig = LinkRig(cfg, dateline=dateline)
        _BENCH[key] = (rig, SimBench(rig))
    return _BENCH[key]


def _queues(rng, cfg, n):
    return [[random_payload(rng, cfg) for _ in range(n)] for _ in range(2)]


# --- units -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [72, 88 - 32, 184 - 32, 8])
def test_crc_unit_matches_crc32c(bits, seed):
    rng = np.random.default_rng(seed)
    dut = LinkCRC(bits)
    cases = [int.from_bytes(rng.bytes(bits // 8), "little") for _ in range(100)] + \
        [0, (1 << bits) - 1]
    if bits == 72:
        cases.append(int.from_bytes(b"123456789", "little"))

    async def bench(ctx):
        for x in cases:
            ctx.set(dut.data, x)
            assert ctx.get(dut.crc) == crc32c(x.to_bytes(bits // 8, "little")), (seed, hex(x))
    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    if bits == 72:
        assert crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("latency, in_memory", [(2, True), (4, True), (7, True), (4, False),
                                                (5, False)])
def test_delay_line_delays_by_latency(latency, in_memory, seed):
    rng = np.random.default_rng(seed)
    dut = DelayLine(16, latency, in_memory=in_memory)
    stim = [(int(rng.integers(2)), int(rng.integers(1 << 16))) for _ in range(100)]

    async def bench(ctx):
        for t, (v, d) in enumerate(stim):
            ctx.set(dut.i_valid, v)
            ctx.set(dut.i, d)
            if t < latency:
                assert ctx.get(dut.o_valid) == 0
            else:
                pv, pd = stim[t - latency]
                assert ctx.get(dut.o_valid) == pv, (seed, t)
                if pv:
                    assert ctx.get(dut.o) == pd, (seed, t)
            await ctx.tick()
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_port_signatures_check_their_arguments():
    with pytest.raises(TypeError, match="LinkTX cfg must be a CoreConfig"):
        LinkTX.Signature(None)
    with pytest.raises(TypeError, match="LinkTX dateline must be a bool, not 1"):
        LinkTX.Signature(CFG, dateline=1)
    with pytest.raises(TypeError, match="LinkRX cfg must be a CoreConfig"):
        LinkRX.Signature("small")
    with pytest.raises(ValueError, match=r"DelayLine latency must be in \[2, 256\], not 1"):
        DelayLine.Signature(8, 1)
    with pytest.raises(ValueError, match="LinkCRC bits must be a positive multiple of 8"):
        LinkCRC.Signature(12)


# --- one link, no faults -----------------------------------------------------------------------

def _in_order(trace):
    for v in range(2):
        assert trace.got[v] == trace.sent[v], f"VC{v}: delivered != sent"


@pytest.mark.parametrize("p_valid, p_ready", [(1.0, 1.0), (0.6, 0.6), (0.9, 0.15),
                                              (0.2, 1.0)])
@pytest.mark.parametrize("dateline", [False, True])
def test_random_streams_match_golden(p_valid, p_ready, dateline, seed):
    rng = np.random.default_rng(seed)
    rig, bench = _bench(dateline=dateline)
    trace = run_link(bench, rig, _queues(rng, CFG, 50), rng=rng, p_valid=p_valid,
                     p_ready=p_ready)
    assert not trace.err_cycle, (seed, trace.info)
    assert sum(map(len, trace.sent)) == 100, seed
    if dateline:
        assert not trace.sent[0] and not trace.got[0]
    _in_order(trace)


def test_link_port_in_loopback_matches_golden(seed):
    """The synthesized block, :class:`LinkPort`: its TX feeding its own RX."""
    rng = np.random.default_rng(seed)
    rig = LinkRig(CFG, port=True)
    trace = run_link(SimBench(rig), rig, _queues(rng, CFG, 40), rng=rng, p_valid=0.7,
                     p_ready=0.5)
    assert not trace.err_cycle and sum(map(len, trace.sent)) == 80, seed
    _in_order(trace)


def test_full_rate_and_hop_latency(seed):
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    q = [[random_payload(rng, CFG) for _ in range(200)], []]
    trace = run_link(bench, rig, q, rng=rng)
    _in_order(trace)
    cyc = trace.got_cycle[0]
    assert cyc[0] == hop_latency(CFG)
    assert cyc[-1] - cyc[0] == 199, "one flit per cycle with link_credits >= round trip"


def test_few_credits_throttle_the_link(seed):
    """4 credits and a round trip of 2 * 4 + 4 = 12 cycles: 4 flits every 12 cycles."""
    cfg = CFG.replace(link_credits=4)
    rng = np.random.default_rng(seed)
    rig, bench = _bench(cfg)
    trace = run_link(bench, rig, [[random_payload(rng, cfg) for _ in range(120)], []], rng=rng)
    _in_order(trace)
    cyc = trace.got_cycle[0]
    assert cyc[-1] - cyc[0] == 12 * 29 + 3


# --- faults ------------------------------------------------------------------------------------

def _after_error(trace, key, kind, hit_cycle, bound):
    assert key in trace.err_cycle, f"no error on {key}: {trace.err_cycle}"
    assert trace.code[key] == E_LINK
    assert trace.info[key] == LINK_FAULTS[kind], (trace.info, kind)
    assert trace.err_cycle[key] <= hit_cycle + bound, (trace.err_cycle, hit_cycle, bound)
    for v in range(2):                      # a prefix of what was sent, then nothing
        assert trace.got[v] == trace.sent[v][:len(trace.got[v])]
        assert all(c < trace.err_cycle[key] for c in trace.got_cycle[v])


def _run_fault(seed, fault, *, n=30, p_valid=0.8, p_ready=0.7, **kw):
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    return run_link(bench, rig, _queues(rng, CFG, n), rng=rng, p_valid=p_valid,
                    p_ready=p_ready, fault_fwd=fault, idle_after=4, **kw)


def test_every_flipped_bit_is_a_crc_error(seed):
    rng = np.random.default_rng(seed)
    nb = CFG.link_flit_bits
    for case in range(40):
        k, bit = int(rng.integers(40)), int(rng.integers(nb)) if case >= 4 else nb - 1 - case
        f = FlipBit(CFG, k, bit)
        trace = _run_fault(seed + case, f)
        assert f.hit is not None
        where = f"seed={seed} case={case} k={k} bit={bit}"
        _after_error(trace, "rx", "crc", f.hit["cycle"], CFG.link_latency + 1)
        assert len(trace.got[f.hit["vc"]]) <= f.hit["seq"], where
        assert "tx" not in trace.err_cycle, where


@pytest.mark.parametrize("fault", [DropFlit, DuplicateFlit, ReorderFlits])
def test_drop_duplicate_reorder_are_sequence_errors(fault, seed):
    rng = np.random.default_rng(seed)
    for case in range(8):
        f = fault(CFG, int(rng.integers(30)))
        trace = _run_fault(seed + case, f)
        where = f"seed={seed} case={case} k={f.k}"
        assert f.hit is not None, where
        _after_error(trace, "rx", "seq", f.hit["cycle"], 60)
        # nothing from the faulty flit on: the delivered prefix stops before it
        assert len(trace.got[f.hit["vc"]]) <= f.hit["seq"] + (fault is DuplicateFlit), where


def test_lost_credit_is_a_credit_timeout(seed):
    wd = 40
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    f = LoseCredit(int(rng.integers(20)))
    trace = run_link(bench, rig, _queues(rng, CFG, 25), rng=rng, p_valid=0.8, p_ready=0.7,
                     fault_rev=f, watchdog=wd, idle_after=wd + 10)
    assert f.hit is not None
    assert "rx" not in trace.err_cycle
    _in_order(trace)                        # the data all arrived; the credit did not
    last_return = max(c for v in range(2) for c in trace.got_cycle[v])
    assert trace.info["tx"] == LINK_FAULTS["credit_timeout"]
    assert trace.err_cycle["tx"] <= last_return + CFG.link_latency + 2 + wd, trace.err_cycle


def test_duplicated_credit_is_an_error(seed):
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    for case in range(6):
        f = DuplicateCredit(int(rng.integers(10)))
        trace = run_link(bench, rig, _queues(rng, CFG, 40), rng=rng, p_valid=1.0,
                         p_ready=0.3 if case % 2 else 1.0, fault_rev=f, watchdog=200,
                         idle_after=2 * CFG.link_latency + 8)
        assert f.hit is not None
        kinds = {trace.info.get("tx"), trace.info.get("rx")}
        assert kinds & {LINK_FAULTS["credit_overflow"], LINK_FAULTS["overflow"],
                        LINK_FAULTS["credit_timeout"]}, (seed, case, trace.info)


def test_silent_link_is_reported_on_both_sides(seed):
    wd = 30
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    t0 = int(rng.integers(10, 40))
    trace = run_link(bench, rig, _queues(rng, CFG, 60), rng=rng, p_valid=0.9, p_ready=0.8,
                     fault_fwd=Silence(t0), fault_rev=Silence(t0), expect=1, watchdog=wd,
                     idle_after=wd + 2 * CFG.link_latency + 8)
    bound = wd + CFG.link_latency + 2
    assert trace.info.get("rx") == LINK_FAULTS["silent"], trace.info
    assert trace.info.get("tx") == LINK_FAULTS["credit_timeout"], trace.info
    assert trace.err_cycle["rx"] <= t0 + bound and trace.err_cycle["tx"] <= t0 + bound
    for v in range(2):
        assert trace.got[v] == trace.sent[v][:len(trace.got[v])]


def test_watchdog_zero_waits_forever_without_error(seed):
    rng = np.random.default_rng(seed)
    rig, bench = _bench()
    trace = run_link(bench, rig, _queues(rng, CFG, 20), rng=rng, fault_fwd=Silence(5),
                     fault_rev=Silence(5), expect=1, watchdog=0, cycles=300)
    assert not trace.err_cycle and trace.cycles == 300


# --- rings: the dateline -----------------------------------------------------------------------

def _flows(rng, cfg, per_rank, hops=None):
    n = cfg.ring_size
    return [[(hops or int(rng.integers(1, n)), random_payload(rng, cfg))
             for _ in range(per_rank)] for _ in range(n)]


@pytest.mark.parametrize("n", [2, 4])
def test_ring_dateline_vcs_and_order(n, seed):
    cfg = CFG.replace(ring_size=n, link_credits=4)
    rng = np.random.default_rng(seed)
    rig = RingRig(cfg)
    bench = SimBench(rig)
    flows = _flows(rng, cfg, 24)
    delivered, cycles = run_ring(bench, rig, flows, rng=rng, p_valid=0.7, p_ready=0.6,
                                 cycles=3000)
    total = sum(len(f) for f in flows)
    assert sum(map(len, delivered)) == total, (seed, cycles)
    for dst in range(n):
        for vc, p in delivered[dst]:
            assert vc == vc_path(p["src"], p["stream"], n)[-1], (seed, dst, p)
        for src in range(n):            # per source, the order it was injected in
            sent = [p["data"] for h, p in flows[src] if (src + h) % n == dst]
            assert [p["data"] for _, p in delivered[dst] if p["src"] == src] == sent, seed


def test_forwarding_adds_nothing_to_the_hop_latency(seed):
    """One flit from rank 1 three hops around a ring of 4 (over the dateline 3 -> 0), nothing
    else moving: it arrives
    3 * hop_latency cycles after it was injected (each forwarding rank passes it from its RX
    output to its TX input in the same cycle: 2 cycles from wire in to wire out)."""
    cfg = CFG.replace(ring_size=4)
    rng = np.random.default_rng(seed)
    rig = RingRig(cfg)
    flows = [[], [(3, random_payload(rng, cfg))], [], []]
    delivered, cycles = run_ring(SimBench(rig), rig, flows, rng=rng, cycles=100)
    assert len(delivered[0]) == 1 and delivered[0][0][0] == 1      # on VC1 after the dateline
    assert cycles - 1 == 3 * hop_latency(cfg)


def test_ring_without_dateline_deadlocks(seed):
    """Four ranks, 2 credits per VC, every flit three hops: without the dateline the VC0
    buffers fill with flits waiting for each other; with it everything arrives."""
    cfg = CFG.replace(ring_size=4, link_credits=2)
    rng = np.random.default_rng(seed)
    flows = _flows(rng, cfg, 16, hops=3)
    done = {}
    for dateline in (True, False):
        rig = RingRig(cfg, dateline=dateline)
        delivered, cycles = run_ring(SimBench(rig), rig, flows, rng=np.random.default_rng(seed),
                                     cycles=600)
        done[dateline] = sum(map(len, delivered))
    assert done[True] == 64, (seed, done)
    assert done[False] < 64, (seed, done)


def test_flit_on_the_wire_decodes(seed):
    """The wire carries the documented format: a flit taken from the TX is unpacked by
    golden's field table into what was sent plus VC, sequence number and a CRC that checks."""
    rng = np.random.default_rng(seed)
    rig, bench = _bench(dateline=True)
    seen = []

    def tap(t, valid, flit):
        if valid:
            seen.append(unpack_flit(CFG, flit))
        return valid, flit
    trace = run_link(bench, rig, _queues(rng, CFG, 5), rng=rng, fault_fwd=tap)
    sent = trace.sent[1]
    assert [s["seq"] for s in seen] == list(range(len(sent)))
    for f, p in zip(seen, sent):
        assert f["vc"] == 1 and all(f[k] == p[k] for k in p)


# --- the long tier (make test-full) ------------------------------------------------------------

@pytest.mark.full
@pytest.mark.parametrize("name", ["small", "default"])
def test_long_random_streams_and_flips(name, seed):
    """Preset ``name``: 2 x 1,000 flits with random gaps and back-pressure, then 200 random
    single-bit flips, each caught by the CRC."""
    cfg = get_preset(name)
    rng = np.random.default_rng(seed)
    rig, bench = _bench(cfg)
    trace = run_link(bench, rig, _queues(rng, cfg, 1000), rng=rng, p_valid=0.8, p_ready=0.6)
    assert not trace.err_cycle, seed
    _in_order(trace)
    for case in range(200):
        f = FlipBit(cfg, int(rng.integers(40)), int(rng.integers(cfg.link_flit_bits)))
        trace = run_link(bench, rig, _queues(rng, cfg, 30), rng=rng, p_valid=0.8,
                         p_ready=0.7, fault_fwd=f, idle_after=4)
        assert trace.info.get("rx") == LINK_FAULTS["crc"], (seed, case, f.k, f.bit)
        _after_error(trace, "rx", "crc", f.hit["cycle"], cfg.link_latency + 1)


@pytest.mark.full
def test_ring_of_8(seed):
    cfg = CFG.replace(ring_size=8, link_credits=3)
    rng = np.random.default_rng(seed)
    rig = RingRig(cfg)
    flows = _flows(rng, cfg, 40)
    delivered, cycles = run_ring(SimBench(rig), rig, flows, rng=rng, p_valid=0.8,
                                 p_ready=0.7, cycles=8000)
    assert sum(map(len, delivered)) == 8 * 40, (seed, cycles)
    for dst in range(8):
        for vc, p in delivered[dst]:
            assert vc == vc_path(p["src"], p["stream"], 8)[-1], (seed, dst, p)
