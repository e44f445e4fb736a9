# SPDX-License-Identifier: Apache-2.0
"""Kernel API operations of the vector and scalar engines (golden/kernel/): each against a
numpy / ml_dtypes reference through a DRAM round trip on the golden ISA simulator, the
semaphores they get from their dependencies (no race, same result under random interleavings),
the function-table loading, and bad arguments."""

import random

import ml_dtypes
import numpy as np
import pytest

from golden import activation as ga
from golden.isasim import IsaSim, find_races
from golden.kernel import Kernel
from rtl.config import SMALL
from rtl.isa import decode

CFG = SMALL
P = CFG.partitions
F32 = np.float32
BF = ml_dtypes.bfloat16


def _f32codes(a):
    return np.asarray(a, F32).view(np.uint32)


def _run(k, outs, seeds=(3,)):
    """Build, run timed and under random interleavings (same outputs), no race; the outputs
    as numpy arrays (fp32 / bf16 by their tensor's dtype)."""
    kp = k.build()
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    assert find_races(sim) == []
    got = kp.read_outputs(sim, codes=True)
    for s in seeds:
        s2 = IsaSim(CFG, dram_bytes=kp.dram)
        assert s2.run(kp.programs, policy=random.Random(s)) is None
        assert s2.mem.dram == sim.mem.dram, s
    res = {}
    for name in outs:
        t = kp.outputs[name]
        c = got[name]
        res[name] = (c.astype(np.uint32).view(F32) if t.dtype == "fp32"
                     else c.astype(np.uint16).view(BF).astype(F32))
    return res, kp, sim


def _inputs(k, n=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((P, n)).astype(F32)
    y = rng.standard_normal((P, n)).astype(F32)
    s = rng.standard_normal((P, 1)).astype(F32)
    tx, ty, ts = k.sbuf_tile(P, n, "fp32"), k.sbuf_tile(P, n, "fp32"), k.sbuf_tile(P, 1, "fp32")
    k.load(tx, k.dram_tensor("x", dtype="fp32", codes=_f32codes(x)))
    k.load(ty, k.dram_tensor("y", dtype="fp32", codes=_f32codes(y)))
    k.load(ts, k.dram_tensor("s", dtype="fp32", codes=_f32codes(s)))
    return (x, y, s), (tx, ty, ts)


def _out(k, name, tile):
    d = k.dram_tensor(name, (tile.parts, tile.elems), tile.dtype)
    k.store(d, tile)
    k.output(name, d)


def test_vector_ops_through_the_kernel_api():
    k = Kernel(CFG, dram_bytes=1 << 16)
    (x, y, s), (tx, ty, ts) = _inputs(k)
    n = 16
    eight = ("top", "topv", "fi")
    tiles = {nm: k.sbuf_tile(P, 8 if nm in eight else 1 if nm == "red" else n, dt)
             for nm, dt in (("tt", "bf16"), ("ts", "fp32"), ("rs", "fp32"), ("red", "fp32"),
                            ("ms", "fp32"), ("io", "fp32"), ("mask", "fp32"), ("sel", "fp32"),
                            ("top", "fp32"), ("topv", "fp32"), ("fi", "fp32"))}
    k.tensor_tensor(tiles["tt"], tx, ty, "subtract")
    k.tensor_scalar(tiles["ts"], tx, "multiply", ts, "add", 0.5)
    k.tensor_scalar(tiles["rs"], tx, "subtract", 2.0, reverse0=True)       # 2 - x
    k.tensor_reduce(tiles["red"], ty, "min", pre_op="multiply", pre_operand=-1.0)
    k.memset(tiles["ms"], -1.25)
    k.iota(tiles["io"], "multiply", 2.0, "add", sel1=True)                  # 2 i + p
    k.tensor_scalar(tiles["mask"], tx, "is_ge", ts)                          # x >= s
    k.select(tiles["sel"], tiles["mask"], ty, otherwise=9.0)
    k.max8(tiles["top"], tx, indices=True)
    k.max8(tiles["topv"], ty)
    k.find_index8(tiles["fi"], ty, tiles["topv"])                           # waits for max8
    for nm, t in tiles.items():
        _out(k, nm, t)
    r, kp, _ = _run(k, tiles)
    np.testing.assert_array_equal(r["tt"], (x - y).astype(BF).astype(F32))
    np.testing.assert_array_equal(r["ts"], x * s + F32(0.5))
    np.testing.assert_array_equal(r["rs"], F32(2) - x)
    np.testing.assert_array_equal(r["red"][:, 0], (-y).min(axis=1))
    np.testing.assert_array_equal(r["ms"], np.full((P, n), -1.25, F32))
    np.testing.assert_array_equal(r["io"], 2 * np.arange(n, dtype=F32) + np.arange(P)[:, None])
    np.testing.assert_array_equal(r["mask"], (x >= s).astype(F32))
    np.testing.assert_array_equal(r["sel"], np.where(x >= s, y, F32(9)))
    np.testing.assert_array_equal(r["top"], np.argsort(-x, axis=1, kind="stable")[:, :8])
    np.testing.assert_array_equal(r["fi"], np.argsort(-y, axis=1, kind="stable")[:, :8])
    # the dve waits for the loads: its first instruction waits on a DMA queue's semaphore
    first = decode(kp.programs["dve"][:128])
    assert first.wait is not None and first.wait[0] >= 6


def test_psum_evacuation_transpose_and_activation_tiles():
    k = Kernel(CFG, dram_bytes=1 << 16)
    (x, y, s), (tx, ty, ts) = _inputs(k, n=P)
    ps = k.psum_tile(P, P)
    k.transpose(ps, tx)                                   # fp32: bit-exact
    xt = k.sbuf_tile(P, P, "bf16")
    k.copy(xt, ps)
    e = k.sbuf_tile(P, P, "fp32")
    k.activation(e, tx, "exp", scale=0.5, bias_tile=ts, reduce="reset_reduce")
    sq = k.sbuf_tile(P, P, "fp32")
    k.activation(sq, ty, "square", scale_tile=ts)
    e2 = k.sbuf_tile(P, P, "fp32")
    k.activation(e2, ty, "exp", scale=1.0)                # no reload
    for nm, t in (("xt", xt), ("e", e), ("sq", sq), ("e2", e2)):
        _out(k, nm, t)
    r, kp, sim = _run(k, ("xt", "e", "sq", "e2"))
    np.testing.assert_array_equal(r["xt"], x.T.astype(BF).astype(F32))
    assert np.all(ga.ulp_error(r["e"], np.exp(x.astype(np.float64) * 0.5 + s)) <= 2)
    want = (y * s).astype(np.float64) ** 2            # f(RNE_fp32(y * s + 0))
    assert np.all(ga.ulp_error(r["sq"], want) <= 1)
    assert np.all(ga.ulp_error(r["e2"], np.exp(y.astype(np.float64))) <= 2)
    loads = [i for i in range(0, len(kp.programs["act"]), 128)
             if decode(kp.programs["act"][i:i + 128]).op == "act_table_load"]
    assert len(loads) == 3                                # exp, square, exp again
    # the accumulators: the exp row sums of the reset_reduce (FP32 adds in element order),
    # kept by the later activations without reduce
    acc = np.zeros(P, F32)
    for j in range(P):
        acc = acc + r["e"][:, j]
    np.testing.assert_array_equal(sim.act_acc.view(F32), acc)
    assert sim.act_loaded == "exp"


def test_kernel_api_bad_arguments():
    k = Kernel(CFG, dram_bytes=1 << 16)
    a, b = k.sbuf_tile(P, 4, "fp32"), k.sbuf_tile(P, 1, "fp32")
    c = k.sbuf_tile(P, 1, "fp32")
    with pytest.raises(ValueError, match="ALU operation"):
        k.tensor_tensor(a, a, a, "divide")
    with pytest.raises(ValueError, match="ALU operation"):
        k.tensor_tensor(a, a, a, 16)
    with pytest.raises(ValueError, match="same tile"):
        k.tensor_scalar(a, a, "add", b, "multiply", c)
    with pytest.raises(ValueError, match="ap2"):
        k.activation(a, a, "exp", bias_tile=b, scale_tile=c)
    with pytest.raises(ValueError, match="reduce"):
        k.activation(a, a, "exp", reduce="sum")
    with pytest.raises(ValueError, match="func"):
        k.activation(a, a, "softmax")
    with pytest.raises(ValueError, match="view"):
        a.view(2, 3)
    with pytest.raises(ValueError, match="find_index8 vals and dst must have 8"):
        k.find_index8(k.sbuf_tile(P, 8, "fp32"), a, a)


def test_sparse_load_decompresses_in_sbuf():
    """4:16 weights kept compressed in DRAM, scattered into a dense SBUF tile by DMA: equal to
    golden.sparse.decompress; a tile that starts inside a group (row0 = 4) works too."""
    from golden import sparse as gs
    rng = np.random.default_rng(9)
    W = rng.standard_normal((16, 4)).astype(BF).view(np.uint16).astype(np.uint32)
    vals, tags = gs.compress(W, "bf16", "4:16", CFG)
    dense = gs.decompress(vals, tags, "bf16", "4:16", CFG)
    k = Kernel(CFG, dram_bytes=1 << 16)
    vt = k.dram_tensor("V", dtype="bf16", codes=vals)
    outs = {}
    for row0 in (0, 4):
        t = k.sbuf_tile(P, 4, "bf16")
        k.memset(t, 1.0)                        # sparse_load clears it first
        n = k.sparse_load(t, vt, tags, "4:16", row0=row0)
        assert n == int(_kept(tags, row0, P).sum())   # one descriptor per kept value
        _out(k, f"w{row0}", t)
        outs[row0] = t
    kp = k.build()
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None and find_races(sim) == []
    got = kp.read_outputs(sim, codes=True)
    for row0 in outs:
        np.testing.assert_array_equal(got[f"w{row0}"], dense[row0:row0 + P])
    with pytest.raises(ValueError, match="tags"):
        k.sparse_load(outs[0], vt, tags[:2], "4:16")
    with pytest.raises(ValueError, match="2-byte"):
        k.sparse_load(k.sbuf_tile(P, 4, "fp32"), vt, tags, "4:16")


def _kept(tags, row0, parts):
    """Logical positions [row0, row0 + parts) x columns that hold a kept value."""
    out = np.zeros((parts, tags.shape[1]), bool)
    for kp in range(tags.shape[0]):
        for j in range(tags.shape[1]):
            r = (kp // 4) * 16 + int(tags[kp, j]) - row0
            if 0 <= r < parts:
                out[r, j] = True
    return out
