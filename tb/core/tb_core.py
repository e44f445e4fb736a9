# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the whole core: DRAM is cocotbext-axi's ``AxiRam`` (on ``axi__*``), the host
is an ``AxiLiteMaster`` (on ``host__*``). The host loads a program into DRAM, points the queue
registers at it, enables the engines, rings the doorbells and waits for the interrupt.

Tests: a DMA-fed matmul chain (sync engine -> DMA -> semaphores -> tensor engine), then every
error class the current core detects, each followed by a soft reset and a clean rerun of the
good program (recovery)."""

from __future__ import annotations


import cocotb
import numpy as np

from golden.dma import DRAM as SP_DRAM, SBUF as SP_SBUF, DTYPE_CODES, Descriptor
from golden.tensor import matmul
from rtl import isa
from rtl.core.csr import ERR_SRC_DMA, IRQ_ERROR
from tb.core.driver import CoreTB
from tb.core.program import DATA_BASE, DRAM_BYTES, CoreProgram



OUT_DRAM = DATA_BASE + 0x8000


def matmul_program(cfg, *, bad=None):
    """W (K x M, bf16) and X (K x N, bf16) DMA'd from DRAM into SBUF by the sync engine (each
    descriptor posts semaphore 0); the tensor engine waits for sem 0 >= 2, loads W,
    multiplies X into PSUM bank 1 and posts semaphore 1; the vector engine waits for it, copies
    the FP32 result from PSUM to SBUF and posts semaphore 2; the sync engine waits for that and
    stores the result to DRAM at :data:`OUT_DRAM` (row m = N FP32 values), posting semaphore 3.
    ``bad`` injects one error. Returns ``(program, W codes, X codes)``."""
    K, M, N = cfg.pe_rows, cfg.pe_cols, min(8, cfg.psum_bank_fp32)
    P = cfg.sbuf_bytes_per_partition
    w_dram, x_dram = DATA_BASE, DATA_BASE + 0x4000
    w_sb, x_sb, out_sb = 0, 0x400, 0x800
    bf16 = DTYPE_CODES["bf16"]
    prog = CoreProgram()
    data = bytes((i * 37 + 11) & 0x3F for i in range(2 * K * max(M, N)))
    prog.data[w_dram] = data[:2 * K * M]
    prog.data[x_dram] = data[:2 * K * N]
    for src, dst, cols in ((w_dram, w_sb, M), (x_dram, x_sb, N)):
        prog.add_descriptor(Descriptor(
            src=src if bad != "dma_window" else DRAM_BYTES + src, dst=dst, src_space=SP_DRAM,
            dst_space=SP_SBUF, dims=((cols, 2, 2), (K, 2 * cols, P)),
            src_dtype=bf16, dst_dtype=bf16, post=True, sem=0, inc=1))
    prog.add_descriptor(Descriptor(
        src=out_sb, dst=OUT_DRAM, src_space=SP_SBUF, dst_space=SP_DRAM,
        dims=((N, 4, 4), (M, P, 4 * N)), src_dtype=0, dst_dtype=0, post=True, sem=3, inc=1))
    prog.queues["sp"] = (f"dma_start engine=0 queue=0 count=2 desc_addr={prog.desc_addr(0)}\n"
                         f"dma_start engine=0 queue=0 count=1 desc_addr={prog.desc_addr(2)} "
                         f"wait=s2>=1\n")
    prog.queues["dve"] = (f"tensor_copy ap0=sbuf.fp32[0:{M}]@0x{out_sb:x}{{1x{N}}} "
                          f"ap1=psum.fp32[0:{M}]@0x{cfg.psum_bank_bytes:x}{{1x{N}}} "
                          f"wait=s1>=1 post=s2+1\n")
    mm_psum = f"psum.fp32[0:{M}]@0x{cfg.psum_bank_bytes:x}{{1x{N}}}"
    if bad == "shape":
        mm_psum = f"psum.fp32[0:{M}]@0x{cfg.psum_bank_bytes:x}{{1x{N + 1}}}"
    first = "tensor_tensor" if bad == "opcode" else "load_stationary"
    wait = "s0>=3" if bad == "timeout" else "s0>=2"
    pe = (f"{first} ap1=sbuf.bf16[0:{K}]@0x{w_sb:x}{{1x{M}}} wait={wait}\n"
          if first == "load_stationary" else
          f"tensor_tensor ap0=sbuf.fp32[0:1]@0x0{{1x1}} wait={wait}\n")
    pe += f"multiply_moving ap0={mm_psum} ap1=sbuf.bf16[0:{K}]@0x{x_sb:x}{{1x{N}}} post=s1+1\n"
    prog.queues["pe"] = pe
    if bad == "timeout":    # only the tensor engine waits forever: its timeout is the one kept
        prog.queues["dve"] = ""
        prog.queues["sp"] = prog.queues["sp"].splitlines()[0] + "\n"
    w = np.frombuffer(prog.data[w_dram], dtype="<u2").reshape(K, M)
    x = np.frombuffer(prog.data[x_dram], dtype="<u2").reshape(K, N)
    return prog, w, x


async def _good_run(tb, what):
    prog, w, x = matmul_program(tb.cfg)
    cycles, err = await tb.run_program(prog, what)
    assert err >> 31 == 0, tb.fail_text(what, f"unexpected error word {err:#x}")
    sems = [await tb.sem(i) for i in range(4)]
    assert sems == [2, 1, 1, 1], tb.fail_text(what, f"semaphores {sems}")
    # the result in DRAM, bit for bit against the golden tensor engine
    want = matmul(w, "bf16", x, "bf16", tb.cfg)
    M, N = want.shape
    got = np.frombuffer(tb.ram.read(OUT_DRAM, 4 * M * N), dtype="<u4").reshape(M, N)
    tb.check_equal(what, got.ravel(), want.ravel(), lambda j: f"C[{j // N}, {j % N}]")
    st = await tb.rd("STATUS")
    assert st >> 9 & 1 and not st >> 8 & 1, tb.fail_text(what, f"STATUS {st:#x}")
    return cycles


@cocotb.test()
async def core_dma_matmul(dut):
    """The good program runs to idle with the expected semaphores and its result in DRAM bit
    for bit equal to golden, twice (after a soft reset)."""
    tb = CoreTB(dut)
    await tb.reset()
    c1 = await _good_run(tb, "dma + matmul")
    cnt = await tb.counters()
    assert 0 < cnt["pe"] < cnt["cycles"] and 0 < cnt["dma"] < cnt["cycles"], cnt
    await tb.soft_reset()
    assert await tb.sem(0) == 0, "soft reset clears the semaphores"
    c2 = await _good_run(tb, "dma + matmul after soft reset")
    tb.record(test="core_dma_matmul", cycles=c1, cycles_again=c2,
              busy={k: v for k, v in cnt.items() if k != "cycles"}, counted=cnt["cycles"])


@cocotb.test()
async def core_errors(dut):
    """Each injected error: the right code, source and queue index, the error IRQ, nothing
    hangs, and a soft reset recovers the core to run the good program."""
    tb = CoreTB(dut)
    await tb.reset()
    await tb.wr("WATCHDOG", 2000)
    cases = {
        # bad: (code, source, queue index)
        "opcode": (isa.E_OPCODE, isa.ENGINES.index("pe"), 0),
        "shape": (0x05, isa.ENGINES.index("pe"), 1),
        "timeout": (0x09, isa.ENGINES.index("pe"), 0),
        "dma_window": (0x0A, ERR_SRC_DMA, None),
    }
    for bad, (code, src, pc) in cases.items():
        prog, _, _ = matmul_program(tb.cfg, bad=bad)
        _, err = await tb.run_program(prog, f"error {bad}")
        assert err >> 31 == 1, tb.fail_text(bad, f"no error latched ({err:#x})")
        assert err & 0xFF == code and err >> 8 & 7 == src, tb.fail_text(
            bad, f"ERR_CODE {err:#x}, want code {code:#x} source {src}")
        if pc is not None:
            got_pc = await tb.rd("ERR_PC")
            assert got_pc == pc, tb.fail_text(bad, f"ERR_PC {got_pc}, want {pc}")
        assert await tb.rd("IRQ_STATUS") & IRQ_ERROR
        await tb.wait_idle(f"drain after {bad}")
        await tb.soft_reset()
        await _good_run(tb, f"good program after {bad}")
        await tb.soft_reset()


@cocotb.test()
async def core_soft_reset_mid_transfer(dut):
    """A soft reset at random points of a running program (DMA bursts, instruction fetches and
    descriptor reads in flight): AxiRam sees only complete, legal AXI bursts (the engines stay
    in reset while the interconnect drains), the core reads busy until the port is quiet, the
    busy counters clear, and the good program then runs bit for bit."""
    tb = CoreTB(dut)
    await tb.reset()
    prog, _, _ = matmul_program(tb.cfg)
    for cut in sorted(int(c) for c in tb.rng(7).choice(np.arange(5, 180), 4, replace=False)):
        tb.cut_after = cut
        await tb.run_program(prog, f"cut at {cut}")
        tb.cut_after = None
        await tb.soft_reset()
        await tb.wait_idle(f"drain after the cut at {cut}")
        c = await tb.counters()
        assert c["pe"] == c["dve"] == c["sp"] == 0, tb.fail_text(cut, f"counters {c}")
        await _good_run(tb, f"good program after the cut at {cut}")
