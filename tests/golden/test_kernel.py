# SPDX-License-Identifier: Apache-2.0
"""Kernel API (golden/kernel/): a tiled GEMM kernel runs on the golden ISA simulator and
matches (1) the chain of golden.tensor.matmul + add_fp32 per K tile, bit for bit, and (2) a
float64 numpy product within the FP32 accumulation bound; its programs are race-free and give
the same result under random interleavings; bad tiles and layouts are refused.
"""

import random

import numpy as np
import pytest

from golden.arith import add_fp32
from golden.formats import decode
from golden.isasim import OP_HOOKS, IsaSim, find_races, pe_latency
from golden.kernel import Kernel
from golden.kernels import gemm_kernel
from golden.tensor import matmul
from rtl.config import DEFAULT, SMALL

CFG = SMALL


def _bf16(rng, shape, scale=4.0):
    """bf16 codes of random normal values (finite, both signs)."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint32)


def _chain_reference(cfg, AT, B):
    """C per output tile: matmul of the first K tile, then add_fp32 of each next K tile's
    matmul (the PSUM accumulate), written with golden.tensor only."""
    K, M = AT.shape
    N = B.shape[1]
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    C = np.zeros((M, N), dtype=np.uint32)
    for m0 in range(0, M, TM):
        for n0 in range(0, N, TN):
            acc = None
            for k0 in range(0, K, TK):
                r = matmul(AT[k0:k0 + TK, m0:m0 + TM], "bf16", B[k0:k0 + TK, n0:n0 + TN],
                           "bf16", cfg)
                acc = r if acc is None else add_fp32(acc, r)
            C[m0:m0 + TM, n0:n0 + TN] = acc
    return C


def _psum_result(sim, kp, M, N):
    C = np.zeros((M, N), dtype=np.uint32)
    for (m0, n0), t in kp.outputs["C"].items():
        assert t.offset == t.bank * sim.cfg.psum_bank_bytes
        C[m0:m0 + t.parts, n0:n0 + t.elems] = sim.psum32[:t.parts, t.bank, :t.elems]
    return C


@pytest.mark.parametrize("K,M,N,seed", [(4, 4, 16, 0), (12, 8, 64, 1), (10, 6, 100, 2),
                                        (3, 1, 5, 3)])
def test_gemm_in_psum_bit_exact_and_close_to_float64(K, M, N, seed):
    rng = np.random.default_rng(seed)
    AT, B = _bf16(rng, (K, M)), _bf16(rng, (K, N))
    kp = gemm_kernel(CFG, AT, B)
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    C = _psum_result(sim, kp, M, N)
    assert np.array_equal(C, _chain_reference(CFG, AT, B)), f"seed {seed}"
    assert np.array_equal(kp.read_outputs(sim, codes=True)["C"], C)
    # independent: float64 product, error within the FP32 chain bound (K + 1 roundings)
    a = decode(AT, CFG.fmt("bf16")).astype(np.float64)
    b = decode(B, CFG.fmt("bf16")).astype(np.float64)
    exact = a.T @ b
    bound = (K + 1) * 2.0 ** -24 * (np.abs(a).T @ np.abs(b)) + 1e-300
    got = C.view(np.float32).astype(np.float64)
    assert np.all(np.abs(got - exact) <= bound), f"seed {seed}"
    assert find_races(sim) == [], f"seed {seed}"
    # any interleaving gives the same bits
    for k in range(3):
        s2 = IsaSim(CFG, dram_bytes=kp.dram)
        assert s2.run(kp.programs, policy=random.Random(100 * seed + k)) is None
        assert np.array_equal(s2.psum, sim.psum) and s2.mem.sbuf == sim.mem.sbuf


def test_gemm_evacuated_to_dram_through_the_vector_engine():
    rng = np.random.default_rng(7)
    K, M, N = 9, 10, 70
    AT, B = _bf16(rng, (K, M)), _bf16(rng, (K, N))
    kp = gemm_kernel(CFG, AT, B, evacuate=True)
    sim = IsaSim(CFG, dram_bytes=kp.dram)         # the vector engine's tensor_copy hook
    assert sim.run(kp.programs) is None
    C = kp.outputs["C"].read(sim.mem.dram)
    assert np.array_equal(C, _chain_reference(CFG, AT, B))
    assert np.array_equal(kp.read_outputs(sim, codes=True)["C"], C)
    assert find_races(sim) == []
    s2 = IsaSim(CFG, dram_bytes=kp.dram)
    assert s2.run(kp.programs, policy=random.Random(5)) is None
    assert s2.mem.dram == sim.mem.dram
    old = OP_HOOKS.pop("tensor_copy")
    try:
        with pytest.raises(NotImplementedError, match="tensor_copy"):
            IsaSim(CFG, dram_bytes=kp.dram).run(kp.programs)
    finally:
        OP_HOOKS["tensor_copy"] = old


def test_gemm_default_preset_one_tile_timeline():
    cfg = DEFAULT
    rng = np.random.default_rng(3)
    K, M, N = 32, 16, 512
    AT, B = _bf16(rng, (K, M)), _bf16(rng, (K, N))
    kp = gemm_kernel(cfg, AT, B, dram_bytes=1 << 16)
    sim = IsaSim(cfg, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    assert np.array_equal(_psum_result(sim, kp, M, N), _chain_reference(cfg, AT, B))
    mm = [e for e in sim.timeline if e.op == "multiply_moving"]
    assert len(mm) == 2 and all(e.done - e.start == N + 54 for e in mm)   # L = 54 on default


@pytest.mark.parametrize("cfg,K,split", [(DEFAULT, 32, True), (SMALL, 16, False)])
def test_gemm_last_tile_split_only_where_it_pays(cfg, K, split):
    """Evacuated GEMM with one chunk and one PSUM bank of N: on default the last tile runs as
    3/4 + 1/4 spans (384 + 128 columns: the stores of the first span then overlap the second
    span's matmuls); on small the cut would save fewer store cycles than its extra K steps
    cost, and the tile stays whole. Either way the result is the chained golden reference,
    race-free, and the same under a random interleaving."""
    rng = np.random.default_rng(11)
    M, N = cfg.pe_cols, cfg.psum_bank_fp32
    AT, B = _bf16(rng, (K, M)), _bf16(rng, (K, N))
    kp = gemm_kernel(cfg, AT, B, evacuate=True, dram_bytes=1 << 17)
    sim = IsaSim(cfg, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    assert np.array_equal(kp.outputs["C"].read(sim.mem.dram), _chain_reference(cfg, AT, B))
    assert find_races(sim) == []
    widths = sorted({e.done - e.start - pe_latency(cfg) for e in sim.timeline
                     if e.op == "multiply_moving"})
    assert widths == ([N // 4, N - N // 4] if split else [N]), widths
    s2 = IsaSim(cfg, dram_bytes=kp.dram)
    assert s2.run(kp.programs, policy=random.Random(2)) is None
    assert s2.mem.dram == sim.mem.dram


def test_dependencies_become_waits():
    k = Kernel(CFG, dram_bytes=1 << 14)
    x = k.dram_tensor("x", codes=np.arange(16, dtype=np.uint32).reshape(4, 4))
    y = k.dram_tensor("y", (4, 4))
    t = k.sbuf_tile(4, 4)
    k.load(t, x, queue=0)
    k.store(y, t, queue=1)           # RAW: sp waits for queue 0's first descriptor
    k.load(t, x, queue=0)            # WAR: waits for queue 1's store
    k.output("t", {(0, 0): t})
    kp = k.build()
    lines = kp.listing["sp"].splitlines()
    assert "wait" not in lines[0]
    assert "wait=s6>=1" in lines[1] and "wait=s7>=1" in lines[2]
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    assert np.array_equal(y.read(sim.mem.dram), np.arange(16).reshape(4, 4))
    assert np.array_equal(kp.read_outputs(sim, codes=True)["t"], np.arange(16).reshape(4, 4))


def test_dram_dependencies_follow_the_rectangles_touched():
    """Stores of disjoint tiles of one DRAM tensor do not wait for one another; a load of a
    rectangle overlapping a stored one, and a whole-tensor descriptor, do."""
    k = Kernel(CFG, dram_bytes=1 << 14)
    x = k.dram_tensor("x", codes=np.arange(32, dtype=np.uint32).reshape(4, 8))
    y = k.dram_tensor("y", (4, 8))
    a, b, c = k.sbuf_tile(4, 4), k.sbuf_tile(4, 4), k.sbuf_tile(2, 8)
    k.load(a, x, 0, 0, queue=0)
    k.load(b, x, 0, 4, queue=1)
    k.store(y, a, 0, 0, queue=2)     # waits for its tile's load only
    k.store(y, b, 0, 4, queue=3)     # disjoint from the first store: no wait on queue 2
    k.load(c, y, 1, 0, queue=0)      # rows 1-2 of y overlap both stores: waits for both
    k.output("c", {(0, 0): c})
    kp = k.build()
    sp = kp.listing["sp"].splitlines()
    # sems 6, 7, 8, 9: queues 0-3 of DMA engine 0 (SMALL has one DMA engine, 4 queues)
    assert "wait" not in sp[0] and "wait" not in sp[1], sp
    assert sp[2].endswith("wait=s6>=1") and sp[3].endswith("wait=s7>=1"), sp
    assert sp[4:] == ["nop wait=s8>=1", "dma_start engine=0 queue=0 count=1 desc_addr=384 "
                      "wait=s9>=1"], sp
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None and find_races(sim) == []
    assert np.array_equal(y.read(sim.mem.dram), np.arange(32).reshape(4, 8))
    assert np.array_equal(kp.read_outputs(sim, codes=True)["c"], np.arange(32).reshape(4, 8)[1:3])
    for seed in range(1, 4):                     # random interleavings: the same bytes
        s2 = IsaSim(CFG, dram_bytes=kp.dram)
        assert s2.run(kp.programs, policy=random.Random(seed)) is None
        assert s2.mem.dram == sim.mem.dram, f"seed {seed}"


def test_bad_kernels_are_refused():
    k = Kernel(CFG, dram_bytes=1 << 12)
    x = k.dram_tensor("x", (4, 8), "bf16")
    t = k.sbuf_tile(4, 4)
    p = k.psum_tile(4, 4)
    with pytest.raises(ValueError, match="SBUF, not PSUM"):
        k.load(p, x)
    with pytest.raises(ValueError, match="lane"):
        k.load(k.sbuf_tile(4, 2), x, col0=2)
    with pytest.raises(ValueError, match="must lie in"):
        k.load(t, x, col0=6)
    with pytest.raises(ValueError, match="does not fit"):
        k.sbuf_tile(4, 4096)
    with pytest.raises(ValueError, match="already used"):
        k.dram_tensor("x", (1, 1))
    with pytest.raises(ValueError, match="matmul shapes"):
        k.matmul(k.psum_tile(4, 5), t, t)
    with pytest.raises(ValueError, match="engine opcode"):
        k.op("nop", t)
    with pytest.raises(ValueError, match="share K"):
        gemm_kernel(CFG, np.zeros((4, 4), np.uint32), np.zeros((5, 4), np.uint32))
    with pytest.raises(ValueError, match="psum_banks"):
        gemm_kernel(CFG, np.zeros((4, 20), np.uint32), np.zeros((4, 4), np.uint32))


def test_gemm_from_dram_queues_matches_the_direct_run():
    rng = np.random.default_rng(11)
    K, M, N = 8, 4, 40
    AT, B = _bf16(rng, (K, M)), _bf16(rng, (K, N))
    kp = gemm_kernel(CFG, AT, B, dram_bytes=1 << 14)
    direct = IsaSim(CFG, dram_bytes=kp.dram)
    assert direct.run(kp.programs) is None
    queues = kp.place_queues()
    assert set(queues) == {"pe", "sp"}
    for e, (base, size, tail) in queues.items():
        assert base % 128 == 0 and base >= kp.free and size > tail == kp.instructions()[e]
        assert size & (size - 1) == 0
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run_queues(queues) is None
    assert np.array_equal(sim.psum, direct.psum)
    assert [(e.stream, e.op, e.start, e.done) for e in sim.timeline] == \
        [(e.stream, e.op, e.start, e.done) for e in direct.timeline]
    with pytest.raises(ValueError, match="place_queues base"):
        kp.place_queues(base=0)


def test_matmul_reuses_loaded_weights_until_they_change():
    rng = np.random.default_rng(4)
    k = Kernel(CFG, dram_bytes=1 << 14)
    w = k.dram_tensor("w", codes=_bf16(rng, (4, 4)))
    w2 = k.dram_tensor("w2", codes=_bf16(rng, (4, 4)))
    x = k.dram_tensor("x", codes=_bf16(rng, (4, 16)))
    tw, tx = k.sbuf_tile(4, 4), k.sbuf_tile(4, 16)
    k.load(tw, w)
    k.load(tx, x)
    p0, p1, p2 = k.psum_tile(4, 16), k.psum_tile(4, 16), k.psum_tile(4, 16)
    k.matmul(p0, tw, tx)
    k.matmul(p1, tw, tx)                 # same weights: no reload
    k.load(tw, w2)                       # the tile changes: reload
    k.matmul(p2, tw, tx)
    kp = k.build()
    assert kp.listing["pe"].count("load_stationary") == 2
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None and find_races(sim) == []
    W1, W2, X = w.read(kp.dram), w2.read(kp.dram), x.read(kp.dram)
    for p, ww in ((p0, W1), (p1, W1), (p2, W2)):
        assert np.array_equal(sim.psum32[:4, p.offset // CFG.psum_bank_bytes, :16],
                              matmul(ww, "bf16", X, "bf16", CFG))


def test_transpose_through_the_tensor_engine():
    from golden.tensor import transpose
    rng = np.random.default_rng(9)
    k = Kernel(CFG, dram_bytes=1 << 14)
    a = k.dram_tensor("a", codes=_bf16(rng, (3, 4)))
    t = k.sbuf_tile(3, 4)
    k.load(t, a)
    p = k.psum_tile(4, 3)
    k.transpose(p, t)
    k.output("aT", {(0, 0): p})
    kp = k.build()
    sim = IsaSim(CFG, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None
    assert np.array_equal(kp.read_outputs(sim, codes=True)["aT"], transpose(a.read(kp.dram), "bf16", CFG))
    with pytest.raises(ValueError, match="transpose out"):
        k.transpose(k.psum_tile(3, 4), t)


def test_freed_sbuf_space_is_reused_without_races():
    rng = np.random.default_rng(12)
    k = Kernel(CFG, dram_bytes=1 << 14)
    w = k.dram_tensor("w", codes=_bf16(rng, (4, 4)))
    x1 = k.dram_tensor("x1", codes=_bf16(rng, (4, 16)))
    x2 = k.dram_tensor("x2", codes=_bf16(rng, (4, 16)))
    tw = k.sbuf_tile(4, 4)
    k.load(tw, w)
    p1, p2 = k.psum_tile(4, 16), k.psum_tile(4, 16)
    t1 = k.sbuf_tile(4, 16)
    k.load(t1, x1, queue=0)
    k.matmul(p1, tw, t1)
    k.free(t1)
    t2 = k.sbuf_tile(4, 16, bank=t1.offset // (CFG.sbuf_bytes_per_partition // CFG.sbuf_banks))
    assert t2.offset == t1.offset and t2.uid != t1.uid
    k.load(t2, x2, queue=1)              # overwrites t1's bytes: waits for the matmul (WAR)
    k.matmul(p2, tw, t2)
    kp = k.build()
    sp = kp.listing["sp"].splitlines()
    # sem 0 counts the PE's posting instructions: only the first matmul, which the load of
    # t2 waits for (the load_stationary and the last matmul have no consumer: no post, no
    # drain); sem 6 counts queue 0's descriptors, which all post
    assert sp[-2:] == ["nop wait=s0>=1", "dma_start engine=0 queue=1 count=1 desc_addr=448 "
                       "wait=s6>=2"], sp
    pe = kp.listing["pe"].splitlines()
    assert ["post" in x for x in pe] == [False, True, False], pe
    for seed in range(3):
        sim = IsaSim(CFG, dram_bytes=kp.dram)
        pol = "timed" if seed == 0 else random.Random(seed)
        assert sim.run(kp.programs, policy=pol) is None
        if seed == 0:
            assert find_races(sim) == []
        W = w.read(kp.dram)
        for p, x in ((p1, x1), (p2, x2)):
            assert np.array_equal(sim.psum32[:4, p.bank, :16],
                                  matmul(W, "bf16", x.read(kp.dram), "bf16", CFG))
    with pytest.raises(ValueError, match="not a live SBUF tile"):
        k.free(t1)
    big = k.sbuf_tile(4, 1024)                         # first fit after the live tiles
    assert big.offset >= t2.offset + 32
    with pytest.raises(ValueError, match="does not fit"):
        k.sbuf_tile(4, 2048)


def test_sbuf_tiles_go_round_robin_over_the_banks():
    """Tiles that fit in a bank are spread over the banks (streams used together then do not
    share a bank's one access per cycle); a tile larger than a bank takes the first fit; an
    explicit bank is honoured and checked."""
    k = Kernel(CFG, dram_bytes=1 << 12)
    bb = CFG.sbuf_bytes_per_partition // CFG.sbuf_banks
    tiles = [k.sbuf_tile(4, 16) for _ in range(CFG.sbuf_banks + 1)]
    k.free(tiles[1])
    assert [t.offset // bb for t in tiles] == [*range(CFG.sbuf_banks), 0]
    assert tiles[-1].offset == 32                     # first fit inside bank 0, after tile 0
    big = k.sbuf_tile(4, bb // 2 + 8)                 # bb + 16 bytes: larger than a bank
    assert big.offset == 64                           # after tiles 0 and 4, over freed 1
    t = k.sbuf_tile(4, 4, bank=2)
    assert t.offset // bb == 2
    with pytest.raises(ValueError, match=r"sbuf_tile bank must be None or in \[0, 3\], not 4"):
        k.sbuf_tile(4, 4, bank=CFG.sbuf_banks)


def test_sbuf_tile_prefer_takes_the_first_listed_bank_with_room():
    """``prefer``: the first listed bank with room, else the default round-robin placement;
    the listed banks are checked."""
    k = Kernel(CFG, dram_bytes=1 << 12)
    bb = CFG.sbuf_bank_bytes
    full = k.sbuf_tile(4, bb // 2, bank=3)            # bank 3 full (bf16: bb bytes)
    assert k.sbuf_bank(full) == 3
    t = k.sbuf_tile(4, 16, prefer=[3, 2])
    assert k.sbuf_bank(t) == 2 and t.offset == 2 * bb
    u = k.sbuf_tile(4, 16, prefer=[3])                # no listed bank has room: round-robin
    assert k.sbuf_bank(u) == 0
    with pytest.raises(ValueError, match=r"sbuf_tile prefer must hold banks in \[0, 3\]"):
        k.sbuf_tile(4, 4, prefer=[1, CFG.sbuf_banks])
