# SPDX-License-Identifier: Apache-2.0
"""The golden simulator's scalar-engine read-after-write rule (``golden.isasim.hooks.
footprints_overlap``, as ``rtl/scalar/engine.py``): the second of two back-to-back activations
waits for the first one's writes only when it reads a byte of them in a common partition
(``tb/core/scalar_hazard.py``; ``tests/test_core.py::test_core_scalar_hazard`` compares the same
programs with the RTL core). The wait costs the first one's pipeline (the Timing overhead)."""

import pytest

from golden.isasim import IsaSim, Timing
from golden.isasim.hooks import footprints_overlap
from golden.isasim.races import conflict
from golden.isasim.scalar_engine import act_pipe_cycles
from rtl.config import SMALL
from tb.core.scalar_hazard import VARIANTS, act_gap, hazard_program

N = 64


def _gap(variant, seed=0):
    kp = hazard_program(SMALL, variant, seed=seed, n=N)
    sim = IsaSim(SMALL, dram_bytes=kp.dram, dram_base=kp.dram_base)
    assert sim.run(kp.programs) is None
    ev = [e for e in sim.timeline if e.stream == "act"]
    return act_gap([e.op for e in ev], [e.retire for e in ev])


@pytest.mark.parametrize("variant", VARIANTS)
def test_only_a_read_of_the_written_partitions_and_bytes_waits(variant):
    # the wait: the first one's pipeline (Timing.act_overhead's default) and act_raw_wait
    over = act_pipe_cycles(SMALL) + 14 + Timing().act_raw_wait
    # streaming behind the first: one element per cycle (the tiles in separate banks)
    want = N + (over if variant == "overlap" else 0)
    assert _gap(variant) == want, variant


def test_footprint_predicates():
    w = ("w", 1, (0, 1), 0, 255)
    assert footprints_overlap(w, ("r", 1, (1, 3), 255, 300))        # partition 1, byte 255
    assert not footprints_overlap(w, ("r", 1, (2, 3), 0, 255))      # other partitions
    assert not footprints_overlap(w, ("r", 1, (0, 1), 256, 300))    # other bytes
    assert not footprints_overlap(w, ("r", 2, (0, 1), 0, 255))      # other memory
    assert footprints_overlap(("r", "dram", None, 0, 9), ("r", "dram", None, 9, 9))
    assert not conflict(("r", 1, (0, 1), 0, 255), ("r", 1, (0, 1), 0, 255))   # two reads
    assert conflict(w, ("r", 1, (1, 1), 0, 0))
