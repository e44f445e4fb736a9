# SPDX-License-Identifier: Apache-2.0
"""The tensor engine's per-operation completion (``op_issue`` / ``op_done``,
docs/tensor-engine.md "Operation completion") in amaranth.sim: one ``op_done`` per matmul or
transpose taken, in order, the cycle after that operation's last PSUM write landed
(``psum_we``), while later operations keep streaming; rejected commands and loads have none.
Expectations from the documented behaviour, not from the RTL."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Value

from rtl.config import get_preset
from rtl.tensor.engine import TensorEngine
from rtl.tensor.layouts import OP_LOAD, OP_MATMUL, OP_TRANSPOSE, TensorLayouts
from tb.amsim import SimBench

#: The small array, one format (a short elaboration).
CFG = get_preset("small").replace(formats=("bf16",), mx_formats=(), sparse_patterns=())
TL = TensorLayouts(CFG)
R, C, B = CFG.pe_rows, CFG.pe_cols, CFG.psum_bank_fp32


@pytest.fixture(scope="module")
def bench():
    return SimBench(TensorEngine(CFG, use_instances=False))


@pytest.mark.parametrize("seed", [0, 1])
def test_op_done_per_operation_in_order_without_drain(bench, seed):
    rng = random.Random(seed)
    e = bench.dut
    ops = []                               # (command, PSUM writes it makes or None)
    for _ in range(6):
        kind = rng.choice(["mm", "mm", "tp", "bad"])
        if kind == "mm":
            n = rng.randint(1, B)
            ops.append((TL.pack_cmd(OP_MATMUL, k=R, n=n, bank=rng.randrange(CFG.psum_banks),
                                    acc=rng.random() < 0.5), n))
        elif kind == "tp":
            ops.append((TL.pack_cmd(OP_TRANSPOSE, k=R, bank=rng.randrange(CFG.psum_banks)), R))
        else:                              # no columns: rejected (ERR_SHAPE), no operation
            ops.append((TL.pack_cmd(OP_MATMUL, k=R, n=0), None))
    cmds = [TL.pack_cmd(OP_LOAD, fmt=0, m=C)] + [c for c, _ in ops]
    ev = {"we": [], "issue": [], "done": []}

    async def job(ctx):
        ctx.set(e.st.valid, 1)
        ctx.set(Value.cast(e.st.payload), TL.pack_lanes([0x3F80] * R))
        ctx.set(e.mv.valid, 1)
        ctx.set(Value.cast(e.mv.payload), TL.pack_lanes([0x4000] * R))
        ctx.set(e.res.ready, 1)
        pend = list(cmds)
        for now in range(400):
            if pend:
                ctx.set(Value.cast(e.cmd.payload), pend[0])
            ctx.set(e.cmd.valid, bool(pend))
            if pend and ctx.get(e.cmd.ready):
                pend.pop(0)
            for key, sig in (("we", e.psum_we), ("issue", e.op_issue), ("done", e.op_done)):
                if ctx.get(sig):
                    ev[key].append(now)
            await ctx.tick()
            if not pend and not ctx.get(e.busy) and now > 10:
                return
        raise AssertionError(f"engine still busy (seed {seed})")

    bench.run(job)
    good = [n for _, n in ops if n is not None]
    assert len(ev["issue"]) == len(good), (seed, ev, good)
    assert len(ev["done"]) == len(good), (seed, ev)
    assert len(ev["we"]) == sum(good), (seed, ev)
    last_write, i = [], 0
    for n in good:
        i += n
        last_write.append(ev["we"][i - 1])
    # each op_done the cycle after its operation's last write landed, in order
    assert ev["done"] == [t + 1 for t in last_write], (seed, ev)
    assert all(d > s for d, s in zip(ev["done"], ev["issue"]))
    # the first operations complete while later ones still stream (no drain between them)
    if len(good) > 1:
        assert ev["done"][0] < ev["we"][-1], (seed, ev)
