# SPDX-License-Identifier: Apache-2.0
"""The rows x cols grid of PEs with its input skew and output de-skew."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Cat
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.pipeline import signature_attr
from rtl.tensor.hier import place_leaf
from rtl.tensor.pe import PE, FP32_EXP_MASK
from rtl.tensor.row import PEGroup, PERow, group_module_name, pe_module_name, row_module_name

__all__ = ["SystolicArray", "pe_module_name", "group_module_name", "row_module_name",
           "array_leaf_modules"]


def array_leaf_modules(cfg: CoreConfig):
    """``{Verilog module name: component}`` the array instantiates by name, each to be converted
    once: the PE, the group of PEs (which instantiates the PE) and the row (which instantiates
    the group)."""
    return {pe_module_name(cfg): PE(cfg), group_module_name(cfg): PEGroup(cfg),
            row_module_name(cfg): PERow(cfg, use_instances=True)}


class SystolicArray(wiring.Component):
    """Weight-stationary grid of ``pe_rows x pe_cols`` PEs, skewed in, de-skewed out.

    Row ``k``'s moving bus is delayed ``k * row_skew`` cycles before PE(k, 0) (the
    partial sum spends ``row_skew`` = adder latency cycles in each row); a beat then moves one
    column per cycle. The weight-load bus is skewed the same way (row ``k``'s load beat is
    delayed ``k * row_skew`` cycles too), so a load beat meets every row at the same distance
    from a moving beat issued with it: the engine may start the next load one cycle after a
    matmul's swapping beat (``swap_guard``, see ``engine.py``), whatever the number of rows.
    The partial sum enters row 0 as ``-0`` (FP32 ``0x80000000``). Column ``m``'s bottom output
    is delayed ``cols - m`` cycles (at least one: the outputs are registers) so that one result
    beat carries all columns of one moving column ``n``; a transpose flag restores the FP32
    exponent field (see :class:`PE`).

    The array never stops: nothing stalls it (the engine holds a beat at issue instead when
    PSUM could not take its result, see ``engine.py``), so its registers have no enable.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the rows are ``Instance(row_module_name(cfg))`` of the separately
        converted :class:`~rtl.tensor.row.PERow`, whose groups and PEs are instances too
        (three Verilog modules for the whole grid, see :func:`array_leaf_modules`; pass their
        Verilog as extra sources). False: rows, groups and PEs are Amaranth submodules (for the
        Amaranth simulator, small configs only).

    Members
    -------
    mv_in : In(ArrayLayout(mv layout, pe_rows))
        Moving bus of every row, unskewed (lane k = row k).
    ld_in : In(ArrayLayout(ld layout, pe_rows))
        Weight-load bus of every row.
    out : Out(StructLayout)
        ``valid``, ``value`` (``ArrayLayout(32, pe_cols)``): one result beat, :attr:`latency`
        cycles after the ``mv_in`` beat of the same ``n``. Every output is a register (to
        Verilator, which sees a hierarchical PE as combinational, a combinational column
        feeding the engine's logic would be settled again each cycle).
    """

    class Signature(wiring.Signature):
        """The array's members for ``cfg``, with ``pe`` (the :class:`PE.Signature`), the bus
        layouts, ``row_skew`` and ``latency`` (cycles from a beat on ``mv_in`` to its
        result on ``out``: fill + drain of one column, ``(rows - 1) * row_skew + pe latency +
        cols``) as attributes."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "SystolicArray")
            self.pe = pe = PE.Signature(cfg)
            self.mv_layout, self.ld_layout, self.ps_layout = \
                pe.mv_layout, pe.ld_layout, pe.ps_layout
            self.out_layout = data.StructLayout({"valid": 1,
                                                 "value": data.ArrayLayout(32, cfg.pe_cols)})
            self.row_skew = pe.row_skew
            R, C = cfg.pe_rows, cfg.pe_cols
            self.latency = (R - 1) * pe.row_skew + pe.latency + C
            super().__init__({
                "mv_in": In(data.ArrayLayout(self.mv_layout, cfg.pe_rows)),
                "ld_in": In(data.ArrayLayout(self.ld_layout, cfg.pe_rows)),
                "out": Out(self.out_layout),
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances
        sig = self.signature
        self.mv_layout, self.ld_layout, self.ps_layout = \
            sig.mv_layout, sig.ld_layout, sig.ps_layout
        self.out_layout = sig.out_layout

    row_skew = signature_attr("row_skew", "Cycles between consecutive rows.")
    latency = signature_attr("latency", "Cycles from a beat on ``mv_in`` to its result "
                                        "on ``out``.")

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, C, D = cfg.pe_rows, cfg.pe_cols, self.row_skew
        ps = [Signal(data.ArrayLayout(self.ps_layout, C), name=f"ps_{k}") for k in range(R + 1)]
        # input skew of the moving and the weight-load buses together, triangular: stage s is
        # one register holding every row that still needs delay (row k taps stage k * D), so
        # the skew costs (R - 1) * D registers
        mvw = self.mv_layout.size
        lw = mvw + self.ld_layout.size
        cur = {k: Cat(self.mv_in[k].as_value(), self.ld_in[k].as_value()) for k in range(R)}
        for s in range(1, (R - 1) * D + 1):
            rows = [k for k in range(R) if k * D >= s]
            vec = Signal(len(rows) * lw, name=f"skew_{s}")
            m.d.sync += vec.eq(Cat(*[cur[k] for k in rows]))
            for i, k in enumerate(rows):
                cur[k] = vec[i * lw:(i + 1) * lw]
        for c in range(C):
            m.d.comb += [ps[0][c].value.eq(0x80000000), ps[0][c].flag.eq(0),
                         ps[0][c].valid.eq(0)]
        for k in range(R):
            ports = dict(mv_i=cur[k][:mvw], ld_i=cur[k][mvw:], ps_i=ps[k], ps_o=ps[k + 1])
            place_leaf(m, f"row_{k}", ports, module_name=row_module_name(cfg),
                       make=lambda: PERow(cfg, use_instances=False),
                       use_instances=self.use_instances)
        # de-skew: column c waits C - c cycles, at least one, so every output is a register;
        # the flag restores the exponent field (triangular as well: stage s holds every
        # column that still needs delay)
        res = {}
        for c in range(C):
            b = ps[R][c]
            v = Signal(33, name=f"res_{c}")
            m.d.comb += v.eq(Cat(b.value | (b.flag.replicate(32) & FP32_EXP_MASK), b.valid))
            res[c] = v
        for s in range(1, C + 1):
            cols = [c for c in range(C) if C - c >= s]
            vec = Signal(33 * len(cols), name=f"deskew_{s}")
            m.d.sync += vec.eq(Cat(*[res[c] for c in cols]))
            for i, c in enumerate(cols):
                res[c] = vec[33 * i:33 * (i + 1)]
        for c in range(C):
            m.d.comb += self.out.value[c].eq(res[c][:32])
        m.d.comb += self.out.valid.eq(res[0][32])
        return m
