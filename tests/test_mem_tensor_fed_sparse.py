# SPDX-License-Identifier: Apache-2.0
"""The SBUF-fed tensor engine's N:M sparse mode (``rtl/tensor/sbuf_fed.py``) in Amaranth's
simulator on the small preset: a sparse load reads (value, tag) pair elements (the value's code
in the low half, its tag in the high half) behind random access patterns, a sparse matmul reads
32-bit lanes of packed moving elements; results bit for bit against ``golden.sparse``
(through ``tb.tensor.program.Program``) for random values and tags (any order in a group) of
every pattern x stationary x moving format combination the engine allows (sampled in the fast
tier); a duplicate tag raises the engine's ERR_SPARSE, no hang; dense commands around sparse ones
are unaffected."""

from __future__ import annotations

import numpy as np
import pytest

from golden.sparse import sparse_formats
from golden.tensor import check_pair
from rtl.config import get_preset
from rtl.core.tensor_decode import sparse_load_formats
from rtl.tensor.layouts import ERR_SPARSE, TensorLayouts
from tb.amsim import SimBench
from tb.mem.program import fed_program
from tb.mem.rig import FedSystem
from tb.tensor.program import Program, rand_codes

from tests.test_mem_tensor_fed import compare, run

SMALL = get_preset("small")
TL = TensorLayouts(SMALL)


def combos(cfg=SMALL):
    """Every (pattern, stationary format, moving format) the sparse engine runs from SBUF."""
    out = []
    for p in cfg.sparsity:
        for i in sparse_load_formats(TL):
            fs = TL.pe_formats[i]
            for fx in sparse_formats(cfg, p):
                try:
                    check_pair(fs, cfg.fmt(fx))
                except ValueError:
                    continue
                out.append((p, fs.name, fx))
    return out


def rand_tags(rng, K, M, n, m):
    """Valid tags ``[K, M]`` (K a multiple of n): n distinct positions per group, random order."""
    t = np.zeros((K, M), np.uint32)
    for g in range(K // n):
        for j in range(M):
            t[g * n:(g + 1) * n, j] = rng.choice(m, n, replace=False)
    return t


@pytest.fixture(scope="module")
def bench():
    return SimBench(FedSystem(SMALL, use_instances=False))


def sparse_program_check(bench, seed, cases):
    cfg = SMALL
    rng = np.random.default_rng([seed, 70])
    prog = Program(cfg, rng)
    R, C = cfg.pe_rows, cfg.pe_cols
    used = {}
    for i, (p, fs, fx) in enumerate(cases):
        n, m = TL.patterns[TL.pattern_names.index(p)]
        K = n * int(rng.integers(1, R // n + 1))
        M = int(rng.integers(1, C + 1))
        bank = i % cfg.psum_banks
        acc = bank in used and rng.random() < 0.5
        N = used[bank] if acc else int(rng.integers(1, 9))
        prog.load_sparse(rand_codes(rng, cfg.fmt(fs), (K, M), 0.1), rand_tags(rng, K, M, n, m),
                         fs, p)
        prog.matmul_sparse(rand_codes(rng, cfg.fmt(fx), (K * m // n, N), 0.1), fx, bank=bank,
                           acc=acc)
        used[bank] = N
    # a dense load + matmul after the sparse ones: the pair decoding is per command
    f = cfg.fmt("bf16")
    prog.load(rand_codes(rng, f, (R, C), 0.1), "bf16")
    bank = len(cases) % cfg.psum_banks
    prog.matmul(rand_codes(rng, f, (R, 5), 0.1), "bf16", bank=bank)
    used[bank] = 5
    for b, nn in sorted(used.items()):
        prog.read(b, nn)
    fp = fed_program(cfg, prog, rng)
    out = run(bench, fp, limit=20000)
    assert not out["err"] and not out["ap_err"], (seed, out["err_code"], out["ap_err_code"])
    compare(out["beats"], prog, seed)


def test_sparse_fed_bit_exact(bench, seed):
    """Fast tier: 5 random combinations (every pattern family over the runs)."""
    rng = np.random.default_rng([seed, 71])
    cs = combos()
    sparse_program_check(bench, seed, [cs[i] for i in rng.choice(len(cs), 5, replace=False)])


def test_sparse_combos_cover_every_pattern():
    cs = combos()
    assert {c[0] for c in cs} == set(SMALL.sparsity)
    assert {c[1] for c in cs} == {"bf16", "fp16", "fp8_e5m2", "fp8_e4m3", "fp8_e4m3fn", "cfp8"}
    assert ("4:16", "bf16", "fp8_e4m3") in cs and ("2:4", "fp16", "bf16") in cs


@pytest.mark.full
def test_sparse_fed_every_combo(bench, seed):
    cs = combos()
    for i in range(0, len(cs), 8):
        sparse_program_check(bench, seed + i, cs[i:i + 8])


def test_sparse_bad_tags_error_no_hang(bench, seed):
    """A 4:16 load whose group repeats a position: the engine's ERR_SPARSE, and the matmul on
    the poisoned weights is rejected; everything drains (bounded run)."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 72])
    prog = Program(cfg, rng)
    K, M = 4, cfg.pe_cols
    tags = rand_tags(rng, K, M, 4, 16)
    j = int(rng.integers(0, M))
    tags[1, j] = tags[2, j]
    prog.load_sparse(rand_codes(rng, cfg.fmt("fp8_e4m3"), (K, M)), tags, "fp8_e4m3", "4:16",
                     expect_error=ERR_SPARSE)
    fp = fed_program(cfg, prog, rng)
    out = run(bench, fp, limit=2000)
    assert out["err"] and out["err_code"] == ERR_SPARSE, out
    assert not out["ap_err"]
