# SPDX-License-Identifier: Apache-2.0
"""The whole core on Verilator (``tb/core/tb_core.py``): AxiRam DRAM, AxiLiteMaster host; a
DMA-fed matmul chain, every injected error class with soft-reset recovery, soft resets with
traffic in flight, and the kernels of tb/core/kernels.py, on the preset
narrowed to BF16 (``integration_cfg``: formats, MX and sparsity are verified block by block)."""

import functools

import pytest

from tb.core.build import core_sim, integration_cfg


@functools.cache
def _sim(cfg):
    """One elaboration and build per session for both tests (elaborating the core takes a
    minute of Python)."""
    return core_sim(integration_cfg(cfg))


# one worker for both (make test: --dist loadgroup), so the core is elaborated once
@pytest.mark.xdist_group("core")
def test_core(cfg, seed):
    sim = _sim(cfg)
    sim.run("tb.core.tb_core", params={"seed": seed})


@pytest.mark.xdist_group("core")
def test_core_kernels(cfg, seed):
    """The kernels of ``tb/core/kernels.py`` on the core, outputs bit for bit vs golden."""
    sim = _sim(cfg)
    sim.run("tb.core.tb_kernels", params={"seed": seed, "kernels": [{"name": "gemm"}]},
            tag="kernels")


@pytest.mark.xdist_group("core")
def test_core_random_programs(cfg, seed):
    """Random all-engine programs, clean and corrupted, on the core against the golden ISA
    simulator (tb/core/tb_fuzz.py): DRAM images byte for byte, first errors."""
    sim = _sim(cfg)
    sim.run("tb.core.tb_fuzz", params={"seed": seed, "programs": 2, "n_ops": 24}, tag="fuzz")


@pytest.mark.full
@pytest.mark.xdist_group("core")
def test_core_random_programs_long(cfg, seed):
    sim = _sim(cfg)
    sim.run("tb.core.tb_fuzz", params={"seed": seed + 1, "programs": 400, "n_ops": 48},
            tag="fuzz_long")
