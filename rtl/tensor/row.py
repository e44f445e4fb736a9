# SPDX-License-Identifier: Apache-2.0
"""One row of the systolic array: ``pe_cols`` PEs chained left to right."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Const
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.tensor.hier import place_leaf
from rtl.tensor.layouts import config_tag
from rtl.tensor.pe import PE

__all__ = ["PERow", "PEGroup", "PE_GROUP", "group_cols", "pe_module_name", "group_module_name",
           "row_module_name"]

#: PEs per group (:class:`PEGroup`, the unit Verilator compiles once as a hierarchical block),
#: at most: a row of ``pe_cols`` PEs is ``pe_cols / group_cols(cfg)`` groups. Hierarchy only,
#: the same logic for any value; chosen by simulation speed (docs/tensor-engine.md,
#: "Simulation and build cost").
PE_GROUP = 4


def group_cols(cfg: CoreConfig) -> int:
    """PEs per :class:`PEGroup` for ``cfg``: the largest power of two up to :data:`PE_GROUP`
    that divides ``pe_cols``."""
    g = PE_GROUP
    while cfg.pe_cols % g:
        g //= 2
    return g


def pe_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the PE of ``cfg`` (content hash: two configs never clash)."""
    return f"nc_pe_{config_tag(cfg)}"


def _bus_chain(layout, first, n, last, name):
    """The ``n + 1`` buses of ``n`` units chained left to right: ``first`` into unit 0, a wire
    ``<name>_<k>`` from unit ``k - 1`` to unit ``k``, ``last`` out of unit ``n - 1``."""
    return [first] + [Signal(layout, name=f"{name}_{k}") for k in range(1, n)] + [last]


def group_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the PE group of ``cfg``."""
    return f"nc_pegrp_{config_tag(cfg)}"


def row_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the PE row of ``cfg``."""
    return f"nc_perow_{config_tag(cfg)}"


class PEGroup(wiring.Component):
    """``group_cols(cfg)`` PEs chained left to right: a slice of a :class:`PERow`, columns
    ``col0`` to ``col0 + group_cols(cfg) - 1``. The group, not the PE, is what a Verilator
    build compiles once (a ``hier_block``): every call into a hierarchical block costs an
    evaluation of its model (four per clock cycle, both clock edges and the input updates),
    so a group of a few PEs pays that once for all of them, while its code (the PEs inlined)
    still fits the cache.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the PEs are ``Instance(pe_module_name(cfg))``; False: Amaranth
        submodules (for the Amaranth simulator).

    Members
    -------
    col0 : In(unsigned)
        Column of the group's first PE (a constant at instantiation).
    mv_i, mv_o : In / Out(mv layout)
        Moving bus into the first PE and out of the last.
    ld_i, ld_o : In / Out(ld layout)
        Weight-load bus into the first PE and out of the last.
    ps_i, ps_o : In / Out(ArrayLayout(ps layout, group_cols(cfg)))
        Partial sums from the row above and to the row below, one lane per PE.
    """

    class Signature(wiring.Signature):
        """The group's members for ``cfg``; ``pe`` is the :class:`PE.Signature` of its PEs,
        ``cols`` the number of PEs."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PEGroup")
            self.pe = p = PE.Signature(cfg)
            self.cols = n = group_cols(cfg)
            super().__init__({
                "col0": In(p.ld_layout["col"].shape),
                "mv_i": In(p.mv_layout), "mv_o": Out(p.mv_layout),
                "ld_i": In(p.ld_layout), "ld_o": Out(p.ld_layout),
                "ps_i": In(data.ArrayLayout(p.ps_layout, n)),
                "ps_o": Out(data.ArrayLayout(p.ps_layout, n)),
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        cfg, p, n = self.cfg, self.signature.pe, self.signature.cols
        colw = p.ld_layout["col"].shape.width
        mv = _bus_chain(p.mv_layout, self.mv_i, n, self.mv_o, "mv")
        ld = _bus_chain(p.ld_layout, self.ld_i, n, self.ld_o, "ld")
        for c in range(n):
            ports = dict(col=(self.col0 + c)[:colw], mv_i=mv[c], ld_i=ld[c],
                         ps_i=self.ps_i[c], mv_o=mv[c + 1], ld_o=ld[c + 1], ps_o=self.ps_o[c])
            place_leaf(m, f"pe_{c}", ports, module_name=pe_module_name(cfg),
                       make=lambda: PE(cfg), use_instances=self.use_instances)
        return m


class PERow(wiring.Component):
    """``pe_cols`` PEs in a row: the moving and weight-load buses enter at column 0 and move
    one PE per cycle to the right (inside each PE); each column's partial sum comes from the row
    above and leaves for the row below.

    The array is built of ``pe_rows`` identical rows, so the Verilog of a 128 x 128 array holds
    one PE module, one group module, one row module (128 / 4 group instances) and 128 row
    instances, instead of 16,384 PE instances in one module: Amaranth elaborates it, and yosys
    and Verilator read it, in a fraction of the time. The row is a chain of
    :class:`PEGroup`\\ s of ``group_cols(cfg)`` PEs (hierarchy only).

    Latency: combinational wiring between PEs only; every register is inside a PE (see
    :class:`~rtl.tensor.pe.PE` for the per-PE latencies).

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the groups are ``Instance(group_module_name(cfg))`` of the separately
        converted :class:`PEGroup` (whose PEs are ``Instance(pe_module_name(cfg))``); False:
        Amaranth submodules (for the Amaranth simulator).

    Members
    -------
    mv_i : In(mv layout)
        Moving bus entering column 0.
    ld_i : In(ld layout)
        Weight-load bus entering column 0.
    ps_i : In(ArrayLayout(ps layout, pe_cols))
        Partial sums from the row above (column c = lane c).
    ps_o : Out(ArrayLayout(ps layout, pe_cols))
        Partial sums to the row below.
    """

    class Signature(wiring.Signature):
        """The row's members for ``cfg``; ``pe`` is the :class:`PE.Signature` of its PEs."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PERow")
            self.pe = p = PE.Signature(cfg)
            super().__init__({
                "mv_i": In(p.mv_layout),
                "ld_i": In(p.ld_layout),
                "ps_i": In(data.ArrayLayout(p.ps_layout, cfg.pe_cols)),
                "ps_o": Out(data.ArrayLayout(p.ps_layout, cfg.pe_cols)),
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        cfg, p = self.cfg, self.signature.pe
        n = group_cols(cfg)
        G = cfg.pe_cols // n
        colw = p.ld_layout["col"].shape.width
        psw = p.ps_layout.size * n
        # the row has no bus outputs: the last group's leave on unused wires
        mv = _bus_chain(p.mv_layout, self.mv_i, G, Signal(p.mv_layout, name=f"mv_{G}"), "mv")
        ld = _bus_chain(p.ld_layout, self.ld_i, G, Signal(p.ld_layout, name=f"ld_{G}"), "ld")
        ps_i, ps_o = self.ps_i.as_value(), self.ps_o.as_value()
        for k in range(G):
            ports = dict(col0=Const(k * n, colw), mv_i=mv[k], ld_i=ld[k],
                         ps_i=ps_i[k * psw:(k + 1) * psw], mv_o=mv[k + 1], ld_o=ld[k + 1],
                         ps_o=ps_o[k * psw:(k + 1) * psw])
            place_leaf(m, f"grp_{k}", ports, module_name=group_module_name(cfg),
                       make=lambda: PEGroup(cfg, use_instances=False),
                       use_instances=self.use_instances)
        return m
