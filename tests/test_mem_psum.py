# SPDX-License-Identifier: Apache-2.0
"""PSUM's row ports (``rtl/tensor/psum.py`` ``PsumUnit(row_ports=...)``) in Amaranth's simulator:
reads and writes with lane masks and byte enables against a Python model, the tensor engine
winning a bank while a row port on another bank proceeds, round-robin between row ports, and a
row write accumulated onto by the tensor (the defined FP32 add, golden ``psum_update``)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Value

from golden.tensor import psum_update
from rtl.config import get_preset
from rtl.tensor.psum import PsumUnit
from tb.amsim import SimBench

SMALL = get_preset("small")
#: pe_cols < partitions: lanes >= pe_cols must read 0 and never be written.
NARROW = SMALL.replace(pe_cols=2)
ROWS = ("vector", "scalar")


@pytest.fixture(scope="module", params=["small", "narrow"])
def bench(request):
    cfg = {"small": SMALL, "narrow": NARROW}[request.param]
    return SimBench(PsumUnit(cfg, use_instances=False, row_ports=ROWS))


def _lanes(x, n):
    return [(x >> (32 * p)) & 0xFFFFFFFF for p in range(n)]


class Rig:
    """Drive the tensor input and the row ports cycle by cycle from per-cycle scripts."""

    def __init__(self, psu):
        self.psu = psu
        self.cfg = psu.cfg

    def beat(self, ctx, b):
        lay = self.psu.in_layout
        ctx.set(Value.cast(self.psu.i.payload), lay.const(b).as_value().value)

    def row(self, ctx, name, r):
        port = getattr(self.psu, name)
        ctx.set(port.req.payload, port.req.payload.shape().const(r))


def test_row_ports_read_write_masks_byte_enables(bench, seed):
    """Random row writes and reads on both ports (tensor idle) against a byte model; a read's
    data one cycle after its grant, only on ``rsp.valid``."""
    psu = bench.dut
    cfg = psu.cfg
    P, C = cfg.partitions, cfg.pe_cols
    depth = cfg.psum_banks * cfg.psum_bank_fp32
    rng = np.random.default_rng([seed, 40])
    model = np.zeros((depth, P), np.uint32)
    rig = Rig(psu)
    errors = []

    async def job(ctx):
        ctx.set(psu.i.valid, 0)
        due = {n: None for n in ROWS}
        for t in range(300):
            for n in ROWS:
                port = getattr(psu, n)
                v = ctx.get(port.rsp.valid)
                if (due[n] is not None) != bool(v):
                    errors.append(f"cycle {t} {n}: rsp.valid {v}, expected {due[n] is not None}")
                if due[n] is not None and v:
                    mask, want = due[n]
                    got = _lanes(ctx.get(Value.cast(port.rsp.payload)), P)
                    for p in range(P):
                        if mask >> p & 1 and got[p] != want[p]:
                            errors.append(f"cycle {t} {n} lane {p}: {got[p]:#x} != {want[p]:#x}")
                due[n] = None
            reqs = {}
            for n in ROWS:
                r = {"addr": int(rng.integers(depth)), "mask": int(rng.integers(1, 1 << P)),
                     "we": int(rng.random() < 0.5), "be": int(rng.integers(16)),
                     "wdata": [int(x) for x in rng.integers(0, 1 << 32, P, dtype=np.uint64)]}
                rig.row(ctx, n, r)
                ctx.set(getattr(psu, n).req.valid, 1)
                reqs[n] = r
            for n in ROWS:
                if not ctx.get(getattr(psu, n).req.ready):
                    continue
                r = reqs[n]
                if r["we"]:
                    for p in range(C):
                        if r["mask"] >> p & 1:
                            old = int(model[r["addr"], p])
                            for j in range(4):
                                if r["be"] >> j & 1:
                                    old = (old & ~(0xFF << 8 * j)) | (r["wdata"][p] & (0xFF << 8 * j))
                            model[r["addr"], p] = old
                else:
                    due[n] = (r["mask"], [int(x) for x in model[r["addr"]]])
            await ctx.tick()
        for n in ROWS:
            ctx.set(getattr(psu, n).req.valid, 0)
    bench.run(job)
    assert not errors, f"seed {seed}: " + "; ".join(errors[:5])


def test_tensor_wins_bank_other_bank_proceeds(bench):
    """The tensor streams overwrite beats into bank 1; ``vector`` asks for bank 1 and waits until
    no tensor beat for bank 1 is offered or in the pipeline; ``scalar`` on bank 0 is served at
    once, in the same cycles. The vector then reads what the tensor wrote (golden)."""
    psu = bench.dut
    cfg = psu.cfg
    C, B = cfg.pe_cols, cfg.psum_bank_fp32
    L = psu.latency
    rig = Rig(psu)
    vals = [[0x3F800000 + 7 * k + c for c in range(C)] for k in range(6)]
    trace = {"vec_ready": [], "sc_ready": [], "data": None}

    async def job(ctx):
        ctx.set(psu.i.valid, 1)
        rig.row(ctx, "vector", {"addr": B + 2, "mask": (1 << cfg.partitions) - 1, "we": 0})
        rig.row(ctx, "scalar", {"addr": 3, "mask": 1, "we": 0})
        ctx.set(psu.vector.req.valid, 1)
        k, t = 0, 0
        while True:
            if k < len(vals):
                rig.beat(ctx, {"addr": B + k, "acc": 0, "mask": (1 << C) - 1, "value": vals[k]})
            ctx.set(psu.i.valid, int(k < len(vals)))
            ctx.set(psu.scalar.req.valid, int(t < 4))
            trace["vec_ready"].append(ctx.get(psu.vector.req.ready))
            trace["sc_ready"].append(ctx.get(psu.scalar.req.ready) if t < 4 else None)
            if k < len(vals) and ctx.get(psu.i.ready):
                k += 1
            done = trace["vec_ready"][-1]
            await ctx.tick()
            t += 1
            if done:
                break
            assert t < 50, "vector row port never granted"
        ctx.set(psu.vector.req.valid, 0)
        assert ctx.get(psu.vector.rsp.valid)
        trace["data"] = _lanes(ctx.get(Value.cast(psu.vector.rsp.payload)), cfg.partitions)
    bench.run(job)
    n = len(vals)
    # beats offered in cycles 0..n-1, the last one written at the end of cycle n-1+L
    assert trace["vec_ready"] == [0] * (n + L) + [1], trace["vec_ready"]
    assert trace["sc_ready"][:4] == [1, 1, 1, 1]
    assert trace["data"][:C] == vals[2]
    assert all(x == 0 for x in trace["data"][C:])


def test_row_ports_round_robin_and_parallel_banks(bench):
    """Both row ports on one bank: they alternate; on two banks: both every cycle."""
    psu = bench.dut
    B = psu.cfg.psum_bank_fp32
    rig = Rig(psu)
    seen = []

    async def job(ctx):
        ctx.set(psu.i.valid, 0)
        for addr_s in (1, B + 1):
            rig.row(ctx, "vector", {"addr": 0, "mask": 1, "we": 0})
            rig.row(ctx, "scalar", {"addr": addr_s, "mask": 1, "we": 0})
            ctx.set(psu.vector.req.valid, 1)
            ctx.set(psu.scalar.req.valid, 1)
            for _ in range(4):
                seen.append((addr_s, ctx.get(psu.vector.req.ready),
                             ctx.get(psu.scalar.req.ready)))
                await ctx.tick()
    bench.run(job)
    same = [(v, s) for a, v, s in seen if a == 1]
    assert all(v + s == 1 for v, s in same) and same[0] != same[1] and same[1] != same[2]
    assert all(v and s for a, v, s in seen if a == B + 1)


def test_tensor_accumulates_onto_row_write(bench):
    """A row write, then a tensor accumulate into the same entry: the sum is golden
    ``psum_update(row value, new)`` (the defined FP32 add, architecture §4.2)."""
    psu = bench.dut
    cfg = psu.cfg
    C, P = cfg.pe_cols, cfg.partitions
    rig = Rig(psu)
    row_vals = [0x40400000 + c for c in range(P)]
    new = [0x3FC00000 + 3 * c for c in range(C)]
    out = {}

    async def job(ctx):
        ctx.set(psu.i.valid, 0)
        rig.row(ctx, "scalar", {"addr": 5, "mask": (1 << P) - 1, "we": 1, "be": 0xF,
                                "wdata": row_vals})
        ctx.set(psu.scalar.req.valid, 1)
        assert ctx.get(psu.scalar.req.ready)
        await ctx.tick()
        ctx.set(psu.scalar.req.valid, 0)
        rig.beat(ctx, {"addr": 5, "acc": 1, "mask": (1 << C) - 1, "value": new})
        ctx.set(psu.i.valid, 1)
        assert ctx.get(psu.i.ready)
        await ctx.tick()
        ctx.set(psu.i.valid, 0)
        for _ in range(psu.latency + 1):
            await ctx.tick()
        rig.row(ctx, "scalar", {"addr": 5, "mask": (1 << P) - 1, "we": 0})
        ctx.set(psu.scalar.req.valid, 1)
        await ctx.tick()
        ctx.set(psu.scalar.req.valid, 0)
        out["got"] = _lanes(ctx.get(Value.cast(psu.scalar.rsp.payload)), P)
    bench.run(job)
    want = psum_update(np.array(row_vals[:C], np.uint32), np.array(new, np.uint32), True)
    assert out["got"][:C] == [int(x) for x in want]


def test_psum_signature_row_ports():
    sig = PsumUnit.Signature(SMALL, row_ports=ROWS)
    assert sig.row_ports == ROWS and sig.row_latency == 1
    assert "vector" in sig.members and "scalar" in sig.members
    with pytest.raises(ValueError, match="unique"):
        PsumUnit.Signature(SMALL, row_ports=("a", "a"))
    with pytest.raises(ValueError, match="identifiers other than"):
        PsumUnit.Signature(SMALL, row_ports=("rd",))
