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

__all__ = ["PERow", "pe_module_name", "row_module_name"]


def pe_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the PE of ``cfg`` (content hash: two configs never clash)."""
    return f"nc_pe_{config_tag(cfg)}"


def row_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the PE row of ``cfg``."""
    return f"nc_perow_{config_tag(cfg)}"


class PERow(wiring.Component):
    """``pe_cols`` PEs in a row: the moving and weight-load buses enter at column 0 and move
    one PE per cycle to the right (inside each PE); each column's partial sum comes from the row
    above and leaves for the row below.

    The array is built of ``pe_rows`` identical rows, so the Verilog of a 128 x 128 array holds
    one PE module, one row module (128 PE instances) and 128 row instances, instead of 16,384
    PE instances in one module: Amaranth elaborates it, and yosys and Verilator read it, in a
    fraction of the time.

    Latency: combinational wiring between PEs only; every register is inside a PE (see
    :class:`~rtl.tensor.pe.PE` for the per-PE latencies). Every register stops when ``en`` is
    low.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the PEs are ``Instance(pe_module_name(cfg))`` of the separately converted
        :class:`PE`; False: Amaranth submodules (for the Amaranth simulator).

    Members
    -------
    en : In(1)
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
                "en": In(1),
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
        C = cfg.pe_cols
        colw = p.ld_layout["col"].shape.width
        mv = [self.mv_i] + [Signal(p.mv_layout, name=f"mv_{c}") for c in range(1, C + 1)]
        ld = [self.ld_i] + [Signal(p.ld_layout, name=f"ld_{c}") for c in range(1, C + 1)]
        for c in range(C):
            ports = dict(en=self.en, col=Const(c, colw), mv_i=mv[c], ld_i=ld[c],
                         ps_i=self.ps_i[c], mv_o=mv[c + 1], ld_o=ld[c + 1], ps_o=self.ps_o[c])
            place_leaf(m, f"pe_{c}", ports, module_name=pe_module_name(cfg),
                       make=lambda: PE(cfg), use_instances=self.use_instances)
        return m
