# SPDX-License-Identifier: Apache-2.0
"""rtl/leaf.py: a Leaf's Instance names exactly the ports of its unit's converted module."""

import re

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring

from rtl.config import SMALL
from rtl.emit import verilog_text
from rtl.leaf import Leaf
from rtl.scalar.engine import fu_module_name
from rtl.scalar.function import FunctionUnit
from rtl.vector.alu import LaneALU
from rtl.vector.fu import alu_module_name


def module_ports(text, name):
    return set(re.search(rf"module {name}\(([^)]*)\)", text).group(1).replace(" ", "")
               .replace("\n", "").split(","))


def instance_ports(text, module):
    body = re.search(rf"\n\s*{module} \S+ \((.*?)\);", text, re.S).group(1)
    return set(re.findall(r"\.(\w+)\(", body))


class Wrap(wiring.Component):
    """A parent that holds ``leaf`` and exposes its ports."""

    def __init__(self, leaf):
        self.leaf = leaf
        super().__init__(leaf.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.leaf = self.leaf
        wiring.connect(m, wiring.flipped(self), self.leaf)
        return m


@pytest.mark.parametrize("unit,name", [(LaneALU, alu_module_name), (FunctionUnit, fu_module_name)])
def test_leaf_instance_matches_the_converted_module(unit, name):
    mod = name(SMALL)
    leaf_text = verilog_text(unit(SMALL), mod)
    parent = verilog_text(Wrap(Leaf(unit.Signature(SMALL), mod)), "parent")
    assert instance_ports(parent, mod) == module_ports(leaf_text, mod)


def test_leaf_rejects_a_bad_module_name():
    with pytest.raises(TypeError, match="module must be a non-empty str"):
        Leaf(LaneALU.Signature(SMALL), "")
