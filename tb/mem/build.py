# SPDX-License-Identifier: Apache-2.0
"""The Verilator build of :class:`tb.mem.harness.DmaFedHarness` (the real DMA engine and the
SBUF-fed tensor engine on one SBUF), and the memory bench's Verilator run on it."""

from __future__ import annotations

from rtl.emit import Design
from rtl.tensor.engine import leaf_modules, leaf_pragmas
from tb.mem.harness import DmaFedHarness
from tb.runner import SimBuild
from tb.tensor.build import HIER_BUILD_ARGS, PSUM_BANKS

__all__ = ["dma_fed_sim", "run_bench"]


def dma_fed_sim(cfg, *, cmd_depth=64, desc_depth=32) -> SimBuild:
    """A (cached) Verilator build of :class:`DmaFedHarness` (the tensor engine's leaf modules
    emitted once, the PE a ``hier_block``, ``verilator --hierarchical``: tb/tensor/build.py)."""
    top = DmaFedHarness(cfg, cmd_depth=cmd_depth, desc_depth=desc_depth)
    variant = dict(top.depths)
    design = Design(top=top, modules=leaf_modules(cfg), pragmas=leaf_pragmas(cfg))
    sim = SimBuild(design, unit="dma_fed", cfg=cfg, variant=variant,
                   build_args=HIER_BUILD_ARGS, public_depth=1,
                   public_vars=[PSUM_BANKS, ("*sbuf", "bank*")])
    sim.depths = variant
    return sim


def run_bench(cfg, seed=1, *, tiles=8):
    """The Verilator part of ``bench/bench_memory.py``: 8 back-to-back BF16 tiles fed from SBUF
    alone, with the synthetic full-rate writer on bank 3 and with the real DMA moving DRAM ->
    bank 3 (``tb.mem.tb_mem.bench``; every result checked against golden). Returns
    ``{scenario: figures}`` plus ``verilator_build_seconds``."""
    import json
    sim = dma_fed_sim(cfg)
    out = sim.build_dir / "bench_result.json"
    sim.run("tb.mem.tb_mem", testcase="bench", tag="bench",
            params={"seed": seed, "tiles": tiles, "depths": sim.depths, "out": str(out)})
    r = json.loads(out.read_text())
    r["verilator_build_seconds"] = sim.build_seconds
    return r
