# SPDX-License-Identifier: Apache-2.0
"""PSUM: banks of FP32 accumulators with overwrite / accumulate writes and a read-out port."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Cat, Instance, ClockSignal, ResetSignal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig
from rtl.fp.pipe import owned
from rtl.fp.adder import FP32Adder
from rtl.tensor.layouts import config_tag

__all__ = ["PsumUnit", "psum_adder_module_name"]


def psum_adder_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the separately converted PSUM :class:`FP32Adder`."""
    return f"nc_psadd_{config_tag(cfg)}"


class PsumUnit(wiring.Component):
    """``psum_banks x psum_bank_fp32`` entries of ``pe_cols`` FP32 lanes (lane m = partition m).

    One result beat (all lanes of one ``n``) is accepted per cycle. Pipeline: cycle 0 accepts
    the beat and reads the old entry (synchronous read); cycle 1 feeds ``pe_cols``
    :class:`~rtl.fp.adder.FP32Adder` (``add_fp32(old, new)``, RNE, canonical NaN); cycle
    ``1 + adder latency`` writes either the sum (``acc``) or the new value (overwrite) into the
    lanes selected by ``mask`` (lanes ``m >= M`` are never written). Every beat takes the same
    path, so writes land in arrival order.

    A read-after-write hazard (an accumulating beat whose address is still in the pipeline) holds
    ``i_ready`` low until that write has landed; nothing else ever stalls the input.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the lane adders are ``Instance(psum_adder_module_name(cfg))`` of one
        separately converted :class:`FP32Adder`; False: Amaranth submodules.

    Members
    -------
    i_valid : In(1)
    i : In(StructLayout)
        ``addr`` (``bank * psum_bank_fp32 + n``), ``acc``, ``mask`` (``pe_cols`` bits),
        ``value`` (``ArrayLayout(32, pe_cols)``).
    i_ready : Out(1)
        The beat is taken in a cycle with ``i_valid & i_ready`` (combinational from registers and
        ``i``; never depends on ``i_valid``).
    busy : Out(1)
        A beat is in the pipeline (not yet written).
    we : Out(1)
        A write lands this cycle (for benchmarks).
    rd_en, rd_addr : In
        Read-out port: ``rd_data`` shows the entry at ``rd_addr`` one cycle after a cycle with
        ``rd_en`` (and holds while ``rd_en`` is low).
    rd_data : Out(ArrayLayout(32, pe_cols))
    """

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        self.use_instances = use_instances
        if not isinstance(cfg, CoreConfig):
            raise TypeError(f"PsumUnit cfg must be a CoreConfig, not {cfg!r}")
        self.cfg = cfg
        C = cfg.pe_cols
        self.depth = cfg.psum_banks * cfg.psum_bank_fp32
        self.lanes = data.ArrayLayout(32, C)
        self.in_layout = data.StructLayout({"addr": range(self.depth), "acc": 1, "mask": C,
                                            "value": self.lanes})
        self._adder = owned(FP32Adder(cfg))
        super().__init__({
            "i_valid": In(1), "i": In(self.in_layout), "i_ready": Out(1),
            "busy": Out(1), "we": Out(1),
            "rd_en": In(1), "rd_addr": In(range(self.depth)), "rd_data": Out(self.lanes),
        })

    @property
    def latency(self):
        """Cycles from an accepted beat to its write (the write lands at the end of it)."""
        return 1 + self._adder.latency

    def elaborate(self, platform):
        m = Module()
        C = self.cfg.pe_cols
        m.submodules.mem = mem = memory.Memory(shape=32 * C, depth=self.depth, init=[])
        rp = mem.read_port(domain="sync")
        op = mem.read_port(domain="sync")
        wp = mem.write_port(granularity=32)
        A = self._adder.latency

        fire = Signal()
        m.d.comb += [fire.eq(self.i_valid & self.i_ready), rp.addr.eq(self.i.addr), rp.en.eq(1)]
        st = Signal(self.in_layout, name="s1")
        sv = Signal(name="s1_valid")
        m.d.sync += [st.eq(self.i), sv.eq(fire)]
        stages = [(sv, st)]
        for j in range(A):
            r, rv = Signal(self.in_layout, name=f"d{j}"), Signal(name=f"d{j}_valid")
            m.d.sync += [r.eq(stages[-1][1]), rv.eq(stages[-1][0])]
            stages.append((rv, r))
        wv, ws = stages[-1]
        old = data.View(self.lanes, rp.data)
        sums = []
        for c in range(C):
            res = Signal(32, name=f"sum_{c}")
            if self.use_instances:
                m.submodules[f"add_{c}"] = Instance(
                    psum_adder_module_name(self.cfg), i_clk=ClockSignal(), i_rst=ResetSignal(),
                    i_i_valid=sv, i_i=Cat(old[c], st.value[c]), o_o=res)
            else:
                add = FP32Adder(self.cfg)
                m.submodules[f"add_{c}"] = add
                m.d.comb += [add.i_valid.eq(sv), add.i.a.eq(old[c]), add.i.b.eq(st.value[c]),
                             res.eq(add.o.result)]
            sums.append(Mux(ws.acc, res, ws.value[c]))
        m.d.comb += [
            wp.addr.eq(ws.addr),
            wp.data.eq(Cat(*sums)),
            wp.en.eq(Mux(wv, ws.mask, 0)),
            self.we.eq(wv),
        ]
        hazard = Signal()
        m.d.comb += hazard.eq(self.i.acc & Cat(*[v & (s.addr == self.i.addr)
                                                 for v, s in stages]).any())
        m.d.comb += [
            self.i_ready.eq(~hazard),
            self.busy.eq(Cat(*[v for v, _ in stages]).any()),
            op.addr.eq(self.rd_addr), op.en.eq(self.rd_en),
            self.rd_data.eq(op.data),
        ]
        return m
