# SPDX-License-Identifier: Apache-2.0
"""PSUM: banks of FP32 accumulators with overwrite / accumulate writes and a read-out port."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Cat, Instance, ClockSignal, ResetSignal
from amaranth.lib import data, memory
from amaranth.lib.wiring import Out

from rtl.config import CoreConfig, check_config
from rtl.fp.adder import FP32Adder
from rtl.pipeline import Pipeline, PipelineSignature
from rtl.tensor.layouts import config_tag

__all__ = ["PsumUnit", "psum_adder_module_name"]


def psum_adder_module_name(cfg: CoreConfig) -> str:
    """Verilog module name of the separately converted PSUM :class:`FP32Adder`."""
    return f"nc_psadd_{config_tag(cfg)}"


class PsumUnit(Pipeline):
    """``psum_banks x psum_bank_fp32`` entries of ``pe_cols`` FP32 lanes (lane m = partition m).

    One result beat (all lanes of one ``n``) is accepted per cycle. Pipeline: cycle 0 accepts
    the beat and reads the old entry (synchronous read); cycle 1 feeds ``pe_cols``
    :class:`~rtl.fp.adder.FP32Adder` (``add_fp32(old, new)``, RNE, canonical NaN); cycle
    ``1 + adder latency`` writes either the sum (``acc``) or the new value (overwrite) into the
    lanes selected by ``mask`` (lanes ``m >= M`` are never written). Every beat takes the same
    path, so writes land in arrival order.

    A read-after-write hazard (an accumulating beat whose address is still in the pipeline) holds
    ``i.ready`` low until that write has landed; nothing else ever stalls the input.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        True (default): the lane adders are ``Instance(psum_adder_module_name(cfg))`` of one
        separately converted :class:`FP32Adder`; False: Amaranth submodules.

    Members
    -------
    i : In(stream.Signature(in_layout))
        Write beats: ``addr`` (``bank * psum_bank_fp32 + n``), ``acc``, ``mask`` (``pe_cols``
        bits), ``value`` (``ArrayLayout(32, pe_cols)``). A beat is taken in a cycle with
        ``i.valid & i.ready``; ``i.ready`` is combinational from registers and the payload and
        never depends on ``i.valid``.
    rd : Out(memory.ReadPort.Signature(addr_width, ArrayLayout(32, pe_cols)))
        Read-out port, as a synchronous memory read port: ``rd.data`` shows the entry at
        ``rd.addr`` one cycle after a cycle with ``rd.en`` (and holds while ``rd.en`` is low).
    busy : Out(1)
        A beat is in the pipeline (not yet written).
    we : Out(1)
        A write lands this cycle (for benchmarks).
    """

    class Signature(PipelineSignature):
        """Layouts and write latency of a :class:`PsumUnit` (attributes ``depth``, ``lanes``,
        ``in_layout``, ``latency``: cycles from an accepted beat to its write, which lands at
        the end of that cycle)."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PsumUnit")
            C = cfg.pe_cols
            self.depth = cfg.psum_banks * cfg.psum_bank_fp32
            self.lanes = data.ArrayLayout(32, C)
            in_layout = data.StructLayout({"addr": range(self.depth), "acc": 1, "mask": C,
                                           "value": self.lanes})
            rd = memory.ReadPort.Signature(addr_width=(self.depth - 1).bit_length(),
                                           shape=self.lanes)
            super().__init__(in_layout, None, ready=True,
                             latency=1 + FP32Adder.Signature(cfg).latency,
                             members={"rd": Out(rd), "busy": Out(1), "we": Out(1)})

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.use_instances = use_instances
        self.cfg = cfg
        self.depth = self.signature.depth
        self.lanes = self.signature.lanes

    def elaborate(self, platform):
        m = Module()
        C = self.cfg.pe_cols
        m.submodules.mem = mem = memory.Memory(shape=32 * C, depth=self.depth, init=[])
        rp = mem.read_port(domain="sync")
        op = mem.read_port(domain="sync")
        wp = mem.write_port(granularity=32)
        A = FP32Adder.Signature(self.cfg).latency
        i = self.i.payload

        fire = Signal()
        m.d.comb += [fire.eq(self.i.valid & self.i.ready), rp.addr.eq(i.addr), rp.en.eq(1)]
        st = Signal(self.in_layout, name="s1")
        sv = Signal(name="s1_valid")
        m.d.sync += [st.eq(i), sv.eq(fire)]
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
                    i_i__valid=sv, i_i__payload=Cat(old[c], st.value[c]), o_o__payload=res)
            else:
                add = FP32Adder(self.cfg)
                m.submodules[f"add_{c}"] = add
                m.d.comb += [add.i.valid.eq(sv), add.i.payload.a.eq(old[c]),
                             add.i.payload.b.eq(st.value[c]), res.eq(add.o.payload.result)]
            sums.append(Mux(ws.acc, res, ws.value[c]))
        m.d.comb += [
            wp.addr.eq(ws.addr),
            wp.data.eq(Cat(*sums)),
            wp.en.eq(Mux(wv, ws.mask, 0)),
            self.we.eq(wv),
        ]
        hazard = Signal()
        m.d.comb += hazard.eq(i.acc & Cat(*[v & (s.addr == i.addr)
                                            for v, s in stages]).any())
        m.d.comb += [
            self.i.ready.eq(~hazard),
            self.busy.eq(Cat(*[v for v, _ in stages]).any()),
            op.addr.eq(self.rd.addr), op.en.eq(self.rd.en),
            self.rd.data.eq(op.data),
        ]
        return m
