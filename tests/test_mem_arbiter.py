# SPDX-License-Identifier: Apache-2.0
"""The round-robin pickers of ``rtl/mem/arbiter.py`` in Amaranth's simulator, exhaustively: for
every requester count the row-port and AXI muxes use, every ``last`` and every set of valid
requesters, the grant is the first valid requester after ``last`` in cyclic order (the
expected index comes from that sentence in Python, not from the RTL). ``round_robin`` (the bank
arbiter's one-hot form) is held to the same rule."""

from __future__ import annotations

import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.sim import Simulator

from rtl.mem.arbiter import round_robin, rr_pick


def _expected(valids, last, n):
    for k in range(1, n + 1):
        j = (last + k) % n
        if valids >> j & 1:
            return j
    return None


def _run(n, check):
    valids, last = Signal(n), Signal(range(n))
    m = Module()
    found, pick = rr_pick(m, valids, last, n, "rr")
    onehot = Cat(*round_robin(list(valids), last))
    sig = {"found": found, "pick": pick, "onehot": onehot}

    async def bench(ctx):
        for lst in range(n):
            for v in range(1 << n):
                ctx.set(last, lst)
                ctx.set(valids, v)
                check(v, lst, {k: ctx.get(s) for k, s in sig.items()})

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_round_robin_grants_the_first_valid_after_last(n):
    seen = [0]

    def check(v, lst, got):
        want = _expected(v, lst, n)
        where = f"n={n} last={lst} valids={v:0{n}b}"
        assert got["found"] == (want is not None), where
        assert got["onehot"] == (0 if want is None else 1 << want), where
        if want is not None:
            assert got["pick"] == want, where
        seen[0] += 1

    _run(n, check)
    assert seen[0] == n << n
