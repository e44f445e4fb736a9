# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the multi-core top (``tb/multicore/driver.py``, ``tb/multicore/program.py``): every core runs a small
program (a DMA load, collectives on the CC queue, DMA stores of each result) at the same time,
and every core's DRAM and first error are compared bit for bit with the golden multi-core
simulator running the same programs; then a link goes down mid-program and every waiting core
must report ``E_LINK`` within the watchdog (no hang)."""

from __future__ import annotations

import cocotb

from rtl.isa import E_LINK
from tb.multicore.driver import MultiCoreTB
from tb.multicore.program import OUT_BASE, cc_program, golden_run, random_source

#: Collective sequences of the programs: ``(op, reduce op or send_recv's d, destination
#: dtype[, the step whose result is the source])``. The third is ACCL's failing sequence, an
#: all-to-all then an all-reduce of its result, back to back, then a send/recv of that.
PROGRAMS = (
    ("fp32", 4, 6, (("all_reduce", 1, "fp32"), ("all_gather", None, "fp32"),
                    ("reduce_scatter", 4, "fp32"))),
    ("bf16", 3, 8, (("all_reduce", 5, "bf16"), ("all_reduce", 1, "fp32"),
                    ("reduce_scatter", 1, "fp16"))),
    ("fp32", 2, 8, (("all_to_all", None, "fp32"), ("all_reduce", 1, "fp32", 0),
                    ("send_recv", 1, "fp32", 1))),
    ("bf16", 4, 4, (("send_recv", 1, "bf16"), ("all_to_all", None, "bf16"),
                    ("all_gather", None, "bf16", 1))),
)


def _programs(tb, k, stores=True):
    dtype, parts, per, steps = PROGRAMS[k % len(PROGRAMS)]
    rng = tb.rng(37, k)
    return [cc_program(tb.cfg, r, tb.n, steps, random_source(rng, dtype, parts * per), dtype,
                       parts, per, stores=stores) for r in range(tb.n)], steps


@cocotb.test()
async def multicore_programs_vs_golden(dut):
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=0)
    for k in range(int(tb.params.get("programs", len(PROGRAMS)))):
        progs, steps = _programs(tb, k)
        want, gerrs = golden_run(tb.cfg, progs)
        assert all(e is None for e in gerrs), gerrs
        for c in tb.cores:
            await c.soft_reset()
        res = await tb.run_all(progs, f"program {k}", watchdog=20_000)
        for r, (c, (cycles, err)) in enumerate(zip(tb.cores, res)):
            assert err >> 31 == 0, tb.fail_text(f"program {k}", f"core {r} error {err:#x} "
                                                f"info {await c.rd('ERR_INFO')}")
            lo, hi = OUT_BASE, OUT_BASE + 0x1000 * len(steps)
            got = c.ram.read(lo, hi - lo)
            assert got == want[r][lo:hi], tb.fail_text(
                f"program {k}", f"core {r}: results differ from golden ({steps})")
            tb.log.info(f"program {k} core {r}: {cycles} cycles, {steps}")


@cocotb.test()
async def multicore_link_down(dut):
    """Link 0 -> 1 down from the start of an all-reduce: every core reports E_LINK (its
    ERR_CODE) within the watchdog; nothing hangs. (The programs store nothing: a store
    waiting on the collective would time out first, E_TIMEOUT, with the same watchdog.)"""
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=1)
    progs, _ = _programs(tb, 0, stores=False)
    for c in tb.cores:
        await c.soft_reset()
    res = await tb.run_all(progs, "link down", watchdog=500)
    for r, (_cycles, err) in enumerate(res):
        assert err >> 31 == 1 and err & 0xFF == E_LINK, tb.fail_text(
            "link down", f"core {r}: ERR_CODE {err:#x}, not E_LINK")
