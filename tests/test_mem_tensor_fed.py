# SPDX-License-Identifier: Apache-2.0
"""The tensor engine fed from SBUF (``rtl/tensor/sbuf_fed.py``) in Amaranth's simulator, on the
small preset: random programs (every allowed dense format pair, K < R, accumulate chains,
transposes, read-outs) whose operands sit in SBUF behind random access patterns, checked bit for
bit against ``golden/tensor.py`` (through ``tb.tensor.program.Program``); the feed-level errors
(AP element count, MX, a rejected AP, a command the engine rejects) drop exactly their command;
back-to-back matmuls stream one moving column per cycle while a writer hammers another bank."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Value

from golden.ap import E_AP_RANGE
from rtl.config import get_preset
from rtl.tensor.layouts import OP_MATMUL, TensorLayouts
from rtl.tensor.sbuf_fed import E_FLAGS, E_SHAPE
from tb.amsim import SimBench
from tb.mem.program import fed_program
from tb.mem.rig import FedSystem, preload_sbuf
from tb.tensor.program import Program, allowed_pairs, rand_codes

SMALL = get_preset("small")


@pytest.fixture(scope="module")
def bench():
    return SimBench(FedSystem(SMALL, use_instances=False))


def run(bench, fp, *, wr_bank=None, limit=6000):
    """Preload the image, stream the fed commands, collect result beats until idle. Returns
    ``beats`` (lists of FP32 words), ``cycles``, ``mv_fire`` cycles, writer counters."""
    sysm = bench.dut
    C = SMALL.pe_cols
    out = {"beats": [], "mv": [], "cycles": 0}

    async def job(ctx):
        preload_sbuf(ctx, sysm.sbuf, fp.image)
        ctx.set(sysm.res.ready, 1)
        if wr_bank is not None:
            ctx.set(sysm.wr_bank, wr_bank)
            ctx.set(sysm.wr_en, 1)
        j, t, idle = 0, 0, 0
        while True:
            ctx.set(sysm.cmd.valid, int(j < len(fp.cmds)))
            if j < len(fp.cmds):
                ctx.set(Value.cast(sysm.cmd.payload), fp.cmds[j])
                if ctx.get(sysm.cmd.ready):
                    j += 1
            if ctx.get(sysm.res.valid):
                w = ctx.get(Value.cast(sysm.res.payload))
                out["beats"].append([(w >> (32 * c)) & 0xFFFFFFFF for c in range(C)])
            if ctx.get(sysm.mv_fire):
                out["mv"].append(t)
            idle = idle + 1 if (j == len(fp.cmds) and not ctx.get(sysm.busy)) else 0
            await ctx.tick()
            t += 1
            if idle > 3:
                break
            assert t < limit, f"not idle after {limit} cycles ({j} of {len(fp.cmds)} taken)"
        ctx.set(sysm.wr_en, 0)
        out["cycles"] = t
        for n in ("err", "err_code", "ap_err", "ap_err_code", "wr_count", "wr_stall"):
            out[n] = ctx.get(getattr(sysm, n))
    bench.run(job)
    return out


def compare(beats, prog, seed):
    exp = prog.expected_beats()
    assert len(beats) == len(exp), f"seed {seed}: {len(beats)} beats, expected {len(exp)}"
    for i, (g, e) in enumerate(zip(beats, exp)):
        assert g == e, f"seed {seed} beat {i}: {[hex(x) for x in g]} != {[hex(x) for x in e]}"


def random_program_check(bench, seed, n_pairs):
    """``n_pairs`` allowed dense pairs (all of them for None; load + matmul, random K <= R,
    M <= C, N), some accumulating onto the previous bank, a transpose, all banks read; operands
    behind random patterns in SBUF, the writer busy on bank 3."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 60])
    prog = Program(cfg, rng)
    R, C, B = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    pairs = allowed_pairs(cfg)
    if n_pairs is not None:
        pairs = [pairs[i] for i in rng.choice(len(pairs), n_pairs, replace=False)]
    n_used = {}
    for i, (fs, fx) in enumerate(pairs):
        K, M = int(rng.integers(1, R + 1)), int(rng.integers(1, C + 1))
        bank = i % cfg.psum_banks
        acc = bank in n_used and rng.random() < 0.5
        N = n_used[bank] if acc else int(rng.integers(1, 13))
        prog.load(rand_codes(rng, cfg.fmt(fs), (K, M), 0.1), fs)
        prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N), 0.1), fx, bank=bank, acc=acc)
        n_used[bank] = N
    prog.load(rand_codes(rng, cfg.fmt("bf16"), (R, C), 1.0), "bf16")
    prog.transpose(R, bank=cfg.psum_banks - 1)
    n_used[cfg.psum_banks - 1] = R
    for b, n in sorted(n_used.items()):
        prog.read(b, n)
    fp = fed_program(cfg, prog, rng)
    out = run(bench, fp, wr_bank=3, limit=20000)
    assert not out["err"] and not out["ap_err"], (out["err_code"], out["ap_err_code"])
    compare(out["beats"], prog, seed)
    assert out["wr_count"] > 0 and out["wr_stall"] == 0     # another bank: never stalled
    assert B >= 12


def test_random_programs_bit_exact(bench, seed):
    """Fast tier: 6 random format pairs per run."""
    random_program_check(bench, seed, 6)


@pytest.mark.full
def test_random_programs_every_pair(bench, seed):
    random_program_check(bench, seed, None)


@pytest.mark.parametrize("N", [16, pytest.param(SMALL.psum_bank_fp32, marks=pytest.mark.full)])
def test_back_to_back_one_column_per_cycle(bench, N, seed):
    """8 back-to-back full tiles (K = R, M = C, N moving columns) with the writer on bank 3:
    after the first moving beat, one beat every cycle (no bubble across AP or command
    boundaries)."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 61])
    prog = Program(cfg, rng)
    R, C = cfg.pe_rows, cfg.pe_cols
    f = cfg.fmt("bf16")
    for i in range(8):
        prog.load(rand_codes(rng, f, (R, C), 0.0), "bf16")
        prog.matmul(rand_codes(rng, f, (R, N), 0.0), "bf16", bank=i % cfg.psum_banks)
    prog.read(7 % cfg.psum_banks, N)
    fp = fed_program(cfg, prog, rng)
    out = run(bench, fp, wr_bank=3, limit=20000)
    compare(out["beats"], prog, seed)
    mv = out["mv"]
    assert len(mv) == 8 * N
    gaps = [b - a - 1 for a, b in zip(mv, mv[1:]) if b - a > 1]
    assert mv[-1] - mv[0] + 1 == 8 * N, f"bubbles between moving beats: {gaps}"
    assert out["wr_stall"] == 0


def test_feed_errors_drop_exactly_their_command(bench, seed):
    """A MATMUL whose AP has one element too many (E_SHAPE), an MX MATMUL (E_FLAGS), an AP
    outside SBUF (E_AP_RANGE), and a command the engine rejects (K = 0) whose fetched elements
    are discarded: the valid commands around them give the golden results, nothing hangs."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 62])
    tl = TensorLayouts(cfg)
    R, C = cfg.pe_rows, cfg.pe_cols
    f = cfg.fmt("bf16")
    prog = Program(cfg, rng)
    prog.load(rand_codes(rng, f, (R, C), 0.0), "bf16")
    prog.matmul(rand_codes(rng, f, (R, 6), 0.0), "bf16", bank=0)
    prog.matmul(rand_codes(rng, f, (R, 5), 0.0), "bf16", bank=1)
    prog.read(0, 6)
    prog.read(1, 5)
    fp = fed_program(cfg, prog, rng)
    lay = tl.cmd.size
    good = fp.cmds[1]
    ap_bits = good >> lay
    mm = tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index("bf16"), k=R, n=5, bank=2)
    bad_count = mm | (ap_bits << lay)                      # the AP has 6 elements, n = 5
    mm6 = tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index("bf16"), k=R, n=6, bank=2)
    bad_mx = tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index("bf16"), k=R, n=6, bank=2, mx=1)
    from golden.ap import AP
    from tb.ap.program import pack_ap
    from rtl.tensor.sbuf_fed import SbufTensorEngine
    apl = SbufTensorEngine.Signature(cfg).cmd_layout["ap"].shape
    far = AP(offset=cfg.sbuf_bytes_per_partition - 4, elem_bytes=2, dims=((1, 6),),
             num_partitions=cfg.partitions)
    bad_range = mm6 | (pack_ap(apl, far, cfg.ap_dims) << lay)
    k0 = tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index("bf16"), k=0, n=6, bank=2)
    engine_rejects = k0 | (ap_bits << lay)
    orig = list(fp.cmds)
    fp.cmds = ([orig[0], bad_count, bad_mx | (ap_bits << lay), bad_range, engine_rejects]
               + orig[1:])
    out = run(bench, fp, limit=4000)
    compare(out["beats"], prog, seed)
    assert out["ap_err"] and out["ap_err_code"] == E_SHAPE
    assert out["err"], "the engine did not report the K = 0 matmul"
    # the other codes, each as the first error of its own run
    for word, code in ((bad_mx | (ap_bits << lay), E_FLAGS), (bad_range, E_AP_RANGE)):
        fp.cmds = [orig[0], word] + orig[1:]
        out = run(bench, fp, limit=4000)
        assert out["ap_err_code"] == code, (hex(out["ap_err_code"]), code)
        compare(out["beats"], prog, seed)
