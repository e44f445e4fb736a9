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

from rtl.tensor.layouts import (OP_MATMUL, OP_LOAD, OP_READ, OP_TRANSPOSE, ERR_SHAPE)
from tb.tensor.driver import EngineDriver, compare
from tb.tensor.program import Program, rand_codes, allowed_pairs


def _dims(rng, cfg, nmax):
    R, C = cfg.pe_rows, cfg.pe_cols
    K = int(rng.choice([1, R, rng.integers(1, R + 1)]))
    M = int(rng.choice([1, C, rng.integers(1, C + 1)]))
    N = int(rng.choice([1, nmax, rng.integers(1, nmax + 1)]))
    return K, M, N


def _read_all(prog, cfg, banks, n):
    for b in banks:
        prog.read(b, n)


@cocotb.test()
async def dense_bf16_basic(dut):
    """Full-size and ragged BF16 matmuls, overwrite then accumulate, no stalls."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 1)
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
    await drv.run_checked(prog, seed, "dense_bf16_basic", False)


@cocotb.test()
async def dense_all_pairs(dut):
    """Every allowed format pair, random ragged shapes, specials mixed in, random stalls."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 2)
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
        await drv.run_checked(prog, seed, f"dense_all_pairs {pairs[lo:lo + chunk]}",
                         bool(rng.integers(0, 2)))


@cocotb.test()
async def accumulate_chain_backpressure(dut):
    """Long accumulate chains across banks, back-to-back operations, random stalls."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 3)
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
    await drv.run_checked(prog, seed, "accumulate_chain_backpressure", True)


@cocotb.test()
async def accumulate_hazard_small_n(dut):
    """Back-to-back accumulating matmuls with N = 1, 2, 3 (fewer columns than PSUM's hazard
    window) on the same weights and bank, a transpose writing the same entries between them,
    with and without moving bubbles: the engine holds a column at issue until PSUM can take
    its result (the array never stops), bit for bit."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 10)
    fmts = [f for f in ("bf16", "fp8_e4m3", "fp16") if f in cfg.formats] or [cfg.formats[0]]
    for bubbles in (False, True):
        prog = Program(cfg, rng)
        for N in (1, 2, 3):
            fs = str(rng.choice(fmts))
            K = cfg.pe_rows
            w = rand_codes(rng, cfg.fmt(fs), (K, cfg.pe_cols), 0.0)
            prog.load(w, fs)
            for i in range(4):
                prog.matmul(rand_codes(rng, cfg.fmt(fs), (K, N), 0.0), fs, bank=0, acc=i > 0)
            prog.read(0, N)
        prog.load(rand_codes(rng, cfg.fmt(fmts[0]), (cfg.pe_rows, cfg.pe_cols), 0.0), fmts[0])
        prog.transpose(2, bank=1)
        prog.matmul(rand_codes(rng, cfg.fmt(fmts[0]), (cfg.pe_rows, 2), 0.0), fmts[0], bank=1,
                    acc=True)
        prog.read(1, 2)
        await drv.run_checked(prog, seed, f"accumulate_hazard_small_n bubbles={bubbles}",
                              bubbles)


@cocotb.test()
async def fp32_passes_mixed(dut):
    """FP32 in four passes (``cfg.fp32_passes == 4``) mixed with one-pass pairs: FP32, TF32 x
    FP32, TF32, BF16, FP8 and MX matmuls (full-size and ragged, specials mixed in) back to back
    and accumulating into one PSUM bank, with and without random stalls, bit for bit; and the
    exact cycle count of back-to-back full FP32 tiles with no stalls: ``M + 1 + tiles * 4N +
    L`` (``tb.tensor.build.cycle_formula`` with 4 parts per column; 1 part when native)."""
    from tb.tensor.build import cycle_formula
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 9)
    if "fp32" not in cfg.formats:
        return
    R, C = cfg.pe_rows, cfg.pe_cols
    nmax = min(cfg.psum_bank_fp32, 12)
    modes = [("fp32", "fp32"), ("bf16", "bf16"), ("fp32", "fp32"), ("tf32", "fp32"),
             ("fp32", "tf32"), ("tf32", "tf32"), ("fp8_e4m3", "fp8_e5m2"), ("fp32", "fp32")]
    modes = [(a, b) for a, b in modes if a in cfg.formats and b in cfg.formats]
    for bubbles in (False, True):
        prog = Program(cfg, rng)
        N = int(rng.integers(1, nmax + 1))
        for i, (fs, fx) in enumerate(modes):
            K = R if i % 2 else int(rng.integers(1, R + 1))
            M = C if i % 3 else int(rng.integers(1, C + 1))
            pw = 0.05 if i % 4 == 3 else 0.0
            prog.load(rand_codes(rng, cfg.fmt(fs), (K, M), pw), fs)
            prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N), pw), fx, bank=0, acc=i > 0)
            if i == 2 and rng.random() < 0.5:     # the same FP32 weights again (no load)
                prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N), 0.0), fx, bank=0, acc=True)
            if i == 4 and cfg.mx_formats:
                mx = cfg.mx_formats[0]
                el = cfg.mx_element_formats[mx]
                nb = -(-K // cfg.mx_block)
                prog.load(rand_codes(rng, el, (K, C), 0.0), el.name,
                          scales=rng.integers(120, 134, (nb, C)))
                prog.matmul_mx(rand_codes(rng, el, (K, N), 0.0),
                               rng.integers(120, 134, (nb, N)), mx, bank=0, acc=True,
                               s_mx_fmt=mx)
        prog.read(0, N)
        await drv.run_checked(prog, seed, f"fp32_passes_mixed bubbles={bubbles}", bubbles)
    # timing: back-to-back full FP32 tiles
    tiles, N = 3, min(cfg.psum_bank_fp32, 4 * R + 8)
    prog = Program(cfg, rng)
    f = cfg.fmt("fp32")
    for i in range(tiles):
        prog.load(rand_codes(rng, f, (R, C), 0.0), "fp32")
        prog.matmul(rand_codes(rng, f, (R, N), 0.0), "fp32", bank=i % cfg.psum_banks)
    prog.read((tiles - 1) % cfg.psum_banks, N)
    out = await drv.run_checked(prog, seed, "fp32_passes_mixed timing", False)
    window = out["t_last_write"] - out["t_first_in"] + 1
    want = cycle_formula(cfg, M=C, N=N, tiles=tiles, parts=cfg.fp32_passes)
    assert window == want, f"seed={seed}: {tiles} FP32 tiles took {window} cycles, want {want}"


@cocotb.test()
async def transpose_bit_exact(dut):
    """Transpose of every PE format, codes uniformly random (NaN/Inf payloads, -0, subnormals)."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 4)
    from golden.tensor import transpose_formats
    prog = Program(cfg, rng)
    for i, fmt in enumerate(transpose_formats(cfg)):
        K = int(rng.integers(1, cfg.pe_rows + 1)) if i % 2 else cfg.pe_rows
        M = int(rng.integers(1, cfg.pe_cols + 1)) if i % 2 else cfg.pe_cols
        K = min(K, cfg.psum_bank_fp32)
        b = i % cfg.psum_banks
        prog.load(rand_codes(rng, cfg.fmt(fmt), (K, M), 1.0), fmt)
        prog.transpose(K, bank=b)
        prog.read(b, K)
    await drv.run_checked(prog, seed, "transpose_bit_exact", bool(seed & 1))


@cocotb.test()
async def invalid_commands_rejected(dut):
    """Out-of-range shapes and forbidden pairs are dropped; the engine keeps running."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 5)
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
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 6)
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
    await drv.run_checked(prog, seed, "mx_matmul", bool(seed & 2))


def _n_max(tl, field):
    """Largest value the command field can encode."""
    return (1 << Shape.cast(tl.cmd[field].shape).width) - 1


def _invalid_read_transpose_cmds(cfg, tl):
    """(name, command word, needs a load first) of every invalid READ / TRANSPOSE the command
    layout can encode on ``cfg`` (docs/tensor-engine.md, Limits; engine.py's checks)."""
    R, B = cfg.pe_rows, cfg.psum_bank_fp32
    out = [("read n=0", tl.pack_cmd(OP_READ, n=0, bank=0), True),
           ("transpose k=0", tl.pack_cmd(OP_TRANSPOSE, k=0, bank=0), True),
           ("transpose before any load", tl.pack_cmd(OP_TRANSPOSE, k=1, bank=0), False)]
    for n in sorted({B + 1, _n_max(tl, "n")}):
        if B < n <= _n_max(tl, "n"):
            out.append((f"read n={n} > psum_bank_fp32={B}", tl.pack_cmd(OP_READ, n=n, bank=0),
                        True))
    for k in sorted({R + 1, _n_max(tl, "k")}):
        if R < k <= _n_max(tl, "k"):
            out.append((f"transpose k={k} > pe_rows={R}", tl.pack_cmd(OP_TRANSPOSE, k=k, bank=0),
                        True))
    if B < R:     # transpose limit K <= psum_bank_fp32 (golden.tensor.transpose)
        out.append((f"transpose k={B + 1} > psum_bank_fp32={B}",
                    tl.pack_cmd(OP_TRANSPOSE, k=B + 1, bank=0), True))
    if cfg.psum_banks <= _n_max(tl, "bank"):
        for b in sorted({cfg.psum_banks, _n_max(tl, "bank")}):
            out.append((f"read bank={b}", tl.pack_cmd(OP_READ, n=1, bank=b), True))
            out.append((f"transpose bank={b}", tl.pack_cmd(OP_TRANSPOSE, k=1, bank=b), True))
    return out


@cocotb.test()
async def invalid_read_transpose_rejected(dut):
    """Every encodable invalid READ (N = 0, N > psum_bank_fp32, bank out of range) and
    TRANSPOSE (K = 0, K > pe_rows, bank out of range, before any load), each in its own run
    from reset: ``err`` with ``ERR_SHAPE``, nothing read (no extra result beats) or written
    (two banks of known data read back unchanged), and the engine keeps running (a later
    accumulate and the reads are golden)."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 7)
    tl = Program(cfg).tl
    f = cfg.formats[0]
    R, C = cfg.pe_rows, cfg.pe_cols
    n_fill = min(cfg.psum_bank_fp32, 8)
    banks = list(range(min(2, cfg.psum_banks)))
    cases = _invalid_read_transpose_cmds(cfg, tl)
    if cfg.psum_banks > _n_max(tl, "bank"):
        dut._log.info(f"bank out of range is not encodable (psum_banks = {cfg.psum_banks} "
                      f"fills the bank field): not tested on this config")
    for name, word, load_first in cases:
        prog = Program(cfg, rng)
        if not load_first:
            prog.raw_cmd(word, ERR_SHAPE)
        prog.load(rand_codes(rng, cfg.fmt(f), (R, C), 0.0), f)
        for b in banks:
            prog.matmul(rand_codes(rng, cfg.fmt(f), (R, n_fill), 0.0), f, bank=b)
        if load_first:
            prog.raw_cmd(word, ERR_SHAPE)
        prog.matmul(rand_codes(rng, cfg.fmt(f), (R, n_fill), 0.0), f, bank=banks[0], acc=True)
        for b in banks:
            prog.read(b, n_fill)
        await drv.reset()
        out = await drv.run(prog, bubbles=bool(rng.integers(0, 2)))
        assert (out["err"], out["err_code"]) == (1, ERR_SHAPE), \
            f"seed={seed} {name}: err={out['err']} code={out['err_code']}, expected {ERR_SHAPE}"
        compare(out["beats"], prog, seed, f"invalid_read_transpose_rejected ({name})")


#: FP32 codes whose exponent field is all ones (Inf, NaN payloads, both signs) and neighbours.
FP32_ALL_ONES_EXP = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF,
                     0xFFC00000, 0xFF800001, 0x7FBFFFFF, 0xFFBFFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
                     0x00800000, 0x80800000, 0x807FFFFF, 0x80000000]


def _all_ones_exp_codes(rng, fmt, shape):
    """Codes of ``fmt`` with the exponent field all ones (random sign and mantissa, mantissa
    0 and all ones included)."""
    M, E = fmt.man_bits, fmt.exp_bits
    man = rng.integers(0, 1 << M, shape)
    flat = man.reshape(-1)
    flat[:2] = [0, (1 << M) - 1][:flat.size]
    sign = rng.integers(0, 2, shape)
    return ((sign << (fmt.width - 1)) | (((1 << E) - 1) << M) | man).astype(np.uint32)


@cocotb.test()
async def transpose_nan_shapes(dut):
    """Directed transposes of tiles full of FP32 codes with an all-ones exponent field (Inf,
    NaN payloads; the ones the PE must encode with a flag) and their neighbours, full-size and
    ragged, and of tf32 / bf16 / fp16 / fp8 codes with an all-ones exponent: read back bit for
    bit equal to ``golden.tensor.transpose``, without and with stalls."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 8)
    from golden.tensor import transpose_formats
    R, C, B = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    Kmax = min(R, B)
    tiles = []
    if "fp32" in cfg.formats:
        tiles.append(("fp32", np.resize(np.array(FP32_ALL_ONES_EXP, np.uint32), (Kmax, C))))
        rag = np.resize(np.array(FP32_ALL_ONES_EXP[::-1], np.uint32), (Kmax, C))
        tiles.append(("fp32", rag[:max(1, Kmax - 1), :max(1, C - 1)]))
    for fmt in ("tf32", "bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "cfp8"):
        if fmt in transpose_formats(cfg):
            tiles.append((fmt, _all_ones_exp_codes(rng, cfg.fmt(fmt), (Kmax, C))))
    for bubbles in (False, True):
        for lo in range(0, len(tiles), cfg.psum_banks):
            prog = Program(cfg, rng)
            chunk = tiles[lo:lo + cfg.psum_banks]
            for b, (fmt, codes) in enumerate(chunk):
                prog.load(codes, fmt)
                prog.transpose(codes.shape[0], bank=b)
            for b, (_fmt, codes) in enumerate(chunk):
                prog.read(b, codes.shape[0])
            await drv.run_checked(prog, seed,
                             f"transpose_nan_shapes {[t[0] for t in chunk]} bubbles={bubbles}",
                             bubbles)
