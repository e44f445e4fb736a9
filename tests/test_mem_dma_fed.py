# SPDX-License-Identifier: Apache-2.0
"""The real DMA engine on the real SBUF, next to the SBUF-fed tensor engine, on Verilator
(``tb/mem/tb_mem.py``): DRAM (cocotbext-axi ``AxiRam``, random pauses) -> SBUF -> DRAM and
SBUF -> SBUF copies byte for byte against ``golden/dma.py`` while the tensor engine reads its
operands from the same SBUF, its results bit for bit against ``golden/tensor.py``.

Only under ``full`` (3 rounds, then more rounds and seeds): its Verilator build took 5 of
``make test``'s 25 minutes, and ``make test`` already runs the same path on the whole core
(``tests/test_core.py``: DMA loads into SBUF while the SBUF-fed tensor engine computes, bit for
bit), with the DMA (``test_dma.py``) and the fed engine (``test_mem_tensor_fed.py``) alone."""

import pytest

from tb.mem.build import dma_fed_sim


@pytest.mark.full
def test_dma_sbuf_with_tensor(cfg, seed):
    sim = dma_fed_sim(cfg)
    sim.run("tb.mem.tb_mem", testcase="test_dma_sbuf_with_tensor",
            params={"seed": seed, "rounds": 3, "per_round": 8, "tiles": 3,
                    "depths": sim.depths})


@pytest.mark.full
@pytest.mark.parametrize("rep", range(2))
def test_dma_sbuf_with_tensor_more(cfg, seed, rep):
    sim = dma_fed_sim(cfg)
    sim.run("tb.mem.tb_mem", testcase="test_dma_sbuf_with_tensor",
            params={"seed": seed + 1000 * rep, "rounds": 10, "per_round": 16, "tiles": 4,
                    "depths": sim.depths}, tag=f"full{rep}")
