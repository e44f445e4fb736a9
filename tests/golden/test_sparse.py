# SPDX-License-Identifier: Apache-2.0
"""Tests of the structured-sparsity golden model (golden/sparse.py, docs/tensor-engine.md
"Structured sparsity").

Independent references: the Fraction chain of ``tests/golden/test_tensor.py`` (``ref_chain``
on ``ref_decode`` values) run column by column on the moving rows each weight selects, and the
golden dense matmul of the decompressed tile (equal up to the documented zero-sign rule).
"""

import numpy as np
import pytest

from golden.sparse import (compress, decompress, matmul_sparse, metadata_bits_per_kept,
                           moving_lanes, pack_tags, sparse_formats, tag_bits, unpack_tags,
                           validate)
from golden.tensor import PsumModel, matmul
from rtl.config import PRESETS, parse_sparse_pattern
from tests.golden.test_tensor import ref_chain, ref_decode

SMALL = PRESETS["small"]
DEFAULT = PRESETS["default"]
#: The dense reference of a decompressed small-preset tile: one chain over K_log (up to
#: 4 * 16 / 4 = 16 rows) needs a taller array than small's 4 rows.
LONG = SMALL.replace(name="long", partitions=16, pe_rows=16)


def rand_tile(rng, fmt, shape, p_special=0.0):
    """Codes near 1 with random signs, a fraction of uniformly random codes (NaN, Inf...)."""
    w, M = fmt.width, fmt.man_bits
    e = np.clip(fmt.bias + rng.integers(-3, 4, shape), 1, (1 << fmt.exp_bits) - 2)
    c = (rng.integers(0, 2, shape) << (w - 1)) | (e << M) | rng.integers(0, 1 << M, shape)
    wild = rng.integers(0, 1 << w, shape)
    return np.where(rng.random(shape) < p_special, wild, c).astype(np.uint32)


def finite_tile(rng, fmt, shape):
    return rand_tile(rng, fmt, shape, 0.0)


def random_compressed(rng, cfg, pattern, fmt, K_phys, M, ascending=True):
    n, m = parse_sparse_pattern(pattern)
    vals = rand_tile(rng, cfg.fmt(fmt), (K_phys, M), 0.1)
    tags = np.zeros((K_phys, M), dtype=np.uint32)
    for g in range(K_phys // n):
        for j in range(M):
            pos = rng.permutation(m)[:n]
            tags[g * n:(g + 1) * n, j] = np.sort(pos) if ascending else pos
    return vals, tags


@pytest.mark.parametrize("cfg", [SMALL, DEFAULT], ids=["small", "default"])
def test_sparse_bit_exact_vs_fraction_chain(cfg, seed):
    """Every enabled pattern and every sparse-capable moving format: the sparse chain over the
    physical rows equals the Fraction chain of each column over the moving elements its tags
    select (tags in random order, specials included)."""
    rng = np.random.default_rng([seed, 1])
    for pattern in cfg.sparsity:
        n, m = parse_sparse_pattern(pattern)
        for fx in sparse_formats(cfg, pattern):
            fs = str(rng.choice(sparse_formats(cfg, pattern)))
            K = n * int(rng.integers(1, cfg.pe_rows // n + 1))
            M, N = int(rng.integers(1, min(cfg.pe_cols, 4) + 1)), int(rng.integers(1, 4))
            vals, tags = random_compressed(rng, cfg, pattern, fs, K, M, ascending=False)
            x = rand_tile(rng, cfg.fmt(fx), (K // n * m, N), 0.1)
            got = matmul_sparse(vals, tags, fs, pattern, x, fx, cfg)
            sv = ref_decode(vals, cfg.fmt(fs))
            xv = ref_decode(x, cfg.fmt(fx))
            for j in range(M):
                rows = (np.arange(K) // n) * m + tags[:, j].astype(np.int64)
                want = ref_chain(sv[:, j:j + 1], xv[rows])
                assert (got[j] == want[0]).all(), \
                    (f"seed={seed} {pattern} {fs}x{fx} column {j}: "
                     f"{[hex(v) for v in got[j]]} != {[hex(v) for v in want[0]]}")


def test_sparse_equals_dense_of_decompressed(seed):
    """Ascending tags and finite moving values at pruned positions: sparse == dense of the
    decompressed tile bit for bit, except a sparse -0 may be a dense +0 (module docstring)."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 2])
    zero_sign_cases = 0
    for pattern in cfg.sparsity:
        n, m = parse_sparse_pattern(pattern)
        for fx in sparse_formats(cfg, pattern):
            fs = fx
            K = cfg.pe_rows
            dense = rand_tile(rng, cfg.fmt(fs), (K // n * m, cfg.pe_cols), 0.05)
            r = int(rng.integers(0, m))
            dense[:m] = finite_tile(rng, cfg.fmt(fs), (m, cfg.pe_cols))
            dense[r] = cfg.fmt(fs).nan_code          # NaN weights: kept in every column
            vals, tags = compress(dense, fs, pattern, cfg)
            assert (tags[:n] == r).any(axis=0).all()
            x = finite_tile(rng, cfg.fmt(fx), (K // n * m, 5))
            # a kept position holds specials on the moving side too
            x[r] = rand_tile(rng, cfg.fmt(fx), (1, 5), 1.0)
            got = matmul_sparse(vals, tags, fs, pattern, x, fx, cfg)
            want = matmul(decompress(vals, tags, fs, pattern, cfg), fs, x, fx, LONG)
            differ = got != want
            assert ((got[differ] == 0x80000000) & (want[differ] == 0)).all(), \
                f"seed={seed} {pattern} {fx}: differ beyond the zero sign"
            zero_sign_cases += int(differ.sum())
    # the documented exception exists: all-zero kept weights give -0 sparse, +0 dense
    vals = np.zeros((4, 1), dtype=np.uint32) | 0x80         # fp8 -0 weights
    tags = np.array([[0], [1], [2], [3]], dtype=np.uint32)
    x = np.full((16, 1), 0x38, dtype=np.uint32)              # +1.0 fp8_e4m3
    sp = matmul_sparse(vals, tags, "fp8_e4m3", "4:16", x, "fp8_e4m3", cfg)
    dn = matmul(decompress(vals, tags, "fp8_e4m3", "4:16", cfg), "fp8_e4m3", x, "fp8_e4m3",
                LONG)
    assert (int(sp[0, 0]), int(dn[0, 0])) == (0x80000000, 0)


def test_dense_differs_where_pruned_moving_is_inf():
    """0 * Inf at a pruned position makes the dense chain NaN; the sparse chain skips it."""
    cfg = SMALL
    vals = np.full((4, 1), 0x38, dtype=np.uint32)            # 1.0 fp8_e4m3
    tags = np.array([[0], [1], [2], [3]], dtype=np.uint32)
    x = np.full((16, 1), 0x38, dtype=np.uint32)
    x[5] = 0x78                                              # +Inf at a pruned position
    sp = matmul_sparse(vals, tags, "fp8_e4m3", "4:16", x, "fp8_e4m3", cfg)
    dn = matmul(decompress(vals, tags, "fp8_e4m3", "4:16", cfg), "fp8_e4m3", x, "fp8_e4m3",
                LONG)
    assert int(sp[0, 0]) == 0x40800000 and int(dn[0, 0]) == 0x7FC00000


def test_compress_magnitude_and_tie_rule():
    cfg = SMALL
    f = cfg.fmt("fp8_e4m3")
    one, two, nan, inf, neg0 = 0x38, 0x40, 0x7F, 0x78, 0x80
    col = np.zeros((16, 1), dtype=np.uint32)
    col[[3, 7, 9, 12], 0] = [two, one | 0x80, one, one]       # |1| ties at 7, 9, 12
    v, t = compress(col, f, "4:16", cfg)
    assert t[:, 0].tolist() == [3, 7, 9, 12]
    col[[1, 14], 0] = [nan, inf]
    v, t = compress(col, f, "4:16", cfg)
    assert t[:, 0].tolist() == [1, 3, 7, 14] and v[:, 0].tolist() == [nan, two, one | 0x80, inf]
    zeros = np.full((16, 1), neg0, dtype=np.uint32)
    v, t = compress(zeros, f, "4:16", cfg)                     # all ties: lowest positions
    assert t[:, 0].tolist() == [0, 1, 2, 3]
    v, t = compress(np.array([[one], [two]], dtype=np.uint32), f, "1:2", cfg)
    assert (t[0, 0], v[0, 0]) == (1, two)


def test_compress_mask_roundtrip_and_fill(seed):
    cfg = SMALL
    rng = np.random.default_rng([seed, 3])
    for pattern in cfg.sparsity:
        n, m = parse_sparse_pattern(pattern)
        fs = sparse_formats(cfg, pattern)[-1]
        K_log = cfg.pe_rows // n * m
        dense = rand_tile(rng, cfg.fmt(fs), (K_log, 3), 0.2)
        mask = np.zeros(dense.shape, dtype=bool)
        for g in range(K_log // m):
            for j in range(3):
                keep = rng.permutation(m)[:int(rng.integers(0, n + 1))]
                mask[g * m + keep, j] = True
        v, t = compress(dense, fs, pattern, cfg, mask=mask)
        validate(v, t, pattern, cfg, fs)
        back = decompress(v, t, fs, pattern, cfg)
        assert (back == np.where(mask, dense, 0)).all(), f"seed={seed} {pattern}"
        assert (np.diff(t.reshape(-1, n, 3).astype(int), axis=1) > 0).all()   # ascending


@pytest.mark.parametrize("tags, message", [
    ([[0], [16], [2], [3]], r"group 0 \(physical rows 0..3\) of column 0: tag must be in "
                            r"\[0, 15\]"),
    ([[5], [1], [5], [3]], r"group 0 \(physical rows 0..3\) of column 0: two kept weights at "
                           r"the same position"),
])
def test_validate_names_the_group(tags, message):
    vals = np.zeros((4, 1), dtype=np.uint32)
    with pytest.raises(ValueError, match=message):
        validate(vals, np.array(tags, dtype=np.uint32), "4:16", SMALL)


def test_bad_input_raises():
    cfg = SMALL
    vals = np.zeros((4, 2), dtype=np.uint32)
    tags = np.tile(np.arange(4, dtype=np.uint32)[:, None], (1, 2))
    tags[2, 1] = 12
    with pytest.raises(ValueError, match=r"group 0 \(physical rows 0..3\) of column 1: tag "
                                         r"must be in \[0, 11\]"):
        validate(vals, tags, "4:12", cfg)
    g1 = np.array([[0], [1], [0], [1]], dtype=np.uint32)
    with pytest.raises(ValueError, match=r"group 1 \(physical rows 2..3\) of column 0: two "):
        validate(np.zeros((4, 1), np.uint32), np.array([[0], [1], [3], [3]], np.uint32),
                 "2:4", cfg)
    validate(np.zeros((4, 1), np.uint32), g1, "2:4", cfg)
    mask = np.zeros((16, 1), dtype=bool)
    mask[[0, 1, 2, 3, 4], 0] = True
    with pytest.raises(ValueError, match=r"mask group 0 \(logical rows 0..15\) of column 0 keeps "
                                         r"5 values, more than n = 4"):
        compress(np.zeros((16, 1), np.uint32), "fp8_e4m3", "4:16", cfg, mask=mask)
    only = cfg.replace(sparse_patterns=("4:16",))
    with pytest.raises(ValueError, match=r"pattern must be one of the enabled patterns "
                                         r"\('4:16',\)"):
        validate(vals, tags, "2:4", only)
    with pytest.raises(ValueError, match=r"fmt_x must be one of .* for pattern '4:16'"):
        matmul_sparse(np.zeros((4, 1), np.uint32), np.arange(4, dtype=np.uint32)[:, None],
                      "bf16", "4:16", np.zeros((16, 1), np.uint32), "bf16", cfg)
    with pytest.raises(ValueError, match=r"K_phys \(axis 0\) must be a multiple of n = 4"):
        validate(np.zeros((3, 1), np.uint32), np.zeros((3, 1), np.uint32), "4:16", cfg)
    with pytest.raises(ValueError, match=r"moving_codes K_log \(axis 0\) must be K_phys"):
        matmul_sparse(np.zeros((4, 1), np.uint32), np.arange(4, dtype=np.uint32)[:, None],
                      "fp8_e4m3", "4:16", np.zeros((12, 1), np.uint32), "fp8_e4m3", cfg)
    with pytest.raises(TypeError, match="pattern must be a pattern name"):
        validate(vals, tags, (4, 16), cfg)


def test_psum_model_sparse_and_dense_accumulate(seed):
    """A sparse matmul accumulates onto a dense one in one PSUM group; a rejected sparse op
    writes nothing."""
    cfg = SMALL
    rng = np.random.default_rng([seed, 4])
    pm = PsumModel(cfg)
    s = finite_tile(rng, cfg.fmt("bf16"), (4, 4))
    x = finite_tile(rng, cfg.fmt("bf16"), (4, 6))
    r0 = pm.matmul(0, False, s, "bf16", x, "bf16")
    vals, tags = random_compressed(rng, cfg, "2:4", "bf16", 4, 4)
    xs = finite_tile(rng, cfg.fmt("bf16"), (8, 6))
    r1 = matmul_sparse(vals, tags, "bf16", "2:4", xs, "bf16", cfg)
    got = pm.apply({"op": "matmul_sparse", "bank": 0, "accumulate": True, "values": vals,
                    "tags": tags, "fmt_s": "bf16", "pattern": "2:4", "moving_codes": xs,
                    "fmt_x": "bf16"})
    want = (r0.view(np.float32) + r1.view(np.float32)).view(np.uint32)
    assert (got == want).all()
    before = pm.state.copy()
    bad = tags.copy()
    bad[1] = bad[0]
    with pytest.raises(ValueError, match="same position"):
        pm.matmul_sparse(0, True, vals, bad, "bf16", "2:4", xs, "bf16")
    assert (pm.state == before).all()


def test_moving_lanes_and_tag_packing(seed):
    rng = np.random.default_rng([seed, 5])
    cfg = SMALL
    x = rng.integers(0, 256, (16, 3)).astype(np.uint32)
    lanes = moving_lanes(x, "fp8_e4m3", "4:16", cfg)
    assert lanes.shape == (4, 3)
    assert int(lanes[1, 2]) == sum(int(x[4 + i, 2]) << (8 * i) for i in range(4))
    x = rng.integers(0, 256, (8, 2)).astype(np.uint32)
    lanes = moving_lanes(x, "fp8_e4m3", "4:8", cfg)          # CR = 2: 16 of 32 bits
    assert int(lanes[3, 1]) == int(x[6, 1]) | (int(x[7, 1]) << 8)
    x = rng.integers(0, 1 << 16, (8, 2)).astype(np.uint32)
    lanes = moving_lanes(x, "bf16", "2:4", cfg)
    assert int(lanes[2, 0]) == int(x[4, 0]) | (int(x[5, 0]) << 16)
    for pattern in cfg.sparsity:
        n, m = parse_sparse_pattern(pattern)
        b = tag_bits(m)
        assert metadata_bits_per_kept(pattern) == b <= 4
        t = rng.integers(0, m, (4, 11)).astype(np.uint32)
        w = pack_tags(t, pattern)
        assert w.shape == (4, -(-11 // (32 // b)))
        assert (unpack_tags(w, pattern, 11) == t).all()
    assert [metadata_bits_per_kept(p) for p in ("4:16", "2:4", "1:2", "4:8", "4:12")] == \
        [4, 2, 1, 3, 4]
