# SPDX-License-Identifier: Apache-2.0
"""SBUF (``rtl/mem/sbuf.py``) in Amaranth's simulator: random multi-requester traffic against a
naive Python model (``tb/mem/model.py``), arbitration order, the starvation bound, parallel
banks, and the signature's parameter checks. Expected data come from the model, bounds from
the documented arbiter guarantee (docs/memory.md §5), never from the RTL."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Value

from rtl.config import get_preset
from rtl.mem.sbuf import SBUF
from tb.amsim import SimBench
from tb.mem.traffic import run_traffic

SMALL = get_preset("small")
#: Every port kind, two priority ports (the tensor engine's), a short yield period so that the
#: yield path is exercised often.
PORTS = dict(row_ports=("tensor_st", "tensor_mv", "vector"), part_ports=("dma0", "dma1"),
             priority=("tensor_st", "tensor_mv"), yield_after=3)


@pytest.fixture(scope="module")
def bench():
    return SimBench(SBUF(SMALL, **PORTS))


def test_random_traffic_matches_model(bench, seed):
    st = run_traffic(bench, seed=seed, n_requests=150)
    assert st["reads"] > 100 and st["writes"] > 100
    assert st["max_parallel"] >= 2, "no two banks were ever served in the same cycle"
    # a hot bank makes ports collide: somebody must have waited
    assert max(max(w) for w in st["waits"].values()) > 1
    print(f"{st['cycles']} cycles, max waits " +
          ", ".join(f"{n}={max(w)}" for n, w in st["waits"].items()))


def test_all_on_one_bank_every_wait_within_bound(bench, seed):
    """Every port always requesting the same bank: each wait below its documented bound, and
    the non-priority ports are served (no starvation) while the tensor ports keep most grants."""
    st = run_traffic(bench, seed=seed, n_requests=60, p_valid=1.0, p_hot=1.0)
    sig = bench.dut.signature
    for n, w in st["waits"].items():
        assert max(w) <= sig.wait_bound(n), (n, max(w))
    # all 300 requests went through one bank: one grant per cycle at most
    assert st["max_parallel"] == 1


def test_different_banks_in_parallel(bench):
    """Five ports on five... four banks, every cycle: one grant per bank per cycle, so the whole
    run takes about n_requests cycles, not 4 x n_requests."""
    dut = bench.dut
    cfg = dut.cfg
    names = ["tensor_st", "tensor_mv", "vector", "dma0"]

    async def job(ctx):
        lay = {n: getattr(dut, n).req.payload.shape() for n in names}
        for b, n in enumerate(names):
            base = b * cfg.sbuf_bank_bytes
            if n == "dma0":
                ctx.set(dut.dma0.req.payload, lay[n].const(
                    {"part": 1, "addr": base, "we": 1, "be": 0xFF, "wdata": 0x1122334455667788}))
            else:
                ctx.set(getattr(dut, n).req.payload, lay[n].const(
                    {"addr": base + 4, "mask": 0xF, "we": 0}))
            ctx.set(getattr(dut, n).req.valid, 1)
        for _ in range(4):
            assert all(ctx.get(getattr(dut, n).req.ready) for n in names)
            await ctx.tick()
        for n in names:
            ctx.set(getattr(dut, n).req.valid, 0)
    bench.run(job)


def test_priority_then_round_robin_then_yield(seed):
    """Directed order on one bank: the two tensor ports alternate (round-robin within the
    priority group) while the others wait, and after ``yield_after`` cycles of waiting the
    others get exactly one cycle, in round-robin order among themselves."""
    Y = 4
    dut = SBUF(SMALL, row_ports=("tensor_st", "tensor_mv", "vector"), part_ports=("dma0",),
               priority=("tensor_st", "tensor_mv"), yield_after=Y)
    b = SimBench(dut)
    names = ["tensor_st", "tensor_mv", "vector", "dma0"]
    order = []

    async def job(ctx):
        for n in names:
            p = getattr(dut, n).req
            lay = p.payload.shape()
            ctx.set(p.payload, lay.const({"addr": 0, "we": 0}))
            ctx.set(p.valid, 1)
        for _ in range(3 * (Y + 1)):
            g = [n for n in names if ctx.get(getattr(dut, n).req.ready)]
            assert len(g) == 1, g
            order.append(g[0])
            await ctx.tick()
    b.run(job)
    hi = ["tensor_st", "tensor_mv"]
    for k, n in enumerate(order):
        if k % (Y + 1) == Y:
            assert n == ("vector", "dma0")[(k // (Y + 1)) % 2], (k, order)
        else:
            assert n in hi, (k, order)
    hi_order = [n for n in order if n in hi]
    assert all(a != b for a, b in zip(hi_order, hi_order[1:])), hi_order


def test_write_then_read_same_cycle_other_bank_and_byte_enables():
    """A row write with partial byte enables and mask, read back by a partition port: only the
    enabled bytes of the masked partitions changed (the model says which)."""
    dut = SBUF(SMALL, row_ports=("r",), part_ports=("p",))
    b = SimBench(dut)
    WB = SMALL.sbuf_word_bytes
    got = {}

    async def job(ctx):
        rl, pl = dut.r.req.payload.shape(), dut.p.req.payload.shape()
        ctx.set(dut.r.req.payload, rl.const({"addr": 4 + 2, "mask": 0b0101, "we": 1,
                                             "be": 0b0110, "wdata": [0xA1B2C3D4 + p
                                                                     for p in range(4)]}))
        ctx.set(dut.r.req.valid, 1)
        await ctx.tick()
        ctx.set(dut.r.req.valid, 0)
        for part in range(4):
            ctx.set(dut.p.req.payload, pl.const({"part": part, "addr": 0, "we": 0}))
            ctx.set(dut.p.req.valid, 1)
            assert ctx.get(dut.p.req.ready)
            await ctx.tick()
            assert ctx.get(dut.p.rsp.valid)
            got[part] = ctx.get(Value.cast(dut.p.rsp.payload))
        ctx.set(dut.p.req.valid, 0)
    b.run(job)
    for part in range(4):
        word = 0
        if part in (0, 2):
            lane = (0xA1B2C3D4 + part) & 0x00FFFF00
            word = lane << 32
        assert got[part] == word, (part, hex(got[part]))
    assert WB == 8


def test_signature_checks():
    sig = SBUF.Signature(SMALL, row_ports=("a",), part_ports=("b",), priority=("a",))
    assert sig.latency == 1 and sig.depth == SMALL.sbuf_bank_bytes // SMALL.sbuf_word_bytes
    assert sig.wait_bound("a") == 2 and sig.wait_bound("b") == 17
    with pytest.raises(ValueError, match="at least one port"):
        SBUF.Signature(SMALL)
    with pytest.raises(ValueError, match="unique"):
        SBUF.Signature(SMALL, row_ports=("a",), part_ports=("a",))
    with pytest.raises(ValueError, match="priority port must be one of"):
        SBUF.Signature(SMALL, row_ports=("a",), priority=("x",))
    with pytest.raises(ValueError, match=r"yield_after must be an integer in \[1, 1024\], not 0"):
        SBUF.Signature(SMALL, row_ports=("a",), yield_after=0)
    with pytest.raises(TypeError, match="identifiers"):
        SBUF.Signature(SMALL, row_ports=("a b",))
    with pytest.raises(TypeError, match="SBUF cfg must be a CoreConfig"):
        SBUF.Signature("small", row_ports=("a",))


@pytest.mark.full
@pytest.mark.parametrize("k", range(4))
def test_random_traffic_default_preset(k, seed):
    cfg = get_preset("default")
    b = SimBench(SBUF(cfg, **PORTS))
    st = run_traffic(b, seed=[seed, k], n_requests=300,
                     p_hot=float(np.random.default_rng([seed, k]).random()))
    assert st["reads"] and st["writes"]
