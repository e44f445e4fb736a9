# SPDX-License-Identifier: Apache-2.0
"""The whole core on Verilator (``tb/core/tb_core.py``): AxiRam DRAM, AxiLiteMaster host; a
DMA-fed matmul chain and every injected error class with soft-reset recovery, on the preset
narrowed to BF16 (``integration_cfg``: formats, MX and sparsity are verified block by block)."""

from tb.core.build import core_sim, integration_cfg


def test_core(cfg, seed):
    sim = core_sim(integration_cfg(cfg))
    sim.run("tb.core.tb_core", params={"seed": seed})
