# SPDX-License-Identifier: Apache-2.0
"""The vector harness streams every vector exactly once, in order, for several latencies."""

import pytest

from tb.fp.harness import VectorHarness
from tb.fp.pipeline_fixture import AffinePipeline
from tb.runner import SimBuild


@pytest.mark.parametrize("latency", [0, 1, 4])
def test_harness_streams_in_order(cfg, seed, latency):
    depth = 64
    top = VectorHarness(AffinePipeline(width=16, latency=latency), depth=depth)
    sim = SimBuild(top, unit="harness_selftest", cfg=cfg, variant={"latency": latency},
                   public_depth=1)
    sim.run("tb.fp.tb_fp_harness", params={"seed": seed, "width": 16, "depth": depth,
                                              "count": 150})
