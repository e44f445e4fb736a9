# SPDX-License-Identifier: Apache-2.0
"""Tensor engine on Verilator: every format pair, ragged shapes, accumulate chains, transposes,
MX matmuls, back-pressure and rejected commands, compared bit for bit with ``golden.tensor``.

Fast tier: the ``small`` preset (or ``CONFIG=``). ``full``: more seeds and longer programs on
``small``, and the default preset (16 x 16, every format) with the benchmark's build.
"""

import pytest

from rtl.config import get_preset
from tb.tensor.build import depths_for, tensor_sim


def test_tensor_engine(cfg, seed):
    sim = tensor_sim(cfg)
    sim.run("tb.tensor.tb_tensor", params={"seed": seed, "depths": sim.depths, "scale": 1})


@pytest.mark.full
@pytest.mark.parametrize("rep", range(3))
def test_tensor_engine_more_seeds(seed, rep):
    sim = tensor_sim(get_preset("small"))
    sim.run("tb.tensor.tb_tensor", params={"seed": seed + 1000 * rep, "depths": sim.depths,
                                           "scale": 4}, tag=f"full{rep}")


@pytest.mark.full
def test_tensor_engine_default_preset(seed):
    cfg = get_preset("default")
    sim = tensor_sim(cfg, depths_for(cfg), name="tensor_bench")     # shares the bench build
    sim.run("tb.tensor.tb_tensor", params={"seed": seed, "depths": sim.depths, "scale": 1},
            tag="default_preset")
