# SPDX-License-Identifier: Apache-2.0
"""Timed scenarios of the memory system (``bench/bench_memory.py``), in amaranth.sim: the tensor
engine fed from SBUF running back-to-back BF16 tiles while a synthetic DMA writes one SBUF word
per cycle through a partition port, every result checked bit for bit against golden; and the
SBUF arbiter's measured waits under saturating traffic."""

from __future__ import annotations

import time

import numpy as np
from amaranth.hdl import Value

from tb.amsim import SimBench
from tb.mem.program import fed_program
from tb.mem.rig import FedSystem, preload_sbuf
from tb.tensor.program import Program, rand_codes

__all__ = ["b2b_program", "run_fed", "tensor_with_dma"]


def b2b_program(cfg, rng, *, tiles=8, n=None):
    """``tiles`` back-to-back full-array BF16 matmuls (K = rows, M = cols, N = one PSUM bank),
    each with its own LoadStationary, into banks ``i % psum_banks``; then one read of the last
    bank (the tensor bench's scenario, ``tb/tensor/tb_tensor_bench.py``)."""
    prog = Program(cfg, rng)
    R, C = cfg.pe_rows, cfg.pe_cols
    N = n or cfg.psum_bank_fp32
    f = cfg.fmt("bf16")
    for i in range(tiles):
        prog.load(rand_codes(rng, f, (R, C), 0.0), "bf16")
        prog.matmul(rand_codes(rng, f, (R, N), 0.0), "bf16", bank=i % cfg.psum_banks)
    prog.read((tiles - 1) % cfg.psum_banks, N)
    return prog


def run_fed(bench, prog, fp, *, wr_bank=None, limit=None):
    """Run ``fp`` (a :class:`~tb.mem.program.FedProgram` of ``prog``) on ``bench`` (a SimBench of a
    :class:`FedSystem`); with ``wr_bank`` the synthetic DMA writes that bank every cycle.
    Checks the result beats against golden and returns the timing: ``window`` (first operand
    beat accepted by the engine to the last PSUM write, inclusive), ``utilization`` (MACs /
    (R x C x window)), ``dma_words`` and ``dma_stalls`` (writes granted and cycles refused
    during the run), ``cycles``, ``wall_seconds``."""
    sysm = bench.dut
    cfg = sysm.cfg
    eng = sysm.fed.engine
    C = cfg.pe_cols
    limit = limit or 4 * (len(prog.mv) + len(prog.st)) + 2000
    out = {"beats": []}

    async def job(ctx):
        preload_sbuf(ctx, sysm.sbuf, fp.image)
        ctx.set(sysm.res.ready, 1)
        if wr_bank is not None:
            ctx.set(sysm.wr_bank, wr_bank)
            ctx.set(sysm.wr_en, 1)
        j, t, idle, first, last_we = 0, 0, 0, None, None
        while True:
            ctx.set(sysm.cmd.valid, int(j < len(fp.cmds)))
            if j < len(fp.cmds):
                ctx.set(Value.cast(sysm.cmd.payload), fp.cmds[j])
                if ctx.get(sysm.cmd.ready):
                    j += 1
            if first is None and ((ctx.get(eng.st.valid) and ctx.get(eng.st.ready))
                                  or (ctx.get(eng.mv.valid) and ctx.get(eng.mv.ready))):
                first = t
            if ctx.get(sysm.psum_we):
                last_we = t
            if ctx.get(sysm.res.valid):
                w = ctx.get(Value.cast(sysm.res.payload))
                out["beats"].append([(w >> (32 * c)) & 0xFFFFFFFF for c in range(C)])
            idle = idle + 1 if (j == len(fp.cmds) and not ctx.get(sysm.busy)) else 0
            await ctx.tick()
            t += 1
            if idle > 3:
                break
            if t >= limit:
                raise AssertionError(f"not idle after {limit} cycles (a hang)")
        ctx.set(sysm.wr_en, 0)
        out.update(cycles=t, first=first, last_we=last_we,
                   dma_words=ctx.get(sysm.wr_count), dma_stalls=ctx.get(sysm.wr_stall),
                   err=ctx.get(sysm.err), ap_err=ctx.get(sysm.ap_err))
    t0 = time.monotonic()
    bench.run(job)
    wall = time.monotonic() - t0
    exp = prog.expected_beats()
    if out["beats"] != exp:
        raise AssertionError(f"results differ from golden ({len(out['beats'])} beats, "
                             f"{len(exp)} expected)")
    if out["err"] or out["ap_err"]:
        raise AssertionError("the engine or the feed reported an error")
    window = out["last_we"] - out["first"] + 1
    return {"window": window, "utilization": prog.macs / (cfg.pe_rows * cfg.pe_cols * window),
            "dma_words": out["dma_words"], "dma_stalls": out["dma_stalls"],
            "cycles": out["cycles"], "wall_seconds": wall}


def tensor_with_dma(cfg, seed=1, *, tiles=8, wr_bank=3, yield_after=16, n=None):
    """The ``tensor_util_with_dma`` scenario on ``cfg``: stationary operands in bank 0, moving
    ones in bank 1, the DMA on ``wr_bank``. Returns :func:`run_fed`'s figures plus
    ``build_seconds``."""
    t0 = time.monotonic()
    bench = SimBench(FedSystem(cfg, use_instances=False, yield_after=yield_after))
    build = time.monotonic() - t0
    rng = np.random.default_rng(seed)
    prog = b2b_program(cfg, rng, tiles=tiles, n=n)
    fp = fed_program(cfg, prog, rng, st_bank=0, mv_bank=1)
    r = run_fed(bench, prog, fp, wr_bank=wr_bank)
    r["build_seconds"] = build
    return r
