# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the tensor engine's N:M structured-sparse matmul (run through
``tests/test_tensor_sparse.py``; same harness and build as ``tb_engine``).

Every test builds a :class:`Program` (sparse loads and matmuls modelled by ``golden.sparse``),
runs it unattended and compares every PSUM read-out word bit for bit (seed in every message).
"""

import cocotb
import numpy as np
from amaranth.hdl import Shape

from golden.sparse import compress, sparse_formats
from rtl.config import parse_sparse_pattern
from rtl.tensor.layouts import (ERR_FORMAT, ERR_SHAPE, ERR_SPARSE, OP_LOAD, OP_MATMUL)
from tb.tensor.driver import EngineDriver
from tb.tensor.program import Program, rand_codes


def _narrow(cfg):
    """Weight formats a sparse matmul can pair with (any dense format but fp32/tf32)."""
    return [f for f in cfg.formats if f not in ("fp32", "tf32")]


def _tile(rng, cfg, pattern, fs, K, M, kind="random", p_wild=0.1):
    """A compressed tile ``(values, tags)`` of ``K`` physical rows: ``kind`` "random" (random
    masks, tags in random order), "magnitude" (``compress`` by magnitude of a dense tile),
    "low"/"high" (all kept at one end of each group), "same" (one position set everywhere)."""
    n, m = parse_sparse_pattern(pattern)
    f = cfg.fmt(fs)
    K_log = K // n * m
    if kind == "magnitude":
        return compress(rand_codes(rng, f, (K_log, M), p_wild), fs, pattern, cfg)
    vals = rand_codes(rng, f, (K, M), p_wild)
    tags = np.zeros((K, M), dtype=np.uint32)
    same = np.sort(rng.permutation(m)[:n])
    for g in range(K // n):
        for j in range(M):
            if kind == "low":
                pos = np.arange(n)
            elif kind == "high":
                pos = np.arange(m - n, m)
            elif kind == "same":
                pos = same
            else:
                pos = rng.permutation(m)[:n]
            tags[g * n:(g + 1) * n, j] = pos
    return vals, tags


@cocotb.test()
async def sparse_every_pattern_and_format(dut):
    """Every enabled pattern with every moving format it can run, random weight formats, random
    shapes (K_phys a multiple of n), random masks and tag orders, specials mixed in; every other
    program with random stalls on every stream."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 11)
    scale = int(p.get("scale", 1))
    nmax = min(cfg.psum_bank_fp32, 8 * scale)
    cases = [(pat, fx) for pat in cfg.sparsity for fx in sparse_formats(cfg, pat)]
    rng.shuffle(cases)
    chunk = cfg.psum_banks
    for lo in range(0, len(cases), chunk):
        prog = Program(cfg, rng)
        used = []
        for b, (pat, fx) in enumerate(cases[lo:lo + chunk]):
            n, m = parse_sparse_pattern(pat)
            fs = str(rng.choice(_narrow(cfg)))
            K = n * int(rng.integers(1, cfg.pe_rows // n + 1))
            M = int(rng.choice([1, cfg.pe_cols, rng.integers(1, cfg.pe_cols + 1)]))
            N = int(rng.choice([1, nmax, rng.integers(1, nmax + 1)]))
            kind = str(rng.choice(["random", "magnitude"]))
            vals, tags = _tile(rng, cfg, pat, fs, K, M, kind)
            prog.load_sparse(vals, tags, fs, pat)
            pw = float(rng.choice([0.0, 0.1]))
            prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx), (K // n * m, N), pw), fx, bank=b)
            used.append((b, N))
        for b, n_ in used:
            prog.read(b, n_)
        await drv.run_checked(prog, seed, f"sparse_every_pattern_and_format {cases[lo:lo + chunk]}",
                         bool(lo // chunk % 2))


@cocotb.test()
async def sparse_adversarial_masks(dut):
    """All kept weights at the low / high end of every group, the same positions in every group
    and column, and NaN / Inf among the kept weights and among the moving elements at kept and
    pruned positions (pruned ones must not leak)."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 12)
    for pat in cfg.sparsity:
        n, m = parse_sparse_pattern(pat)
        fx = sparse_formats(cfg, pat)[0]
        F = cfg.fmt(fx)
        prog = Program(cfg, rng)
        used = []
        for b, kind in enumerate(["low", "high", "same", "random"][:cfg.psum_banks]):
            K, M, N = cfg.pe_rows, cfg.pe_cols, 6
            vals, tags = _tile(rng, cfg, pat, fx, K, M, kind, p_wild=0.0)
            if kind == "random":       # NaN / Inf among the kept weights
                specials = [c for c in (F.nan_code, F.inf_code) if c is not None]
                vals[0, 0] = specials[0]
                vals[-1, -1] = specials[-1]
            prog.load_sparse(vals, tags, fx, pat)
            x = rand_codes(rng, F, (K // n * m, N), 0.0)
            # specials on the moving side: everywhere in group 0 except where column 0 keeps
            kept0 = set(int(t) for t in tags[:n, 0])
            for e in range(m):
                if e not in kept0 and F.inf_code is not None:
                    x[e, :] = F.inf_code if e % 2 else (F.nan_code or F.inf_code)
            if kind == "high":        # and at a kept position of every column in group 0
                x[m - 1, 0] = F.nan_code if F.nan_code is not None else x[m - 1, 0]
            prog.matmul_sparse(x, fx, bank=b)
            used.append((b, N))
        for b, n_ in used:
            prog.read(b, n_)
        await drv.run_checked(prog, seed, f"sparse_adversarial_masks {pat} {fx}",
                         bool(rng.integers(0, 2)))


@cocotb.test()
async def sparse_dense_accumulate_chain(dut):
    """Sparse and dense matmuls (several patterns) accumulate into the same PSUM banks in one
    accumulation group, back to back, reusing sparse weights without a new load, with random
    stalls on every stream."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 13)
    scale = int(p.get("scale", 1))
    prog = Program(cfg, rng)
    banks = min(cfg.psum_banks, 2)
    N = {b: int(rng.integers(1, min(cfg.psum_bank_fp32, 24) + 1)) for b in range(banks)}
    started = set()
    for i in range(8 * scale):
        b = int(rng.integers(0, banks))
        acc = b in started
        if i % 3 == 2:
            fs = fx = str(rng.choice(_narrow(cfg)))
            K = int(rng.integers(1, cfg.pe_rows + 1))
            prog.load(rand_codes(rng, cfg.fmt(fs), (K, cfg.pe_cols), 0.0), fs)
            prog.matmul(rand_codes(rng, cfg.fmt(fx), (K, N[b]), 0.0), fx, bank=b, acc=acc)
        else:
            pat = str(rng.choice(cfg.sparsity))
            n, m = parse_sparse_pattern(pat)
            fx = str(rng.choice(sparse_formats(cfg, pat)))
            fs = str(rng.choice(_narrow(cfg)))
            K = n * int(rng.integers(1, cfg.pe_rows // n + 1))
            vals, tags = _tile(rng, cfg, pat, fs, K, cfg.pe_cols, "random", 0.0)
            prog.load_sparse(vals, tags, fs, pat)
            prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx), (K // n * m, N[b]), 0.0), fx,
                               bank=b, acc=acc)
            if rng.random() < 0.4:    # same sparse weights again, fewer rows
                K2 = n * int(rng.integers(1, K // n + 1))
                prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx), (K2 // n * m, N[b]), 0.0), fx,
                                   bank=b, acc=True)
        started.add(b)
    for b in sorted(started):
        prog.read(b, N[b])
    await drv.run_checked(prog, seed, "sparse_dense_accumulate_chain", True)


def _error_cases(cfg, tl, rng):
    """``(name, build(prog), expected code)``: each appends one bad operation to a program
    whose bank 0 already holds golden data."""
    pats = list(cfg.sparsity)
    out = []
    f8 = [f for f in cfg.formats if cfg.fmt(f).width == 8]
    p0 = pats[0]
    n0, m0 = parse_sparse_pattern(p0)
    fx0 = sparse_formats(cfg, p0)[0]

    def bad_tags(pattern, how):
        def build(prog):
            n, m = parse_sparse_pattern(pattern)
            fs = sparse_formats(cfg, pattern)[0]
            vals, tags = _tile(rng, cfg, pattern, fs, cfg.pe_rows, cfg.pe_cols, "random", 0.0)
            g = int(rng.integers(0, cfg.pe_rows // n))
            j = int(rng.integers(0, cfg.pe_cols))
            if how == "range":
                tags[g * n, j] = int(rng.integers(m, 1 << tl.tag_bits))
            else:
                tags[g * n + n - 1, j] = tags[g * n, j]
            prog.load_sparse(vals, tags, fs, pattern, expect_error=ERR_SPARSE)
            # the matmul that would use the poisoned weights is rejected (no beats sent)
            prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fs), k=cfg.pe_rows, n=1,
                                     bank=0, acc=1, sp=tl.sp_index(pattern)), ERR_SPARSE)
        return build

    for pat in pats:
        n, m = parse_sparse_pattern(pat)
        if m < (1 << tl.tag_bits):
            out.append((f"{pat} tag >= m", bad_tags(pat, "range"), ERR_SPARSE))
        if n > 1:
            out.append((f"{pat} duplicate position", bad_tags(pat, "dup"), ERR_SPARSE))

    def sparse_on_dense(prog):
        prog.load(rand_codes(rng, cfg.fmt(fx0), (cfg.pe_rows, cfg.pe_cols), 0.0), fx0)
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fx0), k=n0, n=1, bank=0, acc=1,
                                 sp=tl.sp_index(p0)), ERR_SPARSE)
    out.append(("sparse matmul on dense weights", sparse_on_dense, ERR_SPARSE))

    def dense_on_sparse(prog):
        vals, tags = _tile(rng, cfg, p0, fx0, cfg.pe_rows, cfg.pe_cols)
        prog.load_sparse(vals, tags, fx0, p0)
        prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fx0), k=cfg.pe_rows, n=1, bank=0,
                                 acc=1), ERR_SPARSE)
    out.append(("dense matmul on sparse weights", dense_on_sparse, ERR_SPARSE))

    sp_max = (1 << Shape.cast(tl.cmd["sp"].shape).width) - 1
    if sp_max > len(pats):
        out.append(("pattern not enabled", lambda prog: prog.raw_cmd(
            tl.pack_cmd(OP_LOAD, fmt=0, m=1, k=cfg.pe_rows, sp=len(pats) + 1), ERR_SPARSE),
            ERR_SPARSE))

    if n0 > 1:
        out.append((f"{p0} load k not a multiple of n", lambda prog: prog.raw_cmd(
            tl.pack_cmd(OP_LOAD, fmt=tl.fmt_index(fx0), m=1, k=n0 - 1, sp=1), ERR_SHAPE),
            ERR_SHAPE))

    for pk in pats:
        nk, _ = parse_sparse_pattern(pk)
        if 1 < nk < cfg.pe_rows:
            fk = sparse_formats(cfg, pk)[0]
            for k_bad, what in ((2 * nk, "beyond the load's k"), (nk + 1, "not a multiple of n")):
                def mm_k(prog, pk=pk, nk=nk, fk=fk, k_bad=k_bad):
                    vals, tags = _tile(rng, cfg, pk, fk, nk, cfg.pe_cols)
                    prog.load_sparse(vals, tags, fk, pk)
                    prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fk), k=k_bad, n=1,
                                             bank=0, acc=1, sp=tl.sp_index(pk)), ERR_SHAPE)
                out.append((f"{pk} matmul k={k_bad} {what}", mm_k, ERR_SHAPE))
            break

    wide_for = [(p, f) for p in pats for f in cfg.formats
                if f not in sparse_formats(cfg, p) and f not in ("fp32", "tf32")]
    if wide_for and f8:
        pw, fw = wide_for[0]

        def too_wide(prog):
            fs = sparse_formats(cfg, pw)[0]
            n, _ = parse_sparse_pattern(pw)
            vals, tags = _tile(rng, cfg, pw, fs, n, cfg.pe_cols)
            prog.load_sparse(vals, tags, fs, pw)
            prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fw), k=n, n=1, bank=0, acc=1,
                                     sp=tl.sp_index(pw)), ERR_FORMAT)
        out.append((f"{pw} with {fw} moving (lane too narrow)", too_wide, ERR_FORMAT))
    if cfg.mx_formats:
        def mx_sparse(prog):
            vals, tags = _tile(rng, cfg, p0, fx0, n0, cfg.pe_cols)
            prog.load_sparse(vals, tags, fx0, p0)
            prog.raw_cmd(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fx0), k=n0, n=1, bank=0,
                                     acc=1, mx=1, sp=1), ERR_FORMAT)
        out.append(("mx sparse matmul", mx_sparse, ERR_FORMAT))
    return out


@cocotb.test()
async def sparse_errors_rejected(dut):
    """Every sparse error, each in its own run from reset: the documented code, nothing written
    (bank 0's golden data read back unchanged), no hang, and the next commands (a good sparse
    load and an accumulating sparse matmul) run normally."""
    cfg, p, seed, rng, drv = EngineDriver.setup(dut, 14)
    tl = Program(cfg).tl
    p0 = cfg.sparsity[0]
    n0, m0 = parse_sparse_pattern(p0)
    fx0 = sparse_formats(cfg, p0)[0]
    N = 4
    for name, build, code in _error_cases(cfg, tl, rng):
        prog = Program(cfg, rng)
        vals, tags = _tile(rng, cfg, p0, fx0, cfg.pe_rows, cfg.pe_cols)
        prog.load_sparse(vals, tags, fx0, p0)
        prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx0), (cfg.pe_rows // n0 * m0, N), 0.0),
                           fx0, bank=0)
        build(prog)
        vals, tags = _tile(rng, cfg, p0, fx0, cfg.pe_rows, cfg.pe_cols)
        prog.load_sparse(vals, tags, fx0, p0)
        prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx0), (cfg.pe_rows // n0 * m0, N), 0.0),
                           fx0, bank=0, acc=True)
        prog.read(0, N)
        await drv.run_checked(prog, seed, f"sparse_errors_rejected ({name})",
                         bool(rng.integers(0, 2)), err=code)
