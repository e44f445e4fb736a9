# SPDX-License-Identifier: Apache-2.0
"""cocotb: the scalar engine's read-after-write rule on the core against the golden simulator
(``tb/core/scalar_hazard.py``). For each variant the core and ``golden.isasim`` run the same
program: the outputs must be equal bit for bit, and the cycles between the two activations'
retires (``gap``) must agree: the second activation waits for the first one's writes exactly
when it reads a byte of them in a common partition, on both."""

from __future__ import annotations

import cocotb

from golden.isasim import IsaSim
from rtl import isa
from tb.core.scalar_hazard import VARIANTS, act_gap, hazard_program
from tb.core.driver import CoreTB

#: ``|RTL gap - golden gap|`` allowed: the golden cycle model's scalar engine is an estimate
#: (docs/kernels.md §4), the hazard's cost (the pipeline drain) is several times this.
GAP_TOLERANCE = 16


async def run_variant(tb, variant):
    """``(RTL gap, golden gap)`` of one variant, its outputs checked bit for bit."""
    kp = hazard_program(tb.cfg, variant, seed=tb.seed)
    sim = IsaSim(tb.cfg, dram_bytes=kp.dram, dram_base=kp.dram_base)
    gerr = sim.run(kp.programs)
    assert gerr is None, tb.fail_text(variant, f"golden error {gerr}")
    ev = [e for e in sim.timeline if e.stream == "act"]
    g_gap = act_gap([e.op for e in ev], [e.retire for e in ev])
    queues = kp.place_queues()                  # into the image: before it is written
    tb.ram.write(kp.dram_base, bytes(kp.dram))
    await tb.soft_reset()
    log = []
    mon = cocotb.start_soon(tb.trace(log))
    _cycles, err = await tb.run_queues(queues, variant, dram_base=kp.dram_base,
                                       dram_limit=kp.dram_base + len(kp.dram))
    mon.cancel()
    assert not err >> 31, tb.fail_text(variant, f"RTL error {err:#x}")
    image = tb.ram.read(kp.dram_base, len(kp.dram))
    for name, where in kp.outputs.items():
        got, want = where.read(image, kp.dram_base), where.read(sim.mem.dram, kp.dram_base)
        tb.check_equal(f"{variant} {name}", got.ravel(), want.ravel(),
                       lambda j, n=want.shape[-1], t=name: f"{t}[{j // n}, {j % n}]")
    bit = len(isa.ENGINES) + 1 + isa.ENGINES.index("act")
    retires, prev = [], 0
    for c, v in log:
        if (v ^ prev) >> bit & 1:
            retires.append(c)
        prev = v
    return act_gap([e.op for e in ev], retires), g_gap


@cocotb.test()
async def core_scalar_hazard(dut):
    """Every variant: outputs equal, gaps within :data:`GAP_TOLERANCE`; the overlapping read
    waits (its gap exceeds the others' by more than the tolerance) on the RTL and in golden."""
    tb = CoreTB(dut)
    await tb.reset()
    gaps = {}
    for variant in VARIANTS:
        rtl, gold = await run_variant(tb, variant)
        gaps[variant] = (rtl, gold)
        tb.record(variant=variant, rtl_gap=rtl, golden_gap=gold)
    for variant, (rtl, gold) in gaps.items():
        assert abs(rtl - gold) <= GAP_TOLERANCE, tb.fail_text(
            variant, f"retire gap RTL {rtl} vs golden {gold} cycles (all: {gaps})")
    for side in (0, 1):
        wait = gaps["overlap"][side]
        for other in ("other_partitions", "other_bytes"):
            assert wait > gaps[other][side] + GAP_TOLERANCE, tb.fail_text(
                other, f"{('RTL', 'golden')[side]} gaps {gaps}: the overlapping read should "
                       f"wait and this one not")
