# SPDX-License-Identifier: Apache-2.0
"""The collective-engine ring on Verilator (tb/multicore/harness.py, cocotb module
tb/multicore/tb_multicore_engine_ring.py): a ring of 2 small engines with their SBUFs and
link ports runs an all-reduce, an all-gather and a reduce-scatter, every rank's whole SBUF
bit for bit equal to the golden multi-core simulator's (random data from the test's seed); a
cut link without a watchdog hangs the ring, and the bounded wait must fail the run, not hang
it. In ``make test-full``: a ring of 4 small engines, the default preset's ring of 4, and the
Verilator cycles equal to amaranth.sim's (tb.multicore.rig.run_engines) on the same case."""

import functools

import numpy as np
import pytest

from rtl.config import DEFAULT, SMALL
from tb.multicore.build import engine_ring_sim, run_engine_ring
from tb.multicore.program import RING_OPS, engine_ring_case, engine_ring_golden

CASES = [(op, 1 << 10) for op in RING_OPS]


@functools.cache
def _sim(cfg):
    return engine_ring_sim(cfg, optimize=False)


def test_engine_ring_case_rejects_bad_sizes():
    with pytest.raises(ValueError, match="op must be one of"):
        engine_ring_case(SMALL, "all_to_all", 1024)
    with pytest.raises(ValueError, match=r"multiple of 4 \* partitions \* ring_size = 32 "):
        engine_ring_case(SMALL, "all_reduce", 1000)
    with pytest.raises(ValueError, match="more than sbuf_bytes_per_partition = 16384"):
        engine_ring_case(DEFAULT, "all_reduce", 256 << 10)
    with pytest.raises(ValueError, match="layout must be one of"):
        engine_ring_case(SMALL, "all_reduce", 1024, layout="apart")
    text, _ = engine_ring_case(DEFAULT, "all_reduce", 64 << 10, layout="split")
    assert "@0x2000{1x1024}" in text     # 64 KiB: 1,024 FP32 a partition, at the middle


def test_engine_ring_small_vs_golden(seed):
    rows, _ = run_engine_ring(SMALL, CASES, seed=seed, sim=_sim(SMALL))
    assert [(r["op"], r["size"], r["n"]) for r in rows] == [(op, s, 2) for op, s in CASES]
    assert all(r["cycles"] > 0 for r in rows)


def test_engine_ring_hang_is_bounded(seed):
    """Link 0 -> 1 cut, watchdog off: no rank can finish; the run must fail within its cycle
    budget with the bounded wait's message."""
    case = {"op": "all_reduce", "size": 1 << 10, "cut": 0, "max_cycles": 3000}
    with pytest.raises(AssertionError, match="not done within 3000 cycles"):
        run_engine_ring(SMALL, [case], seed=seed, sim=_sim(SMALL))


@pytest.mark.full
def test_engine_ring_small_4(seed):
    cfg = SMALL.replace(ring_size=4)
    rows, _ = run_engine_ring(cfg, [(op, 2 << 10) for op in RING_OPS], seed=seed,
                              sim=_sim(cfg))
    assert [r["n"] for r in rows] == [4] * len(RING_OPS)


@pytest.mark.full
def test_engine_ring_default_4(seed):
    rows, _ = run_engine_ring(DEFAULT, [(op, 4 << 10) for op in RING_OPS], seed=seed,
                              sim=engine_ring_sim(DEFAULT))
    assert [r["n"] for r in rows] == [4] * len(RING_OPS)


@pytest.mark.full
@pytest.mark.parametrize("op", RING_OPS)
def test_engine_ring_cycles_equal_amaranth_sim(op):
    """The harness counts cycles as :func:`tb.multicore.rig.run_engines` does: the same case
    takes the same cycles in both simulators (and ends in the same SBUFs)."""
    from golden.asm import assemble
    from tb.amsim import SimBench
    from tb.multicore.rig import EngineRing, run_engines
    text, images = engine_ring_case(SMALL, op, 1 << 10, seed=3)
    rig = EngineRing(SMALL)
    st, _, imgs, cyc = run_engines(SimBench(rig), rig, [assemble(text)] * SMALL.ring_size,
                                   images)
    assert not any(st)
    rows, _ = run_engine_ring(SMALL, [{"op": op, "size": 1 << 10, "seed": 3}], sim=_sim(SMALL))
    assert rows[0]["cycles"] == cyc
    _, want = engine_ring_golden(SMALL, text, images)
    assert all(np.array_equal(a, b) for a, b in zip(imgs, want))
