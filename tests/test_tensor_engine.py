# SPDX-License-Identifier: Apache-2.0
"""Tensor engine on Verilator: every format pair, ragged shapes, accumulate chains, transposes,
back-pressure and rejected commands, compared bit for bit with ``golden.tensor``.

Fast tier: the ``small`` preset (or ``CONFIG=``). ``full``: the ``default`` preset, more seeds.
"""

import pytest

from rtl.config import get_preset
from tb.tensor.build import tensor_sim


def test_tensor_engine(cfg, seed):
    sim = tensor_sim(cfg)
    sim.run("tb.tensor.tb_engine", params={"seed": seed, "depths": sim.depths, "scale": 1})


@pytest.mark.full
@pytest.mark.parametrize("rep", range(3))
def test_tensor_engine_default(seed, rep):
    sim = tensor_sim(get_preset("default"))
    sim.run("tb.tensor.tb_engine", params={"seed": seed + rep, "depths": sim.depths,
                                           "scale": 3}, tag=f"full{rep}")
