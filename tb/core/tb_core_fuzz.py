# SPDX-License-Identifier: Apache-2.0
"""cocotb: random-program differential testing of the whole core against the golden ISA
simulator. Each program (``tb.core.isagen.random_program`` on the engines the core has: random
DMA loads and stores with random patterns and dtypes, tensor loads/matmuls/transposes, every
vector opcode the generator draws, activation with table loads, cross-engine semaphores; the
SBUF dumped to DRAM at the end) runs on the RTL and on ``golden.isasim``. A clean program must
leave the DRAM image (tensors, results, the SBUF dump) byte for byte equal; a corrupted one
(``corrupt``: one changed byte, AP field, semaphore or wait) must latch the golden's first
error: the same code and source, and for an engine the same queue index. A corrupted program
that golden runs without an error but with a data race (``golden.isasim.find_races``: a
changed semaphore increment or wait lets two streams touch the same bytes unordered) has no
defined result: only that the RTL ends (no hang; an error is drained) is checked, and it is
counted as ``racy``.

The core keeps SBUF and PSUM across the soft reset between programs, and so does golden: a
program after a clean one starts golden from the memories golden ended the clean one with (the
same bytes as the core's, the run having matched). After an error or a race the two differ
(streams stop at different points; a race has no defined result), so the core runs
:func:`scrub_program` (every SBUF byte and PSUM entry set to zero) and golden starts from
zeros, as both do after the hard reset."""

from __future__ import annotations

import cocotb
import numpy as np

from golden.isasim import IsaSim, find_races
from golden.kernel import ELEM_BYTES, Kernel
from rtl import isa
from rtl.core.csr import ERR_SRC_DMA, ERR_SRC_SEM
from rtl.core.neuroncore import ENGINES_BUILT
from tb.core.driver import MAX_CYCLES, CoreTB
from tb.core.isagen import GEN_ENGINES, random_program

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


def scrub_program(cfg, dram_base):
    """A kernel that zeroes the whole SBUF (one FP32 ``memset`` per SBUF bank) and every PSUM
    bank (one ``memset`` each) on the vector engine."""
    k = Kernel(cfg, dram_bytes=1 << 12, dram_base=dram_base)
    bank_fp32 = cfg.sbuf_bank_bytes // ELEM_BYTES["fp32"]
    for b in range(cfg.sbuf_banks):
        k.memset(k.sbuf_tile(cfg.partitions, bank_fp32, "fp32", bank=b), 0.0)
    for b in range(cfg.psum_banks):
        k.memset(k.psum_tile(cfg.partitions, cfg.psum_bank_fp32, bank=b), 0.0)
    return k.build()


async def scrub(tb, dram_base, what):
    """Run :func:`scrub_program` on the core (after a soft reset); it must end clean."""
    kp = scrub_program(tb.cfg, dram_base)
    queues = kp.place_queues()
    tb.ram.write(kp.dram_base, bytes(kp.dram))
    await tb.soft_reset()
    _, err = await tb.run_queues(queues, f"scrub after {what}", dram_base=kp.dram_base,
                                 dram_limit=kp.dram_base + len(kp.dram))
    assert not err >> 31, tb.fail_text(what, f"the scrub program stopped with {err:#x}")


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
    # ``first``: start at program ``first`` (a failure names the one to rerun from)
    first = int(tb.params.get("first", 0))
    instrs = clean = errors = racy = 0
    carried = None      # (SBUF, PSUM) golden ended the last clean program with; None = zeros
    chain = first       # the first program since both memories were last zero: a rerun from
    #                     it starts from the same memories
    for i in range(first, n):
        seed = tb.seed * 1000 + i
        rp = random_program(tb.cfg, seed, n_ops=n_ops, dump=True,
                            engines=tuple(e for e in ENGINES_BUILT if e in GEN_ENGINES),
                            corrupt=(i % every == every - 1), bystanders=(),
                            region_bytes=rb)
        kp = rp.kp
        sim = IsaSim(tb.cfg, dram_bytes=bytearray(kp.dram), dram_base=kp.dram_base)
        if carried is not None:
            sim.mem.sbuf[:], sim.psum[...] = carried
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
        what = (f"program seed {seed} (program {i}, rerun with params first={chain}; "
                f"{rp.corrupted or 'clean'}; golden {gerr})")
        if gerr is None and rp.corrupted and find_races(sim):
            racy += 1
            if err >> 31:
                await tb.wait_idle(f"drain after {what}")
            await scrub(tb, kp.dram_base, what)
            carried, chain = None, i + 1
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
            carried = (bytes(sim.mem.sbuf), sim.psum.copy())
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
            await scrub(tb, kp.dram_base, what)
            carried, chain = None, i + 1
        tb.record(program=seed, cycles=cycles, golden_error=gerr and gerr.name,
                  golden_cycles=sim.stats()["cycles"], watchdog=watchdog,
                  instructions=sum(kp.instructions().values()))
    tb.record(test="core_random_programs", programs=n - first, instructions=instrs, clean=clean,
              racy=racy,
              errors=errors)
