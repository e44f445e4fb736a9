# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the NeuronCore top (one per config)."""

from __future__ import annotations

from rtl.core.neuroncore import NeuronCore
from rtl.emit import Design
from rtl.tensor.engine import leaf_modules, leaf_pragmas
from tb.runner import SimBuild

__all__ = ["core_design", "core_sim", "integration_cfg"]


def integration_cfg(cfg):
    """``cfg`` narrowed for the whole-core tests: BF16 the only tensor input format, no MX, no
    sparsity, and DMA engines without the element path (the kernels' DMA only copies). The core
    test checks how the blocks are joined (queues, semaphores, DMA, engines, errors); every
    format, MX, sparsity and the DMA's element ops are verified block by block. The narrower PE, vector
    lanes and converters cut the Verilator build several-fold."""
    return cfg.replace(name=f"{cfg.name}_core", formats=("bf16",), mx_formats=(),
                       sparse_patterns=(), dma_element_ops=False)


def core_design(cfg):
    """The core with its PE modules converted once and instantiated by name."""
    return Design(top=NeuronCore(cfg), modules=leaf_modules(cfg), pragmas=leaf_pragmas(cfg))


#: The core's C++ is compiled without optimization: its build (megabytes of generated C++)
#: dominates the regression's runs. Measured (docs/core.md, "Simulation speed"): 7.3 min build
#: and 50-80 cycles/s at -O0 against 32.5 min and 356 cycles/s with the evaluation code at -O3.
CORE_BUILD_ARGS = ("-CFLAGS", "-O0")


def core_sim(cfg, *, waves=False, optimize=False) -> SimBuild:
    """A (cached) Verilator build of the core; ``optimize`` compiles the C++ at the default
    ``-O3`` of the fast build (a separate build: several times longer to build, faster to run,
    for long benchmarks)."""
    return SimBuild(core_design(cfg), unit="core_opt" if optimize else "core", cfg=cfg,
                    waves=waves, build_args=() if optimize else CORE_BUILD_ARGS)
