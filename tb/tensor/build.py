# SPDX-License-Identifier: Apache-2.0
"""Build the tensor-engine harness with Verilator: the PE, the PE row and the PSUM adder are
converted once each and passed as extra sources (the array instantiates them by name).

The PE is a Verilator ``hier_block`` and the build runs ``verilator --hierarchical``: the PE
is verilated and compiled once, as a library, instead of once per instance (Verilator emits
evaluation code per instance otherwise: ~129 MB of C++ for the 16 x 16 full-format array, which
no compiler gets through in a regression), and its internal signals stay out of cocotb's
``--public-flat-rw`` symbol table.
"""

from __future__ import annotations

import os

from rtl.tensor.engine import emit_leaf_verilog
from tb.runner import SimBuild, build_dir_for
from tb.tensor.harness import TensorHarness

__all__ = ["DEPTHS", "HIER_BUILD_ARGS", "tensor_sim"]

#: Default harness memory depths (commands, stationary beats, moving beats, result beats).
DEPTHS = dict(cmd=128, st=512, mv=1024, res=512)

#: Verilator options of the tensor-engine builds (on top of the runner's fast options).
HIER_BUILD_ARGS = ("--hierarchical",)


def tensor_sim(cfg, depths=None, name=None) -> SimBuild:
    """A (cached) Verilator build of ``TensorHarness(cfg)``; ``.build_seconds`` is measured."""
    depths = dict(DEPTHS if depths is None else depths)
    name = name or ("tensor_engine_" + "_".join(f"{k}{v}" for k, v in sorted(depths.items())))
    leaves = emit_leaf_verilog(cfg, build_dir_for(cfg, name) / "leaves")
    top = TensorHarness(cfg, cmd_depth=depths["cmd"], st_depth=depths["st"],
                        mv_depth=depths["mv"], res_depth=depths["res"])
    sim = SimBuild(top, name=name, cfg=cfg, extra_sources=leaves, build_args=HIER_BUILD_ARGS)
    sim.depths = depths
    return sim
