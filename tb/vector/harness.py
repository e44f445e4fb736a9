# SPDX-License-Identifier: Apache-2.0
"""The Vector engine on a real SBUF and PSUM as one Verilator top (``tb/vector/tb_vector.py``).

:class:`VecTop` is :class:`tb.vector.rig.VecRig` with ports: ``instr`` / ``done`` (the
engine's streams), ``sbuf_hog`` / ``psum_hog`` (a priority row port into each memory: the
testbench preloads, dumps and steals banks through it), and write monitors ``sbuf_w`` /
``psum_w`` (``fire`` and the request of the engine's granted writes).
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.mem.port import PSUM, SBUF, RowPort
from rtl.mem.sbuf import SBUF as SbufMem
from rtl.tensor.psum import PsumUnit
from rtl.vector.engine import VectorEngine
from rtl.vector.frame import PORT_NAMES

__all__ = ["VecTop"]

class VecTop(wiring.Component):
    """Engine + SBUF + PSUM; members ``instr``, ``done``, ``busy`` (the engine's),
    ``sbuf_hog``, ``psum_hog`` (In row ports, priority over the engine), ``sbuf_w``,
    ``psum_w`` (Out: ``fire`` plus the write request the engine's writer had granted)."""

    def __init__(self, cfg: CoreConfig):
        check_config(cfg, "VecTop")
        esig = VectorEngine.Signature(cfg)
        mons = {}
        for mem in (SBUF, PSUM):
            lay = RowPort.Signature(cfg, mem).req_layout
            mons[f"{mem}_w"] = Out(data.StructLayout({"fire": 1, "req": lay}))
        super().__init__({
            "instr": In(stream.Signature(esig.instr_layout)),
            "done": Out(stream.Signature(esig.done_layout)),
            "busy": Out(1),
            "sbuf_hog": In(RowPort.Signature(cfg, SBUF)),
            "psum_hog": In(RowPort.Signature(cfg, PSUM)),
            **mons,
        })
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.dut = dut = VectorEngine(cfg)
        m.submodules.sbuf = sbuf = SbufMem(cfg, row_ports=("hog", "sbuf_rd0", "sbuf_rd1",
                                                           "sbuf_wr"), priority=("hog",))
        m.submodules.psum = psum = PsumUnit(cfg, use_instances=False,
                                            row_ports=("hog", "psum_rd0", "psum_rd1",
                                                       "psum_wr"))
        for n in PORT_NAMES:
            wiring.connect(m, getattr(dut, n), getattr(sbuf if n.startswith(SBUF) else psum, n))
        wiring.connect(m, wiring.flipped(self.instr), dut.instr)
        wiring.connect(m, dut.done, wiring.flipped(self.done))
        wiring.connect(m, wiring.flipped(self.sbuf_hog), sbuf.hog)
        wiring.connect(m, wiring.flipped(self.psum_hog), psum.hog)
        m.d.comb += self.busy.eq(dut.busy)
        for mem, port in ((SBUF, dut.sbuf_wr), (PSUM, dut.psum_wr)):
            mon = getattr(self, f"{mem}_w")
            m.d.comb += [mon.fire.eq(port.req.valid & port.req.ready), mon.req.eq(port.req.payload)]
        return m
