# SPDX-License-Identifier: Apache-2.0
"""Build the tensor-engine harness with Verilator: the PE, the PE row and the PSUM adder are
converted once each and passed as extra sources (the array instantiates them by name).

The PE is a Verilator ``hier_block`` and the build runs ``verilator --hierarchical``: the PE
is verilated and compiled once, as a library, instead of once per instance (Verilator emits
evaluation code per instance otherwise: ~129 MB of C++ for the 16 x 16 full-format array, which
no compiler gets through in a regression). Only the harness top and the PSUM banks are
visible to cocotb (:data:`PUBLIC`).
"""

from __future__ import annotations

from rtl.emit import Design
from rtl.tensor.engine import TensorEngine, leaf_modules, leaf_pragmas
from tb.runner import SimBuild
from tb.tensor.harness import TensorHarness

__all__ = ["DEPTHS", "HIER_BUILD_ARGS", "PSUM_BANKS", "PUBLIC", "tensor_sim", "depths_for",
           "cycle_formula", "load_bound_period"]

#: Default harness memory depths (commands, stationary beats, moving beats, result beats).
DEPTHS = dict(cmd=128, st=512, mv=1024, res=512)

#: Verilator options of the tensor-engine builds (on top of the runner's fast options).
HIER_BUILD_ARGS = ("--hierarchical",)

#: The PSUM banks (``rtl.tensor.psum``'s ``bank<n>`` memories), as a ``public_vars`` pair.
PSUM_BANKS = ("*psum", "bank*")

#: What cocotb sees (:class:`~tb.runner.SimBuild`): the harness top (its memories and
#: counters) and the PSUM banks the driver clears, nothing else. Every signal of the PE (a
#: hierarchical block) public made the default preset's model 6 times slower.
PUBLIC = dict(public_depth=1, public_vars=[PSUM_BANKS])


def depths_for(cfg, tiles=8):
    """Harness depths for ``tiles`` back-to-back full tiles (the benchmark's programs), with
    stationary room for ``4 * tiles`` full loads: the engine testbench's programs on this
    build (``test_tensor_engine_default_preset``) load up to 9 tiles of weights (8 matmuls and
    an MX load in ``fp32_passes_mixed``)."""
    return dict(cmd=64, st=4 * tiles * cfg.pe_cols, mv=tiles * cfg.psum_bank_fp32,
                res=cfg.psum_bank_fp32)


def load_bound_period(cfg, *, M):
    """The fewest cycles between the dispatches of two back-to-back matmuls when the second has
    its own ``M``-beat LoadStationary: ``M + swap_guard + 3``. The load is dispatched
    ``swap_guard + 2`` cycles after the first matmul (its first beat issues one cycle after
    dispatch; the guard counts down from the cycle after that), streams ``M`` beats, and the
    second matmul is dispatched in the cycle after the last one. Default preset (M = 16): 20."""
    return M + TensorEngine.Signature(cfg).swap_guard + 3


def cycle_formula(cfg, *, M, N, tiles=1, parts=1):
    """Predicted cycles from the first stationary beat to the last PSUM write for ``tiles``
    back-to-back full tiles, each with its own load: ``M + 1 + (tiles - 1) * T + parts * N + L``
    with ``T = max(parts * N, load_bound_period(cfg, M=M))`` and ``L = TensorEngine latency =
    1 + (R-1)*La + (1+Lm+La) + C + (1+La)``: the first load (M beats), one dispatch cycle,
    the moving beats (``parts`` array beats per moving column: 4 for FP32 with
    ``fp32_passes = 4``, else 1; consecutive matmuls issue without a gap while ``parts * N``
    covers the next load, else the load sets the pace), and the fill/drain latency of the last
    beat."""
    period = max(parts * N, load_bound_period(cfg, M=M))
    return M + 1 + (tiles - 1) * period + parts * N + TensorEngine.Signature(cfg).latency


def tensor_sim(cfg, depths=None, name=None) -> SimBuild:
    """A (cached) Verilator build of ``TensorHarness(cfg)``; ``.build_seconds`` is measured.
    The leaf modules (PE, row, PSUM adder) are converted once each (:mod:`rtl.emit`)."""
    depths = dict(DEPTHS if depths is None else depths)
    top = TensorHarness(cfg, cmd_depth=depths["cmd"], st_depth=depths["st"],
                        mv_depth=depths["mv"], res_depth=depths["res"])
    design = Design(top=top, modules=leaf_modules(cfg), pragmas=leaf_pragmas(cfg))
    sim = SimBuild(design, unit="tensor_engine", cfg=cfg, variant=depths, name=name,
                   build_args=HIER_BUILD_ARGS, **PUBLIC)
    sim.depths = depths
    return sim
