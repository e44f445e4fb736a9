# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the multi-core top (:class:`rtl.core.multicore.MultiCore`): the core
converted once (with its own leaves, :func:`tb.core.build.core_design`) and instantiated
``ring_size`` times."""

from __future__ import annotations

from rtl.core.multicore import MultiCore, core_module_name
from rtl.emit import Design
from tb.core.build import CORE_BUILD_ARGS, core_design, integration_cfg
from tb.runner import SimBuild

__all__ = ["multicore_cfg", "multicore_design", "multicore_sim"]


def multicore_cfg(cfg, n=None):
    """``cfg`` narrowed like the core's integration tests (:func:`tb.core.build.integration_cfg`)
    on a ring of ``n`` (default ``cfg.ring_size``)."""
    c = integration_cfg(cfg)
    return c if n is None else c.replace(ring_size=n, name=f"{c.name}_r{n}")


def multicore_design(cfg):
    """The top with the core module (and the core's leaf modules) emitted once each."""
    core = core_design(cfg)
    modules = {core_module_name(cfg): core.top, **core.modules}
    pragmas = {core_module_name(cfg): "no_inline_module", **core.pragmas}
    return Design(top=MultiCore(cfg), modules=modules, pragmas=pragmas)


def multicore_sim(cfg, *, waves=False) -> SimBuild:
    """A (cached) Verilator build of the multi-core top (C++ at -O0, like the core's)."""
    return SimBuild(multicore_design(cfg), unit="multicore" + ("_waves" if waves else ""),
                    cfg=cfg, waves=waves, public_depth=1, build_args=CORE_BUILD_ARGS)
