# SPDX-License-Identifier: Apache-2.0
"""The golden ISA simulator's sparse tensor instructions (docs/isa.md §6): a sparse
``load_stationary`` reads (value, tag) pairs from SBUF, a sparse ``multiply_moving`` 32-bit lanes
of packed moving elements; the PSUM result equals ``golden.sparse.matmul_sparse`` of the
logical operands the test packed itself (random patterns, formats, tags in any order, strided
APs), and every engine-level error: a dense matmul on sparse weights, another pattern, a moving
format too wide for the lane, a partial group, duplicate tags."""

import numpy as np
import pytest

from golden.asm import assemble
from golden.isasim import E_FORMAT, E_SHAPE, E_SPARSE_TAG, IsaSim, sparse_load_dtypes
from golden.sparse import matmul_sparse, sparse_formats
from golden.tensor import check_pair
from rtl.config import SMALL, parse_sparse_pattern

CFG = SMALL
K, M = CFG.pe_rows, CFG.pe_cols


def _eb(fmt):
    return 1 if CFG.fmt(fmt).width <= 8 else 2


def _codes(rng, fmt, shape):
    w = CFG.fmt(fmt).width
    c = rng.integers(0, 1 << w, shape).astype(np.uint32)
    # keep NaN/Inf codes rare: clear the exponent's top bit in most draws
    tame = rng.random(shape) < 0.9
    return np.where(tame, c & np.uint32(~(1 << (w - 2)) & ((1 << w) - 1)), c)


def _tags(rng, k, cols, n, m):
    t = np.zeros((k, cols), np.uint32)
    for g in range(k // n):
        for j in range(cols):
            t[g * n:(g + 1) * n, j] = rng.choice(m, n, replace=False)
    return t


def _put(sim, rows, off, words, nbytes, step=1):
    """Write ``words [rows, E]`` as ``nbytes``-byte little-endian elements at ``off``,
    element e at ``off + e * step * nbytes`` of each partition."""
    for r in range(words.shape[0]):
        for e in range(words.shape[1]):
            a = off + e * step * nbytes
            sim.sbuf[r, a:a + nbytes] = np.frombuffer(
                int(words[r, e]).to_bytes(nbytes, "little"), np.uint8)


def _setup(rng, pattern, fs, fx, k, N, step):
    n, m = parse_sparse_pattern(pattern)
    vals = _codes(rng, fs, (k, M))
    tags = _tags(rng, k, M, n, m)
    x = _codes(rng, fx, (k * m // n, N))
    sim = IsaSim(CFG)
    h = _eb(fs)
    _put(sim, k, 0x100, vals | (tags << np.uint32(8 * h)), 2 * h, step)
    cr, w = m // n, CFG.fmt(fx).width
    lanes = np.zeros((k, N), np.uint64)
    for i in range(cr):
        lanes |= x[i::cr].astype(np.uint64) << np.uint64(i * w)
    _put(sim, k, 0x400, lanes.astype(np.uint32), 4)
    ld = (f"load_stationary.sparse ap1=sbuf.{fs}[0:{k}]@0x100{{{step}x{M}}} "
          f"sp_n={n} sp_m={m}")
    mm = (f"multiply_moving.sparse ap0=psum.fp32[0:{M}]@0x0{{1x{N}}} "
          f"ap1=sbuf.{fx}[0:{k}]@0x400{{1x{N}}} sp_n={n} sp_m={m}")
    return sim, vals, tags, x, ld, mm


def _combos():
    out = []
    for p in CFG.sparsity:
        for fs in sparse_load_dtypes(CFG):
            for fx in sparse_formats(CFG, p):
                try:
                    check_pair(CFG.fmt(fs), CFG.fmt(fx))
                except ValueError:
                    continue
                out.append((p, fs, fx))
    return out


@pytest.mark.parametrize("case", range(12))
def test_sparse_matmul_bit_exact(case, seed):
    rng = np.random.default_rng([seed, case, 80])
    cs = _combos()
    p, fs, fx = cs[int(rng.integers(len(cs)))]
    n, m = parse_sparse_pattern(p)
    k = n * int(rng.integers(1, K // n + 1))
    N = int(rng.integers(1, 9))
    sim, vals, tags, x, ld, mm = _setup(rng, p, fs, fx, k, N, int(rng.integers(1, 3)))
    err = sim.run({"pe": assemble(ld + "\n" + mm + "\n")})
    assert err is None, (seed, p, fs, fx, err)
    want = matmul_sparse(vals, tags, fs, p, x, fx, CFG)
    got = sim.psum32[:M, 0, :N]
    assert np.array_equal(got, want), (seed, p, fs, fx)


def test_combos_cover_the_formats():
    cs = _combos()
    assert {c[0] for c in cs} == set(CFG.sparsity)
    assert "fp32" not in sparse_load_dtypes(CFG) and "tf32" not in sparse_load_dtypes(CFG)
    assert ("4:16", "bf16", "bf16") not in cs and ("4:16", "bf16", "fp8_e4m3") in cs


def _err(sim, prog):
    return sim.run({"pe": assemble(prog)})


def test_sparse_engine_errors(seed):
    rng = np.random.default_rng([seed, 81])
    sim, *_, ld, mm = _setup(rng, "4:16", "bf16", "fp8_e4m3", K, 4, 1)
    dense_mm = mm.replace(".sparse", "").replace(" sp_n=4 sp_m=16", "")
    e = _err(sim, ld + "\n" + dense_mm + "\n")
    assert (e.code, e.index, e.info) == (E_SPARSE_TAG, 1, 0), e
    sim, *_, ld, mm = _setup(rng, "4:16", "bf16", "fp8_e4m3", K, 4, 1)
    e = _err(sim, ld + "\n" + mm.replace("sp_n=4 sp_m=16", "sp_n=2 sp_m=8") + "\n")
    assert (e.code, e.index) == (E_SPARSE_TAG, 1), e
    sim, *_, ld, mm = _setup(rng, "4:16", "bf16", "fp8_e4m3", K, 4, 1)
    e = _err(sim, ld + "\n" + mm.replace("sbuf.fp8_e4m3", "sbuf.bf16") + "\n")
    assert (e.code, e.index) == (E_FORMAT, 1), e
    # a dense load then a sparse matmul: the pattern differs from the weights' (none)
    sim, *_, ld, mm = _setup(rng, "2:4", "fp16", "fp8_e5m2", K, 4, 1)
    e = _err(sim, f"load_stationary ap1=sbuf.fp16[0:{K}]@0x100{{1x{M}}}\n" + mm + "\n")
    assert (e.code, e.index) == (E_SPARSE_TAG, 1), e
    # a sparse matmul over a partial group (2:4, k = 3 of 4 rows)
    sim, *_, ld, mm = _setup(rng, "2:4", "fp16", "fp8_e5m2", K, 4, 1)
    e = _err(sim, ld + "\n" + mm.replace(f"[0:{K}]@0x400", f"[0:{K - 1}]@0x400") + "\n")
    assert (e.code, e.index) == (E_SHAPE, 1), e


def test_bad_tags_name_the_group(seed):
    rng = np.random.default_rng([seed, 82])
    sim, vals, tags, x, ld, mm = _setup(rng, "2:4", "bf16", "bf16", K, 4, 1)
    j = int(rng.integers(M))
    sim.sbuf[1, 0x100 + 4 * j + 2] = sim.sbuf[0, 0x100 + 4 * j + 2]   # rows 0, 1: one tag
    e = _err(sim, ld + "\n")
    assert (e.code, e.index, e.info) == (E_SPARSE_TAG, 0, 0), e
    assert f"group 0 (rows 0..1) of column {j}" in e.detail
    # a tag beyond the tag bits of the config is ignored (bits 4.. of the high half)
    sim, vals, tags, x, ld, mm = _setup(rng, "2:4", "bf16", "bf16", K, 4, 1)
    sim.sbuf[:K, 0x100 + 3:0x100 + 4 * M:4] |= 0xF0
    assert _err(sim, ld + "\n" + mm + "\n") is None
    assert np.array_equal(sim.psum32[:M, 0, :4], matmul_sparse(vals, tags, "bf16", "2:4", x,
                                                               "bf16", CFG))
    # a tag >= m of 2:4 (3 bits of a 4-bit field)
    sim, vals, tags, x, ld, mm = _setup(rng, "2:4", "bf16", "bf16", K, 4, 1)
    sim.sbuf[2, 0x100 + 4 * j + 2] = 5
    e = _err(sim, ld + "\n")
    assert (e.code, e.index) == (E_SPARSE_TAG, 0), e


def test_sparse_load_completes_after_the_drain():
    """A sparse load retires when the engine drained (its tags were checked beat by beat),
    M cycles after its dispatch; a dense load retires at its dispatch."""
    rng = np.random.default_rng(83)
    sim, *_, ld, mm = _setup(rng, "4:16", "fp8_e4m3", "fp8_e4m3", K, 4, 1)
    assert _err(sim, ld + "\n" + mm + "\n") is None
    sp = next(e for e in sim.timeline if e.op == "load_stationary")
    assert sp.done == sp.start + M and sp.retire >= sp.done
    dense = ld.replace(".sparse", "").replace(" sp_n=4 sp_m=16", "")
    sim, *_ = _setup(rng, "4:16", "fp8_e4m3", "fp8_e4m3", K, 4, 1)
    assert _err(sim, dense + "\n") is None
    d = next(e for e in sim.timeline if e.op == "load_stationary")
    assert d.retire < d.done
