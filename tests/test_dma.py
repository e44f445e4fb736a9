# SPDX-License-Identifier: Apache-2.0
"""The DMA engine on Verilator (``tb/dma/tb_dma.py``): random descriptor batches against
``golden.dma`` byte for byte under AXI back-pressure and latency and SBUF arbitration losses,
every error class, semaphore overflow, reset mid-transfer; element descriptors (ops, casts, RNE
and SR) in every direction.

Fast tier: the ``small`` preset (or ``CONFIG=``). ``full``: more seeds and batches, and the
default preset."""

import pytest

from rtl.config import get_preset
from tb.dma.build import dma_sim


def test_dma(cfg, seed):
    sim = dma_sim(cfg)
    sim.run("tb.dma.tb_dma", params={"seed": seed, "batches": 6, "per_batch": 10})


@pytest.mark.full
@pytest.mark.parametrize("rep", range(3))
def test_dma_more_seeds(seed, rep):
    sim = dma_sim(get_preset("small"))
    sim.run("tb.dma.tb_dma", params={"seed": seed + 1000 * rep, "batches": 30,
                                     "per_batch": 16}, tag=f"full{rep}")


@pytest.mark.full
def test_dma_default_preset(seed):
    sim = dma_sim(get_preset("default"))
    sim.run("tb.dma.tb_dma", params={"seed": seed, "batches": 10, "per_batch": 12},
            tag="default_preset")


#: Edge configurations: one queue and one burst in flight; a 32-bit AXI bus (4-byte words) with
#: three queues (not a power of two); the engine without the element path (ops and casts are
#: E_DESC / F_ELEMWISE, everything else as with it).
VARIANTS = {"q1_out1": dict(dma_queues=1, dma_outstanding=1),
            "axi32_q3": dict(axi_data_bits=32, dma_queues=3, dma_outstanding=2),
            "no_element": dict(dma_element_ops=False)}


@pytest.mark.full
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_dma_config_variants(seed, variant):
    cfg = get_preset("small").replace(name=f"small_{variant}", **VARIANTS[variant])
    sim = dma_sim(cfg)
    sim.run("tb.dma.tb_dma", params={"seed": seed, "batches": 6, "per_batch": 10},
            tag=variant)
