# SPDX-License-Identifier: Apache-2.0
"""cocotb: random-program differential testing of the whole core against the golden ISA
simulator. Each program (``golden.isagen.random_program`` on the engines the core has: random
DMA loads and stores with random patterns and dtypes, tensor loads/matmuls/transposes, every
vector opcode the generator draws, activation with table loads, cross-engine semaphores; the
SBUF dumped to DRAM at the end) runs on the RTL and on ``golden.isasim``. A clean program must
leave the DRAM image (tensors, results, the SBUF dump) byte for byte equal; a corrupted one
(``corrupt``: one changed byte, AP field, semaphore or wait) must latch the golden's first
error: the same code and source, and for an engine the same queue index. A corrupted program
that golden runs without an error but with a data race (``golden.isasim.find_races``: a
changed semaphore increment or wait lets two streams touch the same bytes unordered) has no
defined result: only that the RTL ends (no hang; an error is drained) is checked, and it is
counted as ``racy``."""

from __future__ import annotations

import cocotb
import numpy as np

from golden.isagen import random_program
from golden.isasim import IsaSim, find_races
from rtl import isa
from rtl.core.csr import ERR_SRC_DMA, ERR_SRC_SEM
from rtl.core.neuroncore import ENGINES_BUILT
from tb.core.tb_core import MAX_CYCLES, CoreTB

#: WATCHDOG for the fuzz runs: twice the golden model's cycle estimate of the program (the
#: model is within a few per cent of the RTL, docs/kernels.md §4; a wait cannot last longer than
#: the program) plus this margin, so a wait nothing satisfies ends soon.
WATCHDOG_MARGIN = 2_000


def _source(src):
    if src == "sem":
        return ERR_SRC_SEM
    if src.startswith("dma"):
        return ERR_SRC_DMA
    return isa.ENGINES.index(src)


@cocotb.test()
async def core_random_programs(dut):
    """``programs`` random programs (parameter; every ``corrupt_every``-th corrupted) of
    ``n_ops`` operations each on SBUF regions of ``region_bytes`` (default 256), RTL against
    golden."""
    tb = CoreTB(dut)
    await tb.reset()
    n, n_ops = int(tb.params.get("programs", 4)), int(tb.params.get("n_ops", 24))
    every = int(tb.params.get("corrupt_every", 3))
    # 256-byte regions: half the cycles of the default 512 (the loads and the dump of the SBUF
    # dominate a program), with every activation table of the generator still fitting
    rb = tb.params.get("region_bytes", 256)
    # ``first``: start at program ``first`` (a failure names it, to rerun just that one)
    first = int(tb.params.get("first", 0))
    instrs = clean = errors = racy = 0
    for i in range(first, n):
        seed = tb.seed * 1000 + i
        rp = random_program(tb.cfg, seed, n_ops=n_ops, engines=ENGINES_BUILT, dump=True,
                            corrupt=(i % every == every - 1), bystanders=(),
                            region_bytes=rb)
        kp = rp.kp
        sim = IsaSim(tb.cfg, dram_bytes=bytearray(kp.dram), dram_base=kp.dram_base)
        gerr = sim.run(kp.programs)
        want = bytes(sim.mem.dram[:kp.free])
        watchdog = 2 * sim.stats()["cycles"] + WATCHDOG_MARGIN
        queues = kp.place_queues()
        tb.ram.write(kp.dram_base, bytes(kp.dram))
        await tb.soft_reset()
        await tb.wr("WATCHDOG", watchdog)
        # bounded by the watchdog's own bound: a corrupted AP can make one instruction long
        # (hundreds of thousands of elements), which no wait's watchdog covers
        cycles, err = await tb.run_queues(queues, f"program {seed}", dram_base=kp.dram_base,
                                          dram_limit=kp.dram_base + len(kp.dram),
                                          max_cycles=max(MAX_CYCLES, 2 * watchdog))
        instrs += sum(kp.instructions().values())
        what = (f"program seed {seed} (program {i}, rerun with params first={i}; "
                f"{rp.corrupted or 'clean'}; golden {gerr})")
        if gerr is None and rp.corrupted and find_races(sim):
            racy += 1
            if err >> 31:
                await tb.wait_idle(f"drain after {what}")
        elif gerr is None and err >> 31:
            heads = {e: await tb.rd(tb.qreg(e, "Q_HEAD")) for e in queues}
            sems = [await tb.sem(k) for k in range(tb.cfg.semaphores)]
            raise AssertionError(tb.fail_text(
                what, f"RTL error {err:#x} at index {await tb.rd('ERR_PC')} (info "
                      f"{await tb.rd('ERR_INFO')}); queue heads {heads}, semaphores "
                      f"{sems}, DMA_BUSY {await tb.rd('DMA_BUSY'):#x}\n" + "\n".join(rp.ops)))
        elif gerr is None:
            got = tb.ram.read(kp.dram_base, kp.free)
            if got != want:
                a = np.frombuffer(got, np.uint8)
                b = np.frombuffer(want, np.uint8)
                bad = np.flatnonzero(a != b)
                raise AssertionError(tb.fail_text(
                    what, f"{bad.size} DRAM bytes differ, first at {kp.dram_base + bad[0]:#x}: "
                          f"RTL {a[bad[0]]:#04x}, golden {b[bad[0]]:#04x}\n" + "\n".join(rp.ops)))
            clean += 1
        else:
            assert err >> 31 == 1, tb.fail_text(what, "the RTL latched no error")
            code, src = err & 0xFF, err >> 8 & 7
            assert code == gerr.code, tb.fail_text(what, f"RTL code {code:#x}")
            if gerr.name != "E_TIMEOUT":    # which stream times out first is timing
                assert src == _source(gerr.source), tb.fail_text(what, f"RTL source {src}")
                if src < len(isa.ENGINES):
                    pc = await tb.rd("ERR_PC")
                    assert pc == gerr.index, tb.fail_text(what, f"RTL index {pc}")
            errors += 1
            await tb.wait_idle(f"drain after {what}")
        tb.record(program=seed, cycles=cycles, golden_error=gerr and gerr.name,
                  golden_cycles=sim.stats()["cycles"], watchdog=watchdog,
                  instructions=sum(kp.instructions().values()))
    tb.record(test="core_random_programs", programs=n - first, instructions=instrs, clean=clean,
              racy=racy,
              errors=errors)
