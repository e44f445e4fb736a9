# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the Scalar-engine harness (one per config)."""

from __future__ import annotations

from tb.runner import SimBuild
from tb.scalar.harness import ScalarHarness

__all__ = ["scalar_sim", "SCALAR_BUILD_ARGS"]

#: Compiled without C++ optimization: the build (P function-unit lanes of 12 FP32 FMAs each)
#: dominates a test that simulates a few tens of thousands of cycles.
SCALAR_BUILD_ARGS = ("-CFLAGS", "-O0")


def scalar_sim(cfg) -> SimBuild:
    """A (cached) Verilator build of :class:`~tb.scalar.harness.ScalarHarness`."""
    return SimBuild(ScalarHarness(cfg), unit="scalar_engine", cfg=cfg,
                    build_args=SCALAR_BUILD_ARGS)
