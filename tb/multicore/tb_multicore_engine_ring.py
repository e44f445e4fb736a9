# SPDX-License-Identifier: Apache-2.0
"""cocotb test of the collective-engine ring on Verilator (:class:`tb.multicore.harness.
EngineRingHarness`): per case (``params["cases"]``: ``{"op", "size", "seed", "layout"}``
and ``d`` for a send_recv, :func:`tb.multicore.build.ring_case`: the permute engine's ring runs
all_to_all and send_recv, the collective engine's the others) every rank's SBUF is preloaded, the same FP32
collective issued to every rank in one cycle and every rank's ``done`` awaited within a cycle
budget (:func:`cycle_budget`, or the case's ``max_cycles``); then every rank's status and whole
SBUF must equal the golden multi-core simulator's bit for bit. Each case's cycles (issue to the
last rank's done) go to ``params["metrics"]``. A case may cut a link (``cut``: no flit or
credit crosses link ``cut -> cut + 1``; the watchdog off): a test that the wait is bounded."""

from __future__ import annotations

import time

import cocotb
import numpy as np

from golden.asm import assemble
from rtl.collective.engine import instr_layout
from tb.multicore.driver import EngineRingTB
from tb.multicore.build import ring_case
from tb.multicore.program import engine_ring_golden
from tb.multicore.rig import instr_fields


def cycle_budget(cfg, size):
    """Cycles a case of ``size`` bytes per core may take before it counts as hung: 16 times
    the flits of the whole message plus 20,000 (the ring schedule needs about 2 flit times
    per flit of the message)."""
    return 20_000 + 16 * size * 8 // cfg.link_bits


@cocotb.test()
async def engine_ring_cases(dut):
    tb = EngineRingTB(dut)
    cfg, n = tb.cfg, tb.n
    fields = instr_layout(cfg)
    cases = tb.params.get("cases") or [{"op": "all_reduce", "size": 4 * cfg.partitions * n}]
    for k, case in enumerate(cases):
        op, size = case["op"], int(case["size"])
        seed = int(case.get("seed", tb.seed))
        layout = case.get("layout", "packed")
        what = f"case {k} {op} {size} B seed {seed} {layout}"
        text, images = ring_case(cfg, {**case, "seed": seed, "layout": layout})
        gerrs, want = engine_ring_golden(cfg, text, images)
        assert not any(gerrs), tb.fail_text(what, f"golden errors {gerrs}")
        word = fields.const(instr_fields(assemble(text), cfg)).as_bits()
        await tb.reset()
        t0 = time.monotonic()
        for r in range(n):
            tb.load_sbuf(r, images[r])
        t1 = time.monotonic()
        st, info, cycles = await tb.run(
            [word] * n, what, cut=case.get("cut"),
            max_cycles=int(case.get("max_cycles", cycle_budget(cfg, size))))
        t2 = time.monotonic()
        assert not any(st), tb.fail_text(what, f"statuses {st}, infos {info}")
        for r in range(n):
            got = tb.read_sbuf(r)
            bad = np.argwhere(got != want[r])
            assert not len(bad), tb.fail_text(
                what, f"rank {r}: {len(bad)} SBUF bytes differ from golden, first "
                      f"(partition, byte) {[tuple(map(int, b)) for b in bad[:4]]}")
        tb.record(op=op, size=size, n=n, seed=seed, layout=layout, cycles=cycles,
                  **({"d": int(case.get("d", 1))} if op == "send_recv" else {}),
                  load_seconds=round(t1 - t0, 3), sim_seconds=round(t2 - t1, 3),
                  check_seconds=round(time.monotonic() - t2, 3))
