# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the Vector-engine harness (:class:`tb.vector.harness.VecTop`, one per
config)."""

from __future__ import annotations

from tb.runner import SimBuild
from tb.vector.harness import VecTop

__all__ = ["vector_sim", "VECTOR_BUILD_ARGS"]

#: The top's C++ compiled without optimization: the build dominates a test of a few thousand
#: cycles (as ``tb/core/build.py``).
VECTOR_BUILD_ARGS = ("-CFLAGS", "-O0")


def vector_sim(cfg) -> SimBuild:
    """A (cached) Verilator build of :class:`VecTop` for ``cfg``."""
    return SimBuild(VecTop(cfg), unit="vector", cfg=cfg, build_args=VECTOR_BUILD_ARGS,
                    public_depth=1)
