# SPDX-License-Identifier: Apache-2.0
"""A block that repeats (one per lane, one per PE) converted to Verilog once.

Amaranth emits one Verilog module per submodule *instance*: a unit used in each of 16 lanes is
written out 16 times, and Verilator and yosys then compile every copy. :class:`Leaf` stands in
for such a unit: it has the unit's signature (so it is connected exactly like the unit), and it
elaborates to an ``Instance`` of one separately converted module. The enclosing block lists
that module in its ``leaf_modules(cfg)``, which a :class:`~rtl.emit.Design` emits once::

    alu = Leaf(LaneALU.Signature(cfg), lane_alu_module_name(cfg)) if use_instances \\
        else LaneALU(cfg)

The Verilog port of a signature member is named by its path joined with ``__`` (Amaranth's
naming of component ports: ``i.payload`` is ``i__payload``), and a unit with a ``sync`` domain
has ``clk`` and ``rst`` inputs. Constant members (the ``ready`` of an ``always_ready`` stream)
are not ports, as in :func:`rtl.emit.verilog_text`. The amaranth simulator cannot run an
``Instance``: blocks keep ``use_instances=False`` for it.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, ResetSignal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["Leaf"]


class Leaf(wiring.Component):
    """A unit with ``signature`` that elaborates to ``Instance(module)``.

    Parameters
    ----------
    signature : wiring.Signature
        The unit's signature (``Unit.Signature(cfg, ...)``, built without the unit).
    module : str
        The Verilog module name the unit is converted under (its ``leaf_modules`` key).
    clocked : bool
        The unit has a ``sync`` domain (``clk`` and ``rst`` ports); False for a combinational one.
    """

    def __new__(cls, signature, module, *, clocked=True, **kwargs):
        # checked before the object exists: an Elaboratable created and then rejected would
        # warn "created but never used" whenever the garbage collector gets to it
        if not isinstance(module, str) or not module:
            raise TypeError(f"module must be a non-empty str, not {module!r}")
        return super().__new__(cls, **kwargs)

    def __init__(self, signature, module, *, clocked=True):
        self.module = module
        self.clocked = clocked
        super().__init__(signature)

    def elaborate(self, platform):
        ports = {}
        for path, member, value in self.signature.flatten(self):
            v = Value.cast(value)
            if isinstance(v, Const):
                continue
            name = "__".join(str(p) for p in path)
            ports[("i_" if member.flow == In else "o_") + name] = v
        if self.clocked:
            ports["i_clk"] = ClockSignal()
            ports["i_rst"] = ResetSignal()
        return Instance(self.module, **ports)
