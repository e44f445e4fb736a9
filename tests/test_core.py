# SPDX-License-Identifier: Apache-2.0
"""The whole core on Verilator (``tb/core/tb_core.py``): AxiRam DRAM, AxiLiteMaster host; a
DMA-fed matmul chain and every injected error class with soft-reset recovery."""

from tb.core.build import core_sim


def test_core(cfg, seed):
    sim = core_sim(cfg)
    sim.run("tb.core.tb_core", params={"seed": seed})
