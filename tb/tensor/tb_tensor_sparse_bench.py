# SPDX-License-Identifier: Apache-2.0
"""cocotb module of ``bench/bench_sparsity.py`` and the sparse part of ``make sim``: timed
sparse and dense GEMMs on the harness, results checked bit for bit, cycles written as JSON.

Parameters: ``seed``, ``depths``, ``out`` (JSON path), ``n`` (moving columns per tile),
``tiles`` (tile counts to time, e.g. ``[2, 8]``), ``demo`` (run only the 4:16-vs-dense-twin
GEMM of ``make sim``).

Output: ``{"sparse": {pattern: {"fmt", "cr", tiles: window cycles}}, "dense": {fmt: {tiles:
window cycles}}, "demo": {...}}``; a window runs from the first input beat accepted to the last
PSUM write.
"""

import json

import cocotb
import numpy as np

from golden.sparse import compress, sparse_formats
from rtl.config import parse_sparse_pattern
from tb.tensor.driver import EngineDriver, compare
from tb.tensor.program import Program, rand_codes


def bench_format(cfg, pattern):
    """The moving (and weight) format timed for ``pattern``: the narrowest it can move."""
    return min(sparse_formats(cfg, pattern), key=lambda f: cfg.fmt(f).width)


def bench_cases(cfg):
    """``(pattern, moving format)`` pairs timed: every pattern at its narrowest format, and at
    its widest when that is wider (e.g. 2:4 with BF16)."""
    out = []
    for pattern in cfg.sparsity:
        fmts = sparse_formats(cfg, pattern)
        lo = bench_format(cfg, pattern)
        hi = max(fmts, key=lambda f: cfg.fmt(f).width)
        out.append((pattern, lo))
        if cfg.fmt(hi).width > cfg.fmt(lo).width:
            out.append((pattern, hi))
    return out


def sparse_program(cfg, rng, pattern, fmt, *, tiles, n):
    """``tiles`` back-to-back full sparse tiles (K_phys = rows, M = cols), magnitude-pruned."""
    nn, m = parse_sparse_pattern(pattern)
    R, C = cfg.pe_rows, cfg.pe_cols
    prog = Program(cfg, rng)
    for i in range(tiles):
        dense = rand_codes(rng, cfg.fmt(fmt), (R // nn * m, C), 0.0)
        vals, tags = compress(dense, fmt, pattern, cfg)
        prog.load_sparse(vals, tags, fmt, pattern)
        prog.matmul_sparse(rand_codes(rng, cfg.fmt(fmt), (R // nn * m, n), 0.0), fmt,
                           bank=i % cfg.psum_banks)
    prog.read((tiles - 1) % cfg.psum_banks, n)
    return prog


def dense_program(cfg, rng, fmt, *, tiles, n):
    R, C = cfg.pe_rows, cfg.pe_cols
    prog = Program(cfg, rng)
    for i in range(tiles):
        prog.load(rand_codes(rng, cfg.fmt(fmt), (R, C), 0.0), fmt)
        prog.matmul(rand_codes(rng, cfg.fmt(fmt), (R, n), 0.0), fmt, bank=i % cfg.psum_banks)
    prog.read((tiles - 1) % cfg.psum_banks, n)
    return prog


def demo_programs(cfg, rng, pattern, fmt, n):
    """One sparse GEMM over K_log = rows * m / n and its dense twin: the decompressed tile as
    m / n dense K-chunks accumulating in PSUM. Both end in PSUM bank 0."""
    nn, m = parse_sparse_pattern(pattern)
    R, C = cfg.pe_rows, cfg.pe_cols
    K_log = R // nn * m
    dense = rand_codes(rng, cfg.fmt(fmt), (K_log, C), 0.0)
    vals, tags = compress(dense, fmt, pattern, cfg)
    x = rand_codes(rng, cfg.fmt(fmt), (K_log, n), 0.0)
    sp = Program(cfg, rng)
    sp.load_sparse(vals, tags, fmt, pattern)
    sp.matmul_sparse(x, fmt, bank=0)
    sp.read(0, n)
    from golden.sparse import decompress
    full = decompress(vals, tags, fmt, pattern, cfg)
    dn = Program(cfg, rng)
    for c in range(K_log // R):
        dn.load(full[c * R:(c + 1) * R], fmt)
        dn.matmul(x[c * R:(c + 1) * R], fmt, bank=0, acc=c > 0)
    dn.read(0, n)
    return sp, dn


async def _timed(drv, prog, seed, what):
    await drv.reset()
    out = await drv.run(prog)
    assert out["err"] == 0, f"seed={seed} {what}: error code {out['err_code']}"
    compare(out["beats"], prog, seed, what)
    return out["t_last_write"] - out["t_first_in"] + 1, out


@cocotb.test()
async def sparse_bench(dut):
    drv = EngineDriver(dut)
    cfg, p, seed = drv.cfg, drv.params, drv.seed
    rng = np.random.default_rng(seed)
    n = int(p["n"])
    res = {"sparse": {}, "dense": {}}
    if p.get("demo"):
        pattern = "4:16" if "4:16" in cfg.sparsity else cfg.sparsity[0]
        fmt = bench_format(cfg, pattern)
        sp, dn = demo_programs(cfg, rng, pattern, fmt, n)
        cs, _ = await _timed(drv, sp, seed, f"demo sparse {pattern}")
        cd, _ = await _timed(drv, dn, seed, "demo dense twin")
        res["demo"] = {"pattern": pattern, "fmt": fmt, "n": n, "sparse_cycles": cs,
                       "dense_cycles": cd, "k_logical": sp.macs // (cfg.pe_cols * n)}
    else:
        for pattern, fmt in bench_cases(cfg):
            nn, m = parse_sparse_pattern(pattern)
            key = pattern if fmt == bench_format(cfg, pattern) else f"{pattern}@{fmt}"
            r = res["sparse"][key] = {"fmt": fmt, "cr": m // nn}
            for t in p["tiles"]:
                r[str(t)], _ = await _timed(drv, sparse_program(cfg, rng, pattern, fmt,
                                                                tiles=t, n=n),
                                            seed, f"sparse {pattern} x{t}")
            if fmt not in res["dense"]:
                d = res["dense"][fmt] = {}
                for t in p["tiles"]:
                    d[str(t)], _ = await _timed(drv, dense_program(cfg, rng, fmt, tiles=t, n=n),
                                                seed, f"dense {fmt} x{t}")
            dut._log.info(f"{pattern}: {r}")
    with open(p["out"], "w") as fh:
        json.dump(res, fh, indent=2)
