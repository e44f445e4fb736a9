# SPDX-License-Identifier: Apache-2.0
"""Place a separately converted leaf module: by name (``Instance``) or as an Amaranth submodule."""

from __future__ import annotations

from amaranth.hdl import Instance, ClockSignal, ResetSignal

__all__ = ["place_leaf"]


def place_leaf(m, name, ports, *, module_name, make, use_instances):
    """Add the leaf ``name`` to module ``m`` and connect ``ports``.

    Parameters
    ----------
    m : Module
    name : str
        Submodule name.
    ports : dict of str to Value or View
        The leaf's port members; names ending in ``_o`` are outputs, all others inputs.
    module_name : str
        Verilog module name of the leaf converted once (``use_instances``): the leaf becomes
        ``Instance(module_name)`` with ``clk``, ``rst`` and ``i_<port>`` / ``o_<port>``.
    make : callable
        ``make()`` returns the leaf component (without ``use_instances``): it becomes a
        submodule whose members are connected combinationally.
    use_instances : bool
    """
    if use_instances:
        ins = {("o_" if p.endswith("_o") else "i_") + p:
               (s.as_value() if hasattr(s, "as_value") else s) for p, s in ports.items()}
        m.submodules[name] = Instance(module_name, i_clk=ClockSignal(), i_rst=ResetSignal(),
                                      **ins)
        return
    leaf = make()
    m.submodules[name] = leaf
    for p, s in ports.items():
        if p.endswith("_o"):
            m.d.comb += s.eq(getattr(leaf, p))
        else:
            m.d.comb += getattr(leaf, p).eq(s)
