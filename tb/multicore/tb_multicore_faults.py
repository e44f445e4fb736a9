# SPDX-License-Identifier: Apache-2.0
"""cocotb fault and regression cases of the multi-core top (docs/collectives.md §15): a core
soft-reset in the middle of an all-reduce, ACCL's known failure sequences, ranks that disagree
on a collective's size, and one all-reduce on its own (the 8-core case). Every result is
compared bit for bit with the golden multi-core simulator
(:func:`tb.multicore.program.golden_run`) running the same binary programs; every wait is
bounded (``MAX_CYCLES`` or the watchdog).

"Nothing written outside the destination" is checked on SBUF: before the faulty run every core
DMAs a guard pattern over the SBUF bytes around the collective's source and destination; after
it (and a soft reset, which keeps SBUF) every core DMAs those bytes back to DRAM, and every byte
outside the destination must be the guard's or the source's."""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from rtl.config import LINK_FAULTS
from rtl.isa import E_LINK, E_SHAPE, ERROR_BITS
from tb.base import CLOCK_NS
from tb.multicore.driver import MultiCoreTB
from tb.multicore.program import (DUMP_BASE, OUT_BASE, cc_program, dst_shape, golden_run,
                                  random_source, sbuf_dump_program, sbuf_fill_program)

_ESZ = {"fp32": 4, "bf16": 2, "fp16": 2}
#: SBUF bytes per partition covered by the guard: the source at 0 and the destinations at
#: 0x400 k of :func:`cc_program`.
GUARD_BYTES = 0x1000
#: Watchdog (cycles) of the faulty runs.
WATCHDOG = 400
#: Cycles beyond ``WATCHDOG`` allowed between the fault and a core's error interrupt (the
#: interrupt path and the host's register reads).
SLACK = 64


def _code(err):
    return err & ((1 << ERROR_BITS) - 1)


async def _clean(tb, progs, what, *, skew=None, watchdog=20_000):
    """Run ``progs`` after a soft reset of every core; compare every core's stored results
    with the golden run of the same programs, bit for bit. Returns the cycles per core."""
    want, gerrs = golden_run(tb.cfg, progs)
    assert all(e is None for e in gerrs), tb.fail_text(what, f"golden errors {gerrs}")
    await tb.soft_reset_all()
    res = await tb.run_all(progs, what, watchdog=watchdog, skew=skew)
    for r, (c, (_cy, err)) in enumerate(zip(tb.cores, res)):
        assert err >> 31 == 0, tb.fail_text(what, f"core {r} error {err:#x} "
                                                  f"info {await c.rd('ERR_INFO')}")
        got = c.ram.read(OUT_BASE, 0x4000)
        assert got == want[r][OUT_BASE:OUT_BASE + 0x4000], tb.fail_text(
            what, f"core {r}: stored results differ from golden")
    tb.log.info(f"{what}: cycles {[cy for cy, _ in res]}")
    return [cy for cy, _ in res]


async def _guard(tb, rng):
    """DMA a guard pattern (FP32 normal codes) over SBUF partitions x :data:`GUARD_BYTES` of
    every core; returns each core's pattern as bytes (partition after partition)."""
    parts = tb.cfg.partitions
    pats = [random_source(rng, "fp32", parts * GUARD_BYTES // 4).astype("<u4").tobytes()
            for _ in range(tb.n)]
    await tb.soft_reset_all()
    res = await tb.run_all([sbuf_fill_program(tb.cfg, parts, GUARD_BYTES, p) for p in pats],
                           "guard fill")
    assert all(e >> 31 == 0 for _, e in res), tb.fail_text("guard fill", f"errors {res}")
    return pats


async def _check_guard(tb, what, pats, srcs, dtype, parts, pers, dsts):
    """After a soft reset of every core: SBUF outside each core's destination (``dsts[r]``:
    ``(offset, partitions, bytes per partition)``) equals the guard with the source
    (``srcs[r]``, ``parts`` x ``pers[r]`` codes of ``dtype`` at 0) written over it."""
    P, B = tb.cfg.partitions, GUARD_BYTES
    await tb.soft_reset_all()
    res = await tb.run_all([sbuf_dump_program(tb.cfg, P, B)] * tb.n, f"{what}: SBUF dump")
    assert all(e >> 31 == 0 for _, e in res), tb.fail_text(what, f"dump errors {res}")
    e = _ESZ[dtype]
    for r, c in enumerate(tb.cores):
        got = np.frombuffer(c.ram.read(DUMP_BASE, P * B), np.uint8).reshape(P, B)
        want = np.frombuffer(pats[r], np.uint8).reshape(P, B).copy()
        per = pers[r]
        codes = np.asarray(srcs[r], np.uint32).reshape(parts, per)
        by = ((codes[..., None] >> (8 * np.arange(e, dtype=np.uint32))) & 0xFF).astype(np.uint8)
        want[:parts, :per * e] = by.reshape(parts, per * e)
        keep = np.ones((P, B), bool)
        off, dparts, dbytes = dsts[r]
        keep[:dparts, off:off + dbytes] = False
        bad = np.argwhere((got != want) & keep)
        assert not len(bad), tb.fail_text(
            what, f"core {r}: {len(bad)} SBUF bytes outside the destination changed, first "
                  f"(partition, byte) {[tuple(int(v) for v in b) for b in bad[:4]]}")


@cocotb.test()
async def reset_mid_collective(dut):
    """Core ``n - 1`` soft-reset halfway through an all-reduce: every other core reports
    ``E_LINK`` (a silent link or a credit time-out) within ``WATCHDOG`` cycles of the reset,
    the reset core reports nothing, no SBUF byte outside the destination changes and nothing
    reaches DRAM; then a soft reset of every core and the same all-reduce runs clean, bit for
    bit equal to golden."""
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=0)
    n, cfg = tb.n, tb.cfg
    rng = tb.rng(38, 1)
    dtype, parts, per = "fp32", cfg.partitions, 64
    steps = (("all_reduce", 1, "fp32"),)
    srcs = [random_source(rng, dtype, parts * per) for _ in range(n)]
    clean = [cc_program(cfg, r, n, steps, srcs[r], dtype, parts, per) for r in range(n)]
    cut = await _clean(tb, clean, "all-reduce before the fault")
    cut = min(cut) // 2             # halfway: the load is done, the all-reduce is running
    pats = await _guard(tb, rng)
    faulty = [cc_program(cfg, r, n, steps, srcs[r], dtype, parts, per, stores=False)
              for r in range(n)]
    await tb.soft_reset_all()
    for c in tb.cores:
        await c.wr("WATCHDOG", WATCHDOG)
    victim = tb.cores[n - 1]
    victim.cut_after = cut

    async def run_victim():
        await victim.run_program(faulty[n - 1], "victim")
        t = int(cocotb.utils.get_sim_time("ns") // CLOCK_NS)
        await victim.soft_reset()
        return t
    vt = cocotb.start_soon(run_victim())
    others = [cocotb.start_soon(c.run_program(p, f"reset mid-collective core {r}"))
              for r, (c, p) in enumerate(zip(tb.cores[:-1], faulty[:-1]))]
    t_reset = await vt
    victim.cut_after = None
    res = [await t for t in others]
    for r, (c, (cycles, err)) in enumerate(zip(tb.cores, res)):
        info = await c.rd("ERR_INFO")
        late = c.start_cycle + cycles - t_reset
        tb.log.info(f"core {r}: ERR_CODE {err:#x} ERR_INFO {info} {late} cycles after the "
                    f"reset")
        assert err >> 31 == 1 and _code(err) == E_LINK, tb.fail_text(
            "reset mid-collective", f"core {r}: ERR_CODE {err:#x}, not E_LINK")
        assert info in (LINK_FAULTS["silent"], LINK_FAULTS["credit_timeout"]), tb.fail_text(
            "reset mid-collective", f"core {r}: ERR_INFO {info}, not silent/credit_timeout")
        assert 0 < late <= WATCHDOG + SLACK, tb.fail_text(
            "reset mid-collective", f"core {r}: error {late} cycles after the reset, "
                                    f"not within the watchdog {WATCHDOG} + {SLACK}")
    await ClockCycles(dut.clk, 2 * WATCHDOG)
    verr = await victim.rd("ERR_CODE")
    assert verr >> 31 == 0, tb.fail_text("reset mid-collective",
                                         f"the reset core latched {verr:#x}")
    for r, c in enumerate(tb.cores):
        assert not any(c.ram.read(OUT_BASE, 0x1000)), tb.fail_text(
            "reset mid-collective", f"core {r} wrote DRAM")
    dbytes = dst_shape("all_reduce", 0, n, parts, per)[1] * 4
    await _check_guard(tb, "reset mid-collective", pats, srcs, dtype, parts, [per] * n,
                       [(0x400, 1, dbytes)] * n)
    await _clean(tb, clean, "all-reduce after the recovery")


#: ACCL's failure sequences: ``(name, dtype, parts, per, steps, cc_program options, skew)``.
SEQUENCES = (
    ("same all-reduce x4, one destination", "fp32", 4, 8,
     (("all_reduce", 1, "fp32"),) * 4, {"same_dst": True}, None),
    ("same all-reduce x3, one destination, streams 1 2 3", "bf16", 3, 8,
     (("all_reduce", 1, "fp32"),) * 3, {"same_dst": True, "streams": (1, 2, 3)}, None),
    ("reduce-scatter -> all-gather -> all-reduce, chained", "fp32", 4, 8,
     (("reduce_scatter", 1, "fp32"), ("all_gather", None, "fp32"),
      ("all_reduce", 1, "fp32")), {"chain": True}, None),
    ("streams 1 2 3 with rank 0 late", "fp32", 2, 12,
     (("all_reduce", 1, "fp32"), ("reduce_scatter", 4, "fp32"), ("all_reduce", 5, "fp32")),
     {"streams": (1, 2, 3)}, "first_late"),
    ("streams 3 1 2 with the last rank late", "bf16", 4, 4,
     (("all_gather", None, "bf16"), ("all_reduce", 1, "bf16"), ("reduce_scatter", 1, "fp32")),
     {"streams": (3, 1, 2)}, "last_late"),
)


@cocotb.test()
async def accl_sequences(dut):
    """ACCL's known failure sequences (the same reduce repeated on one buffer, with one and
    with several streams; collectives of different streams with ranks starting hundreds of
    cycles apart; all-reduce after all-gather after reduce-scatter, each on the previous
    result): every core's every result bit for bit equal to golden."""
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=0)
    n = tb.n
    for k, (name, dtype, parts, per, steps, opts, skew) in enumerate(SEQUENCES):
        rng = tb.rng(39, k)
        progs = [cc_program(tb.cfg, r, n, steps, random_source(rng, dtype, parts * per), dtype,
                            parts, per, **opts) for r in range(n)]
        sk = {None: None, "first_late": [300] + [0] * (n - 1),
              "last_late": [37 * r for r in range(n - 1)] + [500]}[skew]
        await _clean(tb, progs, name, skew=sk)


@cocotb.test()
async def size_disagreement(dut):
    """Rank 0's all-reduce has more elements than the others' (each instruction valid on its
    own): every rank ends with an error (the codes are logged and checked against
    ``params["size_codes"]`` when given), nothing hangs, no SBUF byte outside each rank's
    destination changes and nothing reaches DRAM."""
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=0)
    n, cfg = tb.n, tb.cfg
    rng = tb.rng(40, 0)
    dtype, parts = "fp32", cfg.partitions
    pers = [16] + [12] * (n - 1)
    srcs = [random_source(rng, dtype, parts * p) for p in pers]
    steps = (("all_reduce", 1, "fp32"),)
    progs = [cc_program(cfg, r, n, steps, srcs[r], dtype, parts, pers[r], stores=False)
             for r in range(n)]
    _, gerrs = golden_run(cfg, progs, watchdog=WATCHDOG)
    tb.log.info(f"golden: {gerrs}")
    pats = await _guard(tb, rng)
    await tb.soft_reset_all()
    res = await tb.run_all(progs, "size disagreement", watchdog=WATCHDOG)
    got = []
    for r, (c, (_cycles, err)) in enumerate(zip(tb.cores, res)):
        info = await c.rd("ERR_INFO")
        tb.log.info(f"size disagreement core {r}: ERR_CODE {err:#x} ERR_INFO {info}")
        assert err >> 31 == 1, tb.fail_text("size disagreement", f"core {r} reports no error")
        got.append([_code(err), info])
    want = tb.params.get("size_codes")
    if want is not None:
        assert got == want, tb.fail_text("size disagreement", f"codes {got}, want {want}")
    assert all(code in (E_SHAPE, E_LINK) for code, _ in got), tb.fail_text(
        "size disagreement", f"codes {got}")
    for r, c in enumerate(tb.cores):
        assert not any(c.ram.read(OUT_BASE, 0x1000)), tb.fail_text(
            "size disagreement", f"core {r} wrote DRAM")
    await _check_guard(tb, "size disagreement", pats, srcs, dtype, parts, pers,
                       [(0x400, 1, parts * p * 4) for p in pers])


@cocotb.test()
async def one_allreduce(dut):
    """One FP32 all-reduce (add) of 4 x 16 elements per core, stored: bit for bit golden."""
    tb = MultiCoreTB(dut)
    await tb.reset(link_down=0)
    rng = tb.rng(41, 0)
    parts, per = tb.cfg.partitions, 16
    progs = [cc_program(tb.cfg, r, tb.n, (("all_reduce", 1, "fp32"),),
                        random_source(rng, "fp32", parts * per), "fp32", parts, per)
             for r in range(tb.n)]
    await _clean(tb, progs, "one all-reduce")
