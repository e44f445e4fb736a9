# SPDX-License-Identifier: Apache-2.0
"""The AXI4 interconnect (rtl/core/axi_mux.py) in amaranth.sim: three managers issue random
read and write bursts (random valid/ready on every channel) to a memory model behind the mux;
every byte read and written is checked against a byte model, and every response must reach the
manager that asked with its own ID (and, with ``resp``, with the response code the
subordinate gave: OKAY, EXOKAY, SLVERR, DECERR at random on every R beat and B)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.config import get_preset
from rtl.core.axi_mux import AXI4Mux
from rtl.dma.axi import RESP_DECERR, RESP_EXOKAY, RESP_OKAY, RESP_SLVERR

CFG = get_preset("small")
BEAT = CFG.axi_data_bits // 8
N = 3
REGION = 0x1000


RESPS = (RESP_OKAY, RESP_EXOKAY, RESP_SLVERR, RESP_DECERR)


def run(seed, n_txn=12, p=0.6, flush_at=None, resp=False):
    """Random traffic; returns ``errors`` (read data wrong), ``mem`` (the subordinate's bytes),
    ``model`` (every write applied at its AW grant), ``handed`` (the initial bytes with only the
    W beats the managers handed over applied: what a flush may leave), ``resps`` (the set of
    ``(manager, "r"|"b", response)`` delivered) and ``flush_beats`` (strobe-less W beats)."""
    rng = random.Random(seed)
    dut = AXI4Mux(CFG, N, w_depth=2)
    ib = dut.signature.in_sig.id_bits
    mem = bytearray(rng.getrandbits(8) for _ in range(N * REGION))
    model = bytearray(mem)
    handed = bytearray(mem)
    # scripts: writes to the lower half of the manager's region, reads of the upper half (AXI
    # does not order reads against writes, so reads never touch what is being written)
    half = REGION // 2
    scripts = []
    for k in range(N):
        s = []
        for _ in range(n_txn):
            beats = rng.randint(1, 6)
            w = rng.random() < 0.5
            addr = k * REGION + (0 if w else half) + BEAT * rng.randrange(half // BEAT - beats)
            if w:
                data = bytes(rng.getrandbits(8) for _ in range(beats * BEAT))
                s.append(("w", addr, beats, data, rng.randrange(1 << ib)))
            else:
                s.append(("r", addr, beats, None, rng.randrange(1 << ib)))
        scripts.append(s)
    out = {"errors": [], "resps": set(), "flush_beats": 0}

    async def bench(ctx):
        st = [{"ar": 0, "aw": 0, "w": [], "r": [], "b": [], "done": 0, "arv": False,
               "awv": False, "wv": False} for _ in range(N)]
        # per manager: issued reads waiting for data (addr, beats, id, expected bytes)
        s_ar, s_aw, s_w, s_r, s_b = [], [], [], [], []
        wbeat = 0
        rbeat = 0
        total = sum(len(x) for x in scripts)
        flushing = False
        for cyc in range(20000):
            if flush_at is not None and cyc == flush_at:
                # the managers are reset: they drop every valid and forget their transactions
                flushing = True
                ctx.set(dut.flush, 1)
                for mm in dut.m:
                    for f in ("arvalid", "awvalid", "wvalid", "rready", "bready"):
                        ctx.set(getattr(mm, f), 0)
            # ----- managers drive -----
            for k, mm in enumerate(dut.m if not flushing else ()):
                t = st[k]
                sc = scripts[k]
                # next address beat: reads and writes from the script in order per kind
                nxt = next((i for i in range(t["ar"], len(sc)) if sc[i][0] == "r"), None)
                t["ar"] = nxt if nxt is not None else len(sc)
                # AXI: a valid once raised stays until its handshake
                t["arv"] = nxt is not None and (t["arv"] or rng.random() < p)
                ctx.set(mm.arvalid, t["arv"])
                if nxt is not None:
                    _, a, bt, _, i = sc[nxt]
                    ctx.set(mm.araddr, a)
                    ctx.set(mm.arlen, bt - 1)
                    ctx.set(mm.arid, i)
                nw = next((i for i in range(t["aw"], len(sc)) if sc[i][0] == "w"), None)
                t["aw"] = nw if nw is not None else len(sc)
                t["awv"] = nw is not None and (t["awv"] or rng.random() < p)
                ctx.set(mm.awvalid, t["awv"])
                if nw is not None:
                    _, a, bt, _, i = sc[nw]
                    ctx.set(mm.awaddr, a)
                    ctx.set(mm.awlen, bt - 1)
                    ctx.set(mm.awid, i)
                # W beats of granted writes, in order (AXI allows W before AW; keep it simple)
                t["wv"] = bool(t["w"]) and (t["wv"] or rng.random() < p)
                ctx.set(mm.wvalid, t["wv"])
                if t["w"]:
                    d, bi, _ = t["w"][0]
                    ctx.set(mm.wdata, int.from_bytes(d[bi * BEAT:(bi + 1) * BEAT], "little"))
                    ctx.set(mm.wstrb, (1 << BEAT) - 1)
                    ctx.set(mm.wlast, bi == len(d) // BEAT - 1)
                ctx.set(mm.rready, rng.random() < p)
                ctx.set(mm.bready, rng.random() < p)
            # ----- subordinate drives -----
            s = dut.s
            ctx.set(s.arready, rng.random() < p)
            ctx.set(s.awready, rng.random() < p)
            ctx.set(s.wready, rng.random() < p)
            rv = bool(s_r) and rng.random() < p
            ctx.set(s.rvalid, rv)
            if s_r:
                a, bt, i = s_r[0]
                ctx.set(s.rid, i)
                ctx.set(s.rdata, int.from_bytes(mem[a + rbeat * BEAT:a + (rbeat + 1) * BEAT],
                                                "little"))
                ctx.set(s.rlast, rbeat == bt - 1)
                rresp = rng.choice(RESPS) if resp else RESP_OKAY
                ctx.set(s.rresp, rresp)
            bv = bool(s_b) and rng.random() < p
            ctx.set(s.bvalid, bv)
            if s_b:
                ctx.set(s.bid, s_b[0])
                bresp = rng.choice(RESPS) if resp else RESP_OKAY
                ctx.set(s.bresp, bresp)
            # ----- sample handshakes (settled) -----
            if ctx.get(s.arvalid) and ctx.get(s.arready):
                s_ar.append((ctx.get(s.araddr), ctx.get(s.arlen) + 1, ctx.get(s.arid)))
            if ctx.get(s.awvalid) and ctx.get(s.awready):
                s_aw.append((ctx.get(s.awaddr), ctx.get(s.awlen) + 1, ctx.get(s.awid)))
            w_fire = ctx.get(s.wvalid) and ctx.get(s.wready)
            if w_fire:
                assert s_aw or s_w, "W beat before any AW reached the subordinate"
                s_w.append((ctx.get(s.wdata), ctx.get(s.wlast), ctx.get(s.wstrb)))
                if flushing:
                    assert ctx.get(s.wstrb) == 0, f"seed {seed}: a flush beat writes"
                    out["flush_beats"] += 1
            r_fire = rv and ctx.get(s.rready)
            b_fire = bv and ctx.get(s.bready)
            for k, mm in enumerate(dut.m if not flushing else ()):
                t = st[k]
                if ctx.get(mm.arvalid) and ctx.get(mm.arready):
                    _, a, bt, _, i = scripts[k][t["ar"]]
                    t["r"].append((a, bt, i, bytes(model[a:a + bt * BEAT]), 0))
                    t["ar"] += 1
                    t["arv"] = False
                if ctx.get(mm.awvalid) and ctx.get(mm.awready):
                    _, a, bt, d, i = scripts[k][t["aw"]]
                    t["w"].append((d, 0, a))
                    t["b"].append(i)
                    model[a:a + bt * BEAT] = d
                    t["aw"] += 1
                    t["awv"] = False
                if ctx.get(mm.wvalid) and ctx.get(mm.wready):
                    d, bi, a = t["w"][0]
                    handed[a + bi * BEAT:a + (bi + 1) * BEAT] = d[bi * BEAT:(bi + 1) * BEAT]
                    t["wv"] = False
                    t["w"][0] = (d, bi + 1, a)
                    if bi + 1 == len(d) // BEAT:
                        t["w"].pop(0)
                if ctx.get(mm.rvalid) and ctx.get(mm.rready):
                    assert r_fire and (ctx.get(s.rid) >> ib) == k, f"seed {seed}: R misrouted"
                    a, bt, i, exp, bi = t["r"][0]
                    assert ctx.get(mm.rid) == i
                    assert ctx.get(mm.rresp) == rresp, \
                        f"seed {seed}: manager {k} got RRESP {ctx.get(mm.rresp)}, not {rresp}"
                    out["resps"].add((k, "r", rresp))
                    got = ctx.get(mm.rdata).to_bytes(BEAT, "little")
                    if got != exp[bi * BEAT:(bi + 1) * BEAT]:
                        out["errors"].append((k, a, bi))
                    assert ctx.get(mm.rlast) == (bi == bt - 1)
                    t["r"][0] = (a, bt, i, exp, bi + 1)
                    if bi + 1 == bt:
                        t["r"].pop(0)
                        t["done"] += 1
                if ctx.get(mm.bvalid) and ctx.get(mm.bready):
                    assert b_fire and (ctx.get(s.bid) >> ib) == k, f"seed {seed}: B misrouted"
                    assert ctx.get(mm.bid) == t["b"].pop(0)
                    assert ctx.get(mm.bresp) == bresp, \
                        f"seed {seed}: manager {k} got BRESP {ctx.get(mm.bresp)}, not {bresp}"
                    out["resps"].add((k, "b", bresp))
                    t["done"] += 1
            await ctx.tick()
            # ----- subordinate state -----
            while s_ar:
                s_r.append(s_ar.pop(0))
            if r_fire:
                rbeat += 1
                if rbeat == s_r[0][1]:
                    s_r.pop(0)
                    rbeat = 0
            if w_fire:
                a, bt, i = s_aw[0]
                d, last, strb = s_w.pop(0)
                for j, byte in enumerate(d.to_bytes(BEAT, "little")):
                    if strb >> j & 1:
                        mem[a + wbeat * BEAT + j] = byte
                wbeat += 1
                assert bool(last) == (wbeat == bt), f"seed {seed}: wlast"
                if last:
                    s_aw.pop(0)
                    s_b.append(i)
                    wbeat = 0
            if b_fire:
                s_b.pop(0)
            if flushing and not ctx.get(dut.busy):
                # quiet: every burst the subordinate took is complete and answered
                assert not (s_ar or s_r or s_aw or s_w or s_b) and wbeat == 0, \
                    f"seed {seed}: busy low with {len(s_r)} reads, {len(s_aw)} writes open"
                out["flush_cycles"] = cyc - flush_at
                break
            if not flushing and sum(t["done"] for t in st) == total:
                break
        else:
            raise AssertionError(f"seed {seed}: transactions did not finish")
        if not flushing:
            # all answered: with the subordinate silent and every manager ready for
            # responses, busy (the soft reset's "port quiet") must fall and stay low
            ctx.set(s.rvalid, 0)
            ctx.set(s.bvalid, 0)
            for mm in dut.m:
                for f in ("arvalid", "awvalid", "wvalid"):
                    ctx.set(getattr(mm, f), 0)
                ctx.set(mm.rready, 1)
                ctx.set(mm.bready, 1)
            await ctx.tick().repeat(2)
            for _ in range(8):
                assert not ctx.get(dut.busy), f"seed {seed}: busy with nothing open"
                await ctx.tick()
        out["mem"] = mem
        out["model"] = model
        out["handed"] = handed

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("seed", range(4))
def test_axi_mux_random_traffic(seed):
    out = run(seed)
    assert not out["errors"], f"seed {seed}: read data wrong at {out['errors'][:4]}"
    assert out["mem"] == out["model"], f"seed {seed}: memory differs"


@pytest.mark.parametrize("seed", range(6))
def test_axi_mux_flush_leaves_the_bus_quiet(seed):
    """Flush (the soft reset) at a random cycle of random traffic: the open W bursts end with
    strobe-less beats at their wlast, every response is sunk, and busy drops only when the
    subordinate has nothing open (checked in the model), within a bounded time."""
    out = run(seed + 100, flush_at=random.Random(seed).randrange(10, 120))
    assert "flush_cycles" in out, f"seed {seed}: busy never dropped"


def test_axi_mux_error_responses_reach_their_manager():
    """Every R beat and B carries a random response (OKAY, EXOKAY, SLVERR, DECERR): each one
    reaches the manager whose ID it carries with the code the subordinate gave, and every
    manager sees SLVERR and DECERR on both R and B (a bus error on instruction fetch, a
    descriptor read or a DMA transfer must not vanish in the interconnect)."""
    seen = set()
    for seed in range(2):
        out = run(seed + 200, resp=True)
        assert out["mem"] == out["model"], f"seed {seed + 200}: memory differs"
        seen |= out["resps"]
    want = {(k, ch, r) for k in range(N) for ch in "rb" for r in (RESP_SLVERR, RESP_DECERR)}
    assert want <= seen, f"error responses never delivered: {sorted(want - seen)}"


def test_axi_mux_flush_leaves_dram_as_the_managers_wrote_it():
    """A soft reset (flush) with writes in flight: once busy falls, DRAM holds the initial bytes
    with exactly the W beats the managers handed over applied, byte for byte; the beats the mux
    adds to finish an open burst write nothing (stale or otherwise). Flush cycles are drawn
    while writes are open; together the runs must end at least one burst with mux beats."""
    beats = 0
    for seed in range(8):
        out = run(seed + 300, flush_at=random.Random(seed).randrange(20, 90))
        assert "flush_cycles" in out, f"seed {seed + 300}: busy never dropped"
        bad = [i for i, (x, y) in enumerate(zip(out["mem"], out["handed"])) if x != y]
        assert not bad, (f"seed {seed + 300}: {len(bad)} DRAM bytes differ from the handed "
                         f"writes, first at {bad[0]:#x}")
        beats += out["flush_beats"]
    assert beats, "no flush caught a W burst open: the test did not test the flush beats"


def _directed(bench_fn):
    dut = AXI4Mux(CFG, N, w_depth=2)
    sim = Simulator(dut)
    sim.add_clock(1e-8)

    async def bench(ctx):
        await bench_fn(ctx, dut)
    sim.add_testbench(bench)
    sim.run()


def test_axi_mux_busy_while_an_address_beat_waits():
    """An AR or AW granted and held in the mux while the subordinate does not take it: busy
    stays high every cycle (the soft reset must not see a quiet port with a beat about to go
    out), and falls once the beat is answered."""
    async def bench(ctx, dut):
        mm, s = dut.m[1], dut.s
        for ch in ("ar", "aw"):
            ctx.set(getattr(s, f"{ch}ready"), 0)
            ctx.set(getattr(mm, f"{ch}valid"), 1)
            ctx.set(getattr(mm, f"{ch}addr"), 0x100)
            ctx.set(getattr(mm, f"{ch}len"), 0)
            await ctx.tick()                     # granted: taken from the manager
            ctx.set(getattr(mm, f"{ch}valid"), 0)
            for cyc in range(6):
                await ctx.tick()
                assert ctx.get(getattr(s, f"{ch}valid")), f"{ch}: beat not held"
                assert ctx.get(dut.busy), f"{ch}: busy low with the beat held, cycle {cyc}"
            ctx.set(getattr(s, f"{ch}ready"), 1)
            await ctx.tick()
            ctx.set(getattr(s, f"{ch}ready"), 0)
            # the answer: one R beat (last) or W beat then B
            if ch == "ar":
                ctx.set(s.rid, 1 << dut.signature.in_sig.id_bits)
                ctx.set(s.rlast, 1)
                ctx.set(s.rvalid, 1)
                ctx.set(mm.rready, 1)
                await ctx.tick()
                ctx.set(s.rvalid, 0)
            else:
                ctx.set(mm.wvalid, 1)
                ctx.set(mm.wlast, 1)
                ctx.set(s.wready, 1)
                for _ in range(8):              # the W FIFO's head is this burst's
                    took = ctx.get(mm.wready)
                    await ctx.tick()
                    if took:
                        break
                else:
                    raise AssertionError("the W beat was never taken")
                ctx.set(mm.wvalid, 0)
                ctx.set(s.bid, 1 << dut.signature.in_sig.id_bits)
                ctx.set(s.bvalid, 1)
                ctx.set(mm.bready, 1)
                await ctx.tick()
                ctx.set(s.bvalid, 0)
            await ctx.tick()
            assert not ctx.get(dut.busy), f"{ch}: busy after the answer"
    _directed(bench)


def test_axi_mux_flush_ends_a_256_beat_burst_at_its_last_beat():
    """A flush with a 256-beat write burst (AXI4's longest) open after 3 beats: the mux adds
    exactly 253 strobe-less beats, wlast on the 256th only."""
    async def bench(ctx, dut):
        mm, s = dut.m[2], dut.s
        ctx.set(s.awready, 1)
        ctx.set(mm.awvalid, 1)
        ctx.set(mm.awlen, 255)
        await ctx.tick()
        ctx.set(mm.awvalid, 0)
        await ctx.tick()                         # the AW went out
        ctx.set(s.wready, 1)
        ctx.set(mm.wvalid, 1)
        ctx.set(mm.wstrb, (1 << BEAT) - 1)
        sent = 0
        for _ in range(20):
            if sent == 3:
                break
            sent += ctx.get(mm.wready)
            await ctx.tick()
        assert sent == 3
        ctx.set(mm.wvalid, 0)
        ctx.set(dut.flush, 1)
        beats, lasts = 3, []
        for _ in range(400):
            if ctx.get(s.wvalid):
                assert ctx.get(s.wstrb) == 0
                beats += 1
                if ctx.get(s.wlast):
                    lasts.append(beats)
            await ctx.tick()
        assert lasts == [256], f"wlast at beats {lasts}, {beats} beats in all"
    _directed(bench)
