# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the Scalar-engine harness (one per config)."""

from __future__ import annotations

from rtl.emit import Design
from rtl.scalar.engine import leaf_modules, leaf_pragmas
from tb.runner import SimBuild
from tb.scalar.harness import ScalarHarness

__all__ = ["scalar_sim", "SCALAR_BUILD_ARGS"]

#: The function unit is a ``hier_block`` (verilated and compiled once, not once per lane) and
#: the C++ is compiled without optimization: the build dominates a test that simulates a few
#: tens of thousands of cycles.
SCALAR_BUILD_ARGS = ("--hierarchical", "-CFLAGS", "-O0")


def scalar_sim(cfg) -> SimBuild:
    """A (cached) Verilator build of :class:`~tb.scalar.harness.ScalarHarness`."""
    design = Design(top=ScalarHarness(cfg), modules=leaf_modules(cfg),
                    pragmas=leaf_pragmas(cfg))
    return SimBuild(design, unit="scalar_engine", cfg=cfg, build_args=SCALAR_BUILD_ARGS,
                    public_depth=2)  # cocotb loads sbuf.bank<n>, psum.bank<n>
