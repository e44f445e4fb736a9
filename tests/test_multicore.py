# SPDX-License-Identifier: Apache-2.0
"""The multi-core top (rtl/core/multicore.py) on Verilator (tb/multicore/tb_multicore.py):
2 cores of the small preset running collective programs against the golden multi-core
simulator bit for bit, and a link that goes down -> E_LINK on every core. 4 and 8 cores in
``make test-full``. The elaboration-level checks run without a build."""

import functools

import pytest

from rtl.config import SMALL
from rtl.core.multicore import MultiCore
from tb.multicore.build import multicore_cfg, multicore_sim


def test_multicore_rejects_a_ring_of_one():
    with pytest.raises(ValueError, match="ring_size must be in"):
        MultiCore.Signature(SMALL.replace(ring_size=1))


def test_multicore_ports():
    sig = MultiCore.Signature(SMALL)
    names = set(sig.members)
    for i in range(SMALL.ring_size):
        assert {f"c{i}_axi", f"c{i}_host", f"c{i}_irq", f"c{i}_activity"} <= names
    assert sig.members["link_down"].shape == SMALL.ring_size


@functools.cache
def _sim(n):
    return multicore_sim(multicore_cfg(SMALL, n))


@pytest.mark.full
@pytest.mark.parametrize("n", [2])
def test_multicore(seed, n):
    _sim(n).run("tb.multicore.tb_multicore", params={"seed": seed})


@pytest.mark.full
@pytest.mark.parametrize("n", [4, 8])
def test_multicore_full(seed, n):
    _sim(n).run("tb.multicore.tb_multicore", params={"seed": seed})


# ---- the multi-core kernel of make sim (tb/multicore/run_kernel.py) --------------------------

def test_sem_to_first_flit_and_overlap_from_a_timeline():
    from tb.multicore.run_kernel import overlap, sem_to_first_flit
    tl = {"engines": {"cc": {"exec": [(100, 200, 0), (210, 260, 1)], "wait": []},
                      "pe": {"exec": [(50, 120, 0), (150, 180, 1), (190, 230, 2)],
                             "wait": []}}}
    # TX valid rises at 40 (an earlier collective) and 107: 7 cycles after the issue at 100
    assert sem_to_first_flit(tl, [(40, 1), (60, 0), (107, 1), (150, 0)]) == 7
    assert sem_to_first_flit(tl, [(40, 1), (60, 0)]) is None
    assert sem_to_first_flit(tl, [(90, 1)]) == 0          # already high at the issue
    assert sem_to_first_flit(tl, None) is None
    # pe after 100: 20 + 30 + 40 = 90 cycles, inside [100, 200): 20 + 30 + 10 = 60
    assert overlap(tl) == 60 / 90
    assert overlap(tl, 5) is None


def test_tx_valid_names_from_the_verilog(tmp_path):
    from types import SimpleNamespace
    from tb.multicore.run_kernel import tx_valid_names
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "top.v").write_text(
        "  nc core0 (\n    .ring_tx_valid(ring_tx_valid),\n    .x(y)\n  );\n"
        "  nc core1 (\n    .a(b),\n    .ring_tx_valid(\\ring_tx_valid$476 ),\n  );\n")
    sim = SimpleNamespace(build_dir=tmp_path, name="top", cfg=SMALL.replace(ring_size=2))
    assert tx_valid_names(sim) == ["ring_tx_valid", "ring_tx_valid$476"]


def test_sim_config_shares_the_multicore_build():
    from tb.multicore.run_kernel import sim_config
    assert sim_config("small:ring_size=4") == multicore_cfg(SMALL, 4)
    assert sim_config("small") == multicore_cfg(SMALL, SMALL.ring_size)


@pytest.mark.full
def test_dp_step_on_the_multicore_rtl(seed, tmp_path):
    """The data-parallel step of make sim on 4 RTL cores: every core's W1, W2 bit for bit equal
    to the golden multi-core run and to the codes composed in golden/kernels/dp_step.py."""
    from golden.kernels.dp_step import dp_step_case
    from tb.multicore.run_kernel import run_case
    cfg = multicore_cfg(SMALL, 4)
    rep = run_case(dp_step_case(cfg, seed=seed, ranks=4), out_dir=tmp_path, quiet=True)
    assert rep.ok, (seed, rep.errors, rep.mismatches)
    assert len(rep.checked) == 8 and all(rep.rtl_cycles)


def test_sim_ranks_of_the_multicore_setting():
    from tb.multicore.run_kernel import SIM_RANKS, sim_ranks
    assert sim_ranks(None) == sim_ranks("") == sim_ranks("0") == 0
    assert sim_ranks("1") == SIM_RANKS
    assert sim_ranks("2") == 2 and sim_ranks("8") == 8
    for bad in ("3", "x", "-1", "16"):
        with pytest.raises(ValueError, match="MULTICORE must be"):
            sim_ranks(bad)


def test_tx_bursts_of_the_ring_row():
    from tb.multicore.run_kernel import tx_bursts
    assert tx_bursts([(5, 1), (9, 0), (12, 1)], 20) == [(5, 9, 0), (12, 20, 1)]
    assert tx_bursts([], 20) == []


# ---- the compute/collective overlap kernel (bench: gemm/allreduce slowdowns, §19) ------------

def test_overlap_kernel_on_golden():
    """The overlap kernel's three runs, in every variant the bench measures, run clean on the
    golden multi-core simulator; C is A @ B (FP32 sum of BF16 products, within 2^-20
    relative) and y the sum of the ranks' x."""
    import numpy as np
    from golden.collective import algos
    from golden.kernel.multi import run_multi
    from tb.multicore.program import overlap_inputs, overlap_kernel
    from tb.multicore.run_kernel import OVERLAP_RUNS, OVERLAP_VARIANTS
    mc = multicore_cfg(SMALL, 2)
    for v, opts in OVERLAP_VARIANTS.items():
        for name, (g, a) in OVERLAP_RUNS.items():
            mk = overlap_kernel(mc, 2, gemm=g, allreduce=a, seed=3, **opts)
            run = run_multi(mk, codes=False)
            assert not any(run.errors), (v, name, run.errors)
            for r in range(2):
                assert set(run.outputs[r]) == {o for o, on in (("C", g), ("y", a)) if on}, name
            xs, ats, bs = overlap_inputs(mc, 2, seed=3)
            for r in range(2 * g):
                at = algos.decode_codes(ats[r], "bf16").astype(np.float64)
                b = algos.decode_codes(bs[r], "bf16").astype(np.float64)
                want = at.T @ b
                got = np.asarray(run.outputs[r]["C"], np.float64)
                assert np.allclose(got, want, rtol=2 ** -20,
                                   atol=2 ** -20 * np.abs(want).max()), (v, name)
            for r in range(2 * a):
                assert np.array_equal(np.asarray(run.outputs[r]["y"], np.float32),
                                      (xs[0].astype(np.float64) + xs[1]).astype(np.float32))
    with pytest.raises(ValueError, match="K must be a multiple"):
        overlap_kernel(mc, 2, K=6)
    with pytest.raises(ValueError, match="own_banks needs sbuf_banks >= 4"):
        overlap_kernel(mc.replace(sbuf_banks=2), 2, own_banks=True)


def test_overlap_kernel_orders_and_places_the_allreduce():
    """``preload``: x's load is the first descriptor, on the last queue, and the sync engine
    waits for it before anything else; the GEMM's span starts at its completion.
    ``late_store``: y's store waits for C's last store. ``own_banks``: x's and y's tiles in
    banks 0 and 1, no GEMM tile there."""
    from golden.kernel import alloc
    from golden.kernel.multi import run_multi
    from rtl.isa import ENGINES
    from tb.core import timeline
    from tb.multicore.program import overlap_kernel
    from tb.multicore.run_kernel import overlap_spans
    mc = multicore_cfg(SMALL, 2)
    placed = []
    orig = alloc.Allocator.sbuf_tile

    def record(self, *a, **kw):
        t = orig(self, *a, **kw)
        placed.append((t.name, t.offset // mc.sbuf_bank_bytes))
        return t
    alloc.Allocator.sbuf_tile = record
    try:
        kps = overlap_kernel(mc, 2, preload=True, late_store=True, own_banks=True).build()
    finally:
        alloc.Allocator.sbuf_tile = orig
    banks = dict(placed)
    assert banks["t"] == 0 and banks["s"] == 1, banks
    assert all(b >= 2 for n, b in banks.items() if n not in "ts"), banks
    assert len({b for n, b in banks.items() if n[0] == "b"}) == mc.sbuf_banks - 2, banks
    sp = kps[0].listing["sp"].splitlines()
    last_q = mc.dma_engines * mc.dma_queues - 1
    assert f"queue={last_q % mc.dma_queues}" in sp[0] and "wait=" not in sp[0], sp[0]
    sem = len(ENGINES) + last_q                 # the last queue's semaphore
    stores = 128 // mc.psum_bank_fp32           # C's stores (N = 128), after x's preload
    assert sp[1] == f"nop wait=s{sem}>=1", sp[1]
    assert sp[-2] == f"nop wait=s{sem}>={1 + stores}" and "wait=" in sp[-1], sp[-2:]
    g = run_multi((mc, kps))
    assert not any(g.errors), g.errors
    tl = timeline.golden_timeline(g.sim.cores[0].timeline)
    q = tl["dma"][f"dma{last_q // mc.dma_queues}.q{last_q % mc.dma_queues}"]
    ends = sorted(b for _, b, _ in q)
    gemm, ar = overlap_spans(mc, None, preload=True, tl=tl)
    assert gemm == ends[-1] - ends[0] and ar > 0, (gemm, ar, ends)
    assert overlap_spans(mc, None, tl=tl)[0] == ends[-1]


@pytest.mark.full
def test_overlap_kernel_on_the_multicore_rtl(seed, tmp_path):
    """The overlap kernel on 2 RTL cores, in every variant the bench measures, together and
    each half alone: every output bit for bit equal to golden, and every half's span
    measured (the bench's slowdowns)."""
    from tb.multicore.run_kernel import OVERLAP_VARIANTS, run_overlap
    for v, opts in OVERLAP_VARIANTS.items():
        runs = run_overlap(multicore_cfg(SMALL, 2), tmp_path / v, seed=seed, sim=_sim(2),
                           **opts)
        assert runs["both"]["gemm"] and runs["both"]["allreduce"], (v, runs)
        assert runs["gemm"]["allreduce"] is None and runs["allreduce"]["gemm"] is None, (v, runs)
