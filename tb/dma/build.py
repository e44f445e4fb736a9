# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of the DMA harness (one per config and SBUF-model latency)."""

from __future__ import annotations

from tb.dma.harness import DMAHarness
from tb.runner import SimBuild

__all__ = ["dma_sim", "SBUF_LATENCY", "DESC_DEPTH"]

#: Read latency of the harness's SBUF model (cycles from a request taken to its data).
SBUF_LATENCY = 2
#: Descriptors the harness's descriptor memory holds.
DESC_DEPTH = 64


def dma_sim(cfg, *, sbuf_latency=SBUF_LATENCY, desc_depth=DESC_DEPTH) -> SimBuild:
    """A (cached) Verilator build of :class:`~tb.dma.harness.DMAHarness`."""
    variant = {"sbuf_latency": sbuf_latency, "desc_depth": desc_depth}
    top = DMAHarness(cfg, sbuf_latency=sbuf_latency, desc_depth=desc_depth)
    # cocotb loads the top's sbuf_mem and watches the engine's AXI ports (dut.dut.axi__*)
    sim = SimBuild(top, unit="dma", cfg=cfg, variant=variant, public_depth=2)
    sim.variant = variant
    return sim
