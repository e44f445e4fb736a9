# SPDX-License-Identifier: Apache-2.0
"""RowPortMux (rtl/mem/rowmux.py) in amaranth.sim: three requesters with random reads and writes
onto a row-port memory model (latency 1, random stalls); every read returns the value the
sequential model holds at its grant, to the requester that asked, and nobody starves."""

import random

import pytest
from amaranth.sim import Simulator

from rtl.config import get_preset
from rtl.mem.rowmux import RowPortMux

CFG = get_preset("small")
N = 3


@pytest.mark.parametrize("seed", range(3))
def test_rowmux_random(seed):
    rng = random.Random(seed)
    dut = RowPortMux(CFG, "psum", N)
    P = CFG.partitions
    depth = 1 << len(dut.down.req.payload.addr)
    out = {}

    async def bench(ctx):
        mem = {}
        pend = [None] * N            # the request each requester holds
        want = [[] for _ in range(N)]
        got = [[] for _ in range(N)]
        waits = [0] * N
        rsp = None                   # read data due next cycle
        for _ in range(800):
            for k, u in enumerate(dut.up):
                if pend[k] is None and rng.random() < 0.6:
                    we = rng.random() < 0.4
                    pend[k] = (rng.randrange(min(depth, 16)), we,
                               [rng.getrandbits(32) for _ in range(P)])
                ctx.set(u.req.valid, pend[k] is not None)
                if pend[k] is not None:
                    a, we, d = pend[k]
                    ctx.set(u.req.payload.addr, a)
                    ctx.set(u.req.payload.we, we)
                    ctx.set(u.req.payload.mask, (1 << P) - 1)
                    ctx.set(u.req.payload.be, 0xF)
                    for p in range(P):
                        ctx.set(u.req.payload.wdata[p], d[p])
            ready = rng.random() < 0.7
            ctx.set(dut.down.req.ready, ready)
            ctx.set(dut.down.rsp.valid, rsp is not None)
            if rsp is not None:
                for p in range(P):
                    ctx.set(dut.down.rsp.payload[p], rsp[p])
            for k, u in enumerate(dut.up):
                if ctx.get(u.rsp.valid):
                    got[k].append([ctx.get(u.rsp.payload[p]) for p in range(P)])
            rsp = None
            taken = [pend[k] is not None and ctx.get(u.req.ready) for k, u in enumerate(dut.up)]
            assert sum(taken) <= 1
            if ctx.get(dut.down.req.valid) and ready:
                assert any(taken)
            for k in range(N):
                if taken[k]:
                    a, we, d = pend[k]
                    if we:
                        mem[a] = d
                    else:
                        v = mem.get(a, [0] * P)
                        want[k].append(v)
                        rsp = v
                    pend[k] = None
                    waits[k] = 0
                elif pend[k] is not None:
                    waits[k] += 1
                    assert waits[k] < 40, f"seed {seed}: requester {k} starved"
            await ctx.tick()
        out["want"], out["got"] = want, got

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for k in range(N):
        n = len(out["got"][k])
        assert out["got"][k] == out["want"][k][:n] and len(out["want"][k]) - n <= 1, \
            f"seed {seed}: requester {k}"
        assert n > 20
