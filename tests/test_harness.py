# SPDX-License-Identifier: Apache-2.0
"""The vector harness streams every vector exactly once, in order, for several latencies; the
runner fails a run whose cocotb test skipped unless the skip was expected."""

import pytest

from tb.fp.harness import VectorHarness
from tb.fp.pipeline_fixture import AffinePipeline
from tb.runner import SimBuild, verdict


def _sim(cfg, latency, depth=64):
    top = VectorHarness(AffinePipeline(width=16, latency=latency), depth=depth)
    return SimBuild(top, unit="harness_selftest", cfg=cfg, variant={"latency": latency},
                    public_depth=1)


@pytest.mark.parametrize("latency", [0, 1, 4])
def test_harness_streams_in_order(cfg, seed, latency):
    sim = _sim(cfg, latency)
    out = sim.run("tb.fp.tb_fp_harness", testcase="stream_all_vectors",
                  params={"seed": seed, "width": 16, "depth": 64, "count": 150})
    assert out == [("stream_all_vectors", "passed")], out


def test_skipped_cocotb_test_fails_the_run(cfg, seed):
    """A cocotb test that skips checked nothing: the run fails unless the caller named it in
    ``expect_skip``, and a test named there must skip."""
    sim = _sim(cfg, 0)
    params = {"seed": seed, "width": 16, "depth": 64, "count": 20}
    with pytest.raises(AssertionError, match=r"skipped \(not in expect_skip\): skip_probe"):
        sim.run("tb.fp.tb_fp_harness", testcase="skip_probe", params=params, tag="skip")
    out = sim.run("tb.fp.tb_fp_harness", testcase="skip_probe", params=params, tag="skip",
                  expect_skip=("skip_probe",))
    assert out == [("skip_probe", "skipped")], out
    with pytest.raises(AssertionError, match="expected to skip but ran: stream_all_vectors"):
        sim.run("tb.fp.tb_fp_harness", testcase="stream_all_vectors", params=params, tag="skip",
                expect_skip=("stream_all_vectors",))


@pytest.mark.parametrize("outcome, expect_skip, problems", [
    ([("a", "passed")], (), []),
    ([], (), ["no test ran"]),
    ([("a", "passed"), ("b", "failed")], (), ["failed: b"]),
    ([("a", "skipped")], (), ["skipped (not in expect_skip): a"]),
    ([("a", "skipped"), ("b", "passed")], ("a",), []),
    ([("a", "passed")], ("a",), ["expected to skip but ran: a"]),
    ([("a", "passed")], ("b",), ["expected to skip but absent: b"]),
])
def test_verdict(outcome, expect_skip, problems):
    assert verdict(outcome, expect_skip) == problems


def test_verdict_rejects_a_bare_string():
    with pytest.raises(TypeError, match="expect_skip must be a collection"):
        verdict([("a", "skipped")], "a")
