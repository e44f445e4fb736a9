# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the NeuronCore top (one per config)."""

from __future__ import annotations

from rtl.core.neuroncore import NeuronCore
from rtl.emit import Design
from rtl.tensor.engine import leaf_modules, leaf_pragmas
from tb.runner import SimBuild

__all__ = ["core_design", "core_sim"]


def core_design(cfg):
    """The core with its PE modules converted once and instantiated by name."""
    return Design(top=NeuronCore(cfg), modules=leaf_modules(cfg), pragmas=leaf_pragmas(cfg))


def core_sim(cfg, *, waves=False) -> SimBuild:
    """A (cached) Verilator build of the core."""
    return SimBuild(core_design(cfg), unit="core", cfg=cfg, waves=waves)
