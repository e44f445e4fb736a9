# SPDX-License-Identifier: Apache-2.0
"""The whole core on Verilator (``tb/core/tb_core.py``): AxiRam DRAM, AxiLiteMaster host; a
DMA-fed matmul chain, every injected error class with soft-reset recovery, soft resets with
traffic in flight, and the kernels of tb/core/kernels.py, on the preset
narrowed to BF16 (``integration_cfg``: formats, MX and sparsity are verified block by block)."""

from tb.core.build import core_sim, integration_cfg


def test_core(cfg, seed):
    sim = core_sim(integration_cfg(cfg))
    sim.run("tb.core.tb_core", params={"seed": seed})


def test_core_kernels(cfg, seed):
    """The kernels of ``tb/core/kernels.py`` on the core, outputs bit for bit vs golden."""
    sim = core_sim(integration_cfg(cfg))
    sim.run("tb.core.tb_kernels", params={"seed": seed, "kernels": [{"name": "gemm"}]},
            tag="kernels")
