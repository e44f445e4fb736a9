# SPDX-License-Identifier: Apache-2.0
"""The make-sim kernels (golden/kernels/) on the golden ISA simulator: every output bit for
bit against the kernel's independent golden composition and within its float64 bound, no race,
the same DRAM under random interleavings, and the shapes they refuse."""

import random

import numpy as np
import pytest

from golden.isasim import IsaSim, find_races
from golden.kernels import KERNELS, attention_head, mlp, random_inputs
from golden.kernels.mlp import mlp_tail_groups
from rtl.config import DEFAULT, SMALL


def _check(case, seeds=(1,)):
    sim = IsaSim(case.cfg, dram_bytes=case.kp.dram)
    assert sim.run(case.kp.programs) is None
    res = case.check(case.kp.read_outputs(sim, codes=True))
    for name, (bad, ratio) in res.items():
        assert bad == 0, (case.name, name, bad)
        assert ratio <= 1.0, (case.name, name, ratio)
    assert find_races(sim) == []
    for s in seeds:
        s2 = IsaSim(case.cfg, dram_bytes=case.kp.dram)
        assert s2.run(case.kp.programs, policy=random.Random(s)) is None
        assert s2.mem.dram == sim.mem.dram
    return sim, res


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_small(name):
    case = KERNELS[name](SMALL, *random_inputs(SMALL, name, seed=11))
    sim, res = _check(case)
    # the bound is not vacuous: the worst error uses a visible part of it (a kernel whose
    # outputs are exact, info["exact"], must have none)
    worst = max(r for _b, r in res.values())
    assert worst == 0.0 if case.info.get("exact") else worst > 1e-3
    st = sim.stats()
    assert st["cycles"] > 0 and all(0 < v <= 1 for v in st["busy"].values())


def test_kernel_expected_values_catch_a_wrong_program():
    """A program that differs from its expected output is caught: the expected output does not
    come from the simulator (swap the bias sign in DRAM and the check fails)."""
    case = mlp(SMALL, *random_inputs(SMALL, "mlp", seed=2, T=8))
    b = case.kp.tensors["b"]
    img = case.kp.dram
    raw = np.frombuffer(bytes(img[b.addr:b.addr + 4]), np.uint32)[0] ^ 0x80000000
    img[b.addr:b.addr + 4] = int(raw).to_bytes(4, "little")
    sim = IsaSim(SMALL, dram_bytes=img)
    assert sim.run(case.kp.programs) is None
    bad, _ = case.check(case.kp.read_outputs(sim, codes=True))["YT"]
    assert bad > 0


def test_kernel_shapes_refused():
    with pytest.raises(ValueError, match="attention_head"):
        attention_head(SMALL, *random_inputs(SMALL, "attention_head", d=SMALL.pe_rows + 1))
    with pytest.raises(ValueError, match="mlp"):
        x, w, b = random_inputs(SMALL, "mlp")
        mlp(SMALL, x, w, b[:-1])
    with pytest.raises(ValueError, match="kernel name"):
        random_inputs(SMALL, "conv")


@pytest.mark.full
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_default(name):
    _check(KERNELS[name](DEFAULT, *random_inputs(DEFAULT, name, seed=5)), seeds=(1, 2))


def test_run_golden_reports_and_draws(tmp_path):
    from golden.kernels import layer_norm, run_golden
    case = layer_norm(SMALL, *random_inputs(SMALL, "layer_norm", D=8))
    from tb.core.timeline import write_png
    r = run_golden(case)
    assert r["error"] is None and r["check"]["Y"][0] == 0
    assert r["cycles"] == r["sim"].stats()["cycles"] > 0
    write_png(r["sim"].timeline, tmp_path / "ln.png")
    assert r["instructions"]["dve"] > 0 and (tmp_path / "ln.png").stat().st_size > 0


def _posts(kp, engine):
    from rtl.isa import decode
    raw = kp.programs[engine]
    return [decode(raw[i:i + 128]) for i in range(0, len(raw), 128)]


@pytest.mark.parametrize("cfg, sizes", [
    # one K step and every PSUM bank per group: an output tile's SBUF slot comes round again
    # before a K step of the next group has flushed its store (the store goes first)
    (SMALL, dict(D=SMALL.pe_rows, F=4 * SMALL.pe_cols, T=2 * SMALL.psum_bank_fp32)),
    # more F tiles than banks: half the banks per group, W streamed per group (small SBUF)
    (SMALL, dict(D=2 * SMALL.pe_rows, F=6 * SMALL.pe_cols, T=2 * SMALL.psum_bank_fp32)),
    # default: W resident, the table loaded behind the first operands
    (DEFAULT, dict(D=2 * DEFAULT.pe_rows, F=3 * DEFAULT.pe_cols, T=DEFAULT.psum_bank_fp32 + 8)),
])
def test_mlp_schedules_bit_exact_and_post_only_for_consumers(cfg, sizes):
    """The MLP's orders (deferred stores, ring reuse, resident or streamed W) give the
    composed golden bit for bit with no race, and the PE posts exactly once per output tile
    (the last matmul of its K chain, which the activation waits for): the other matmuls and
    the loads stream without a drain."""
    case = mlp(cfg, *random_inputs(cfg, "mlp", seed=7, **sizes))
    _check(case)
    pe = _posts(case.kp, "pe")
    tiles = -(-sizes["F"] // cfg.pe_cols) * -(-sizes["T"] // cfg.psum_bank_fp32)
    # the last group's tail cut (mlp_tail_groups) adds one output tile per F tile of its
    # second half: with four or more F tiles in the group
    nf = -(-sizes["F"] // cfg.pe_cols)
    group = nf if nf <= cfg.psum_banks else max(1, cfg.psum_banks // 2)
    last = nf - (-(-nf // group) - 1) * group
    t_last = sizes["T"] - (-(-sizes["T"] // cfg.psum_bank_fp32) - 1) * cfg.psum_bank_fp32
    cut = len(mlp_tail_groups(cfg, 0, t_last, list(range(last)), 2)) == 3
    assert cut == (last >= 4 and t_last // 4 >= cfg.sbuf_word_bytes // 2)
    tiles += (last - last // 2) if cut else 0
    kt = -(-sizes["D"] // cfg.pe_rows)
    mm = [i for i in pe if i.op == "multiply_moving"]
    assert len(mm) == tiles * kt
    # the last matmul of each output tile's K chain posts (its activation waits for it) ...
    ends, last = [], {}
    for i in mm:                        # a chain ends where its bank's next chain starts
        bank = i.aps["ap0"].offset
        if "acc" not in i.flags and bank in last:
            ends.append(last[bank])
        last[bank] = i
    ends += list(last.values())
    assert len(ends) == tiles and all(i.post == (0, 1) for i in ends)
    # ... and every PE post is one some other engine waits for: the j-th post of sem 0 is
    # the value of some wait on sem 0 (no post, no drain, without a consumer)
    waits = {i.wait[1] for e in ("act", "sp", "dve") for i in _posts(case.kp, e)
             if i.wait is not None and i.wait[0] == 0}
    posts = sum(i.post is not None for i in pe)
    assert waits == set(range(1, posts + 1)), (sorted(waits), posts)
    assert posts < len(pe)
    # every activation posts only when a store (or the ring) waits for it: all of them here
    act = [i for i in _posts(case.kp, "act") if i.op == "activation"]
    assert len(act) == tiles and all(i.post is not None for i in act)


def test_gemm_kernel_defers_stores_and_stays_bit_exact():
    """gemm_kernel with evacuation: AT by K tile, stores after the next group's loads; the
    result equals the tile-by-tile golden chain, no race, and only chain ends post."""
    from golden.kernels import gemm_kernel
    from golden.tensor import add_fp32, matmul
    rng = np.random.default_rng(3)
    R, C, N = SMALL.pe_rows, SMALL.pe_cols, SMALL.psum_bank_fp32
    K, M, Nn = 3 * R, 4 * C, 2 * N
    AT = rng.integers(0x3C00, 0x4000, (K, M)) | (rng.integers(0, 2, (K, M)) << 15)
    B = rng.integers(0x3C00, 0x4000, (K, Nn)) | (rng.integers(0, 2, (K, Nn)) << 15)
    kp = gemm_kernel(SMALL, AT, B, evacuate=True)
    sim = IsaSim(SMALL, dram_bytes=kp.dram)
    assert sim.run(kp.programs) is None and find_races(sim) == []
    want = np.zeros((M, Nn), np.uint32)
    for m0 in range(0, M, C):
        for n0 in range(0, Nn, N):
            acc = None
            for k0 in range(0, K, R):
                r = matmul(AT[k0:k0 + R, m0:m0 + C], "bf16", B[k0:k0 + R, n0:n0 + N], "bf16",
                           SMALL)
                acc = r if acc is None else add_fp32(acc, r)
            want[m0:m0 + C, n0:n0 + N] = acc
    assert np.array_equal(kp.read_outputs(sim, codes=True)["C"], want)
    pe = _posts(kp, "pe")
    waits = {i.wait[1] for e in ("dve", "sp") for i in _posts(kp, e)
             if i.wait is not None and i.wait[0] == 0}
    posts = sum(i.post is not None for i in pe)
    assert waits == set(range(1, posts + 1)) and (M // C) * (Nn // N) <= posts < len(pe) // 2


@pytest.mark.parametrize("hw", [True, False])
def test_sparse_mlp_both_paths(hw):
    """The 4:16 sparse MLP on the tensor engine's sparse mode (weights compressed in SBUF,
    ``load_stationary.sparse`` / ``multiply_moving.sparse``) and on the DMA-decompression
    path: bit-exact against their golden.sparse / golden.tensor compositions, no race."""
    from golden.kernels import sparse_mlp
    assert "4:16" in SMALL.sparsity
    case = sparse_mlp(SMALL, *random_inputs(SMALL, "sparse_mlp", seed=12), hw=hw)
    sim, _ = _check(case)
    text = case.kp.listing["pe"]
    lines = text.splitlines()
    n_ld = sum(ln.startswith("load_stationary") and "sparse" in ln.split()[0] for ln in lines)
    n_mm = sum(ln.startswith("multiply_moving") and "sparse" in ln.split()[0] for ln in lines)
    if hw:
        assert case.info["hw"] and case.info["moving_format"] == "fp8_e4m3"
        D, F = case.info["values"].shape[0] * 4, case.info["values"].shape[1]
        ktiles, fblocks = D // (SMALL.pe_rows * 4), -(-F // SMALL.pe_cols)
        assert n_ld == ktiles * fblocks
        assert n_mm == sum(ln.startswith("multiply_moving") for ln in lines) >= n_ld
    else:
        assert case.info["descriptors"] > 0 and n_ld == n_mm == 0


def test_sparse_mlp_hw_catches_a_wrong_tag():
    """The hardware path's expected output does not come from the simulator: flip one tag
    in DRAM (a valid, different position) and the check fails."""
    from golden.kernels import sparse_mlp
    case = sparse_mlp(SMALL, *random_inputs(SMALL, "sparse_mlp", seed=13), hw=True)
    v = case.kp.tensors["VT"]
    img = case.kp.dram
    word = int.from_bytes(bytes(img[v.addr:v.addr + 4]), "little")
    tags = case.info["tags"]
    t = int(tags[0, 0])
    others = set(range(16)) - set(int(x) for x in tags[0:4, 0])
    new = min(others)
    assert new != t
    word = (word & 0xFFFF) | (new << 16)
    img[v.addr:v.addr + 4] = word.to_bytes(4, "little")
    sim = IsaSim(SMALL, dram_bytes=img)
    assert sim.run(case.kp.programs) is None
    bad, _ = case.check(case.kp.read_outputs(sim, codes=True))["YT"]
    assert bad > 0
