# SPDX-License-Identifier: Apache-2.0
"""cocotb: the vector harness delivers every vector once, in order, with and without bubbles;
``skip_probe`` skips, for the runner's own test."""

import random

import cocotb

from tb.fp.driver import VectorTB


@cocotb.test()
async def stream_all_vectors(dut):
    tb = VectorTB(dut, latency=8)
    p, seed = tb.params, tb.seed
    rng = random.Random(seed)
    mask = (1 << p["width"]) - 1
    await tb.reset()
    for bubbles in (False, True):
        words = [rng.randrange(1 << p["width"]) for _ in range(p["count"])]
        got = await tb.run_words(words, bubbles=bubbles)
        want = [(3 * w + 1) & mask for w in words]
        assert got == want, f"seed={seed} bubbles={bubbles}: first mismatch at " \
            f"{next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)}"
    dut._log.info("harness selftest: %d vectors x2 in %d cycles", p["count"], tb.total_cycles)


@cocotb.test()
async def skip_probe(dut):
    """Always skips: ``tests/test_harness.py`` checks that the runner counts a skip as a failure
    unless the caller expected it (``SimBuild.run(expect_skip=...)``)."""
    import pytest
    pytest.skip("skip_probe always skips")
