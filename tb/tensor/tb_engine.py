# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the tensor engine (run through ``tests/test_tensor_engine.py``).

Parameters (``tb.env.params()``): ``seed``, ``depths`` (harness memory depths), ``scale``
(1 = fast tier, larger = more operations). Each test builds a random :class:`Program`, runs it
unattended on the harness and compares every PSUM read-out word bit for bit with
``golden.tensor`` (the seed is in every assert message).
"""

import cocotb
import numpy as np
from amaranth.hdl import Shape

from rtl.tensor.layouts import (OP_MATMUL, OP_LOAD, OP_READ, OP_TRANSPOSE, ERR_SHAPE, ERR_PAIR,
                                ERR_FORMAT)
from tb.tensor.driver import EngineDriver, compare
from tb.tensor.program import Program, rand_codes, allowed_pairs


def _setup(dut, salt):
    drv = EngineDriver(dut)
    seed = drv.seed + salt
    return drv.cfg, drv.params, seed, np.random.default_rng(seed), drv


def _dims(rng, cfg, nmax):
    R, C = cfg.pe_rows, cfg.pe_cols
    K = int(rng.choice([1, R, rng.integers(1, R + 1)]))
    M = int(rng.choice([1, C, rng.integers(1, C + 1)]))
    N = int(rng.choice([1, nmax, rng.integers(1, nmax + 1)]))
    return K, M, N


def _read_all(prog, cfg, banks, n):
    for b in banks:
        prog.read(b, n)


async def _run_check(drv, prog, seed, what, bubbles):
    await drv.reset()
    out = await drv.run(prog, bubbles=bubbles)
    assert out["err"] == 0, f"seed={seed} {what}: unexpected error code {out['err_code']}"
    compare(out["beats"], prog, seed, what)
    return out


@cocotb.test()
async def dense_bf16_basic(dut):
    """Full-size and ragged BF16 matmuls, overwrite then accumulate, no stalls."""
    cfg, p, seed, rng, drv = _setup(dut, 1)
    prog = Program(cfg, rng)
    R, C = cfg.pe_rows, cfg.pe_cols
    nmax = min(cfg.psum_bank_fp32, 16)
    f = cfg.fmt("bf16")
    for i, (K, M, N) in enumerate([(R, C, nmax), (1, 1, 1), (R, C, nmax),
                                   (max(1, R // 2), max(1, C // 2), 3)]):
        prog.load(rand_codes(rng, f, (K, M), 0.0), "bf16")
        prog.matmul(rand_codes(rng, f, (K, N), 0.0), "bf16", bank=i % cfg.psum_banks,
                    acc=(i == 2))
    _read_all(prog, cfg, range(min(4, cfg.psum_banks)), nmax)
    await _run_check(drv, prog, seed, "dense_bf16_basic", False)


@cocotb.test()
async def dense_all_pairs(dut):
    """Every allowed format pair, random ragged shapes, specials mixed in, random stalls."""
    cfg, p, seed, rng, drv = _setup(dut, 2)
    nmax = min(cfg.psum_bank_fp32, 8 * int(p.get("scale", 1)))
    pairs = allowed_pairs(cfg) * int(p.get("scale", 1))
    rng.shuffle(pairs)
    chunk = max(1, cfg.psum_banks)
    for lo in range(0, len(pairs), chunk):
        prog = Program(cfg, rng)
        used = []
        for i, (fs, fx) in enumerate(pairs[lo:lo + chunk]):
            K, M, N = _dims(rng, cfg, nmax)
            pw = float(rng.choice([0.0, 0.05, 0.3]))
            prog.load(rand_codes(rng, cfg.fmt(fs), (K, M), pw), fs)
            prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N), pw), fx, bank=i, acc=False)
            used.append((i, N))
        for b, n in used:
            prog.read(b, n)
        await _run_check(drv, prog, seed, f"dense_all_pairs {pairs[lo:lo + chunk]}",
                         bool(rng.integers(0, 2)))


@cocotb.test()
async def accumulate_chain_backpressure(dut):
    """Long accumulate chains across banks, back-to-back operations, random stalls."""
    cfg, p, seed, rng, drv = _setup(dut, 3)
    scale = int(p.get("scale", 1))
    nmax = min(cfg.psum_bank_fp32, 32)
    prog = Program(cfg, rng)
    banks = min(cfg.psum_banks, 3)
    fmts = [f for f in cfg.formats if f not in ("fp32", "tf32")] or list(cfg.formats)
    N = {b: int(rng.integers(1, nmax + 1)) for b in range(banks)}
    started = set()
    for i in range(6 * scale):
        b = int(rng.integers(0, banks))
        K = int(rng.integers(1, cfg.pe_rows + 1))
        M = cfg.pe_cols if i % 3 else int(rng.integers(1, cfg.pe_cols + 1))
        fs, fx = str(rng.choice(fmts)), str(rng.choice(fmts))
        pw = 0.02 if i % 5 == 4 else 0.0
        prog.load(rand_codes(rng, cfg.fmt(fs), (K, M), pw), fs)
        prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N[b]), pw), fx, bank=b,
                    acc=b in started)
        started.add(b)
        if rng.random() < 0.3:   # reuse the same weights (no new load)
            prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N[b]), 0.0), fx, bank=b, acc=True)
    for b in sorted(started):
        prog.read(b, N[b])
    await _run_check(drv, prog, seed, "accumulate_chain_backpressure", True)


@cocotb.test()
async def transpose_bit_exact(dut):
    """Transpose of every PE format, codes uniformly random (NaN/Inf payloads, -0, subnormals)."""
    cfg, p, seed, rng, drv = _setup(dut, 4)
    from golden.tensor import transpose_formats
    prog = Program(cfg, rng)
    used = []
    for i, fmt in enumerate(transpose_formats(cfg)):
        K = int(rng.integers(1, cfg.pe_rows + 1)) if i % 2 else cfg.pe_rows
        M = int(rng.integers(1, cfg.pe_cols + 1)) if i % 2 else cfg.pe_cols
        K = min(K, cfg.psum_bank_fp32)
        b = i % cfg.psum_banks
        prog.load(rand_codes(rng, cfg.fmt(fmt), (K, M), 1.0), fmt)
        prog.transpose(K, bank=b)
        prog.read(b, K)
    await _run_check(drv, prog, seed, "transpose_bit_exact", bool(seed & 1))


@cocotb.test()
async def invalid_commands_rejected(dut):
    """Out-of-range shapes and forbidden pairs are dropped; the engine keeps running."""
    cfg, p, seed, rng, drv = _setup(dut, 5)
    tl = Program(cfg).tl
    prog = Program(cfg, rng)
    f = cfg.formats[0]
    K, M, N = cfg.pe_rows, cfg.pe_cols, min(4, cfg.psum_bank_fp32)
    prog.load(rand_codes(rng, cfg.fmt(f), (K, M), 0.0), f)
    prog.matmul(rand_codes(rng, cfg.fmt(f), (K, N), 0.0), f, bank=0)
    # invalid: N = 0, N too big, K = 0, bank out of range, load of 0 columns
    prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=0, k=K, n=0, bank=0), ERR_SHAPE)
    prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=0, k=0, n=1, bank=0))
    prog.raw_cmd(tl.pack_cmd(OP_LOAD, fmt=0, m=0))
    if cfg.psum_banks < (1 << Shape.cast(tl.cmd["bank"].shape).width):
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=0, k=1, n=1, bank=cfg.psum_banks))
    wide = [x for x in cfg.formats if x in ("fp32", "tf32")]
    narrow = [x for x in cfg.formats if x not in ("fp32", "tf32")]
    if wide and narrow:
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(narrow[0]), k=1, n=1, bank=0))
    prog.matmul(rand_codes(rng, cfg.fmt(f), (K, N), 0.0), f, bank=0, acc=True)
    prog.read(0, N)
    await drv.reset()
    out = await drv.run(prog, bubbles=False)
    assert out["err"] == 1 and out["err_code"] == ERR_SHAPE, \
        f"seed={seed}: err={out['err']} code={out['err_code']}, expected {ERR_SHAPE}"
    compare(out["beats"], prog, seed, "invalid_commands_rejected")


@cocotb.test()
async def mx_matmul(dut):
    """MX matmuls, every (stationary, moving) MX format pair, partial scale blocks, scales near
    the extremes (products beyond FP32's range), NaN scales, accumulate."""
    cfg, p, seed, rng, drv = _setup(dut, 6)
    if not cfg.mx_formats:
        return
    blk = cfg.mx_block
    prog = Program(cfg, rng)
    nmax = min(cfg.psum_bank_fp32, 8)
    used = {}
    pairs = [(a, b) for a in cfg.mx_formats for b in cfg.mx_formats]
    for i, (ms, mx) in enumerate(pairs):
        K, M, N = _dims(rng, cfg, nmax)
        nb = -(-K // blk)
        es, ex = cfg.mx_element_formats[ms], cfg.mx_element_formats[mx]
        kind = i % 3
        lo, hi = {0: (120, 135), 1: (0, 256), 2: (1, 255)}[kind]
        ss = rng.integers(lo, hi, (nb, M))
        xs = rng.integers(lo, hi, (nb, N))
        pw = 0.0 if kind == 0 else 0.1
        prog.load(rand_codes(rng, es, (K, M), pw), es.name, scales=ss)
        b = i % cfg.psum_banks
        acc = b in used and used[b] == N
        prog.matmul_mx(rand_codes(rng, ex, (K, N), pw), xs, mx, bank=b, acc=acc, s_mx_fmt=ms)
        used[b] = N if not acc else used[b]
    for b, n in sorted(used.items()):
        prog.read(b, n)
    await _run_check(drv, prog, seed, "mx_matmul", bool(seed & 2))
