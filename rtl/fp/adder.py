# SPDX-License-Identifier: Apache-2.0
"""IEEE 754 binary32 adder ``RNE(a + b)``."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring

from rtl.config import FP32
from rtl.fp.fused_add import FusedAdd
from rtl.fp.unpack import Unpack
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["FP32Adder"]


class FP32Adder(Pipeline):
    """``result = RNE_fp32(a + b)``: IEEE 754 binary32 with subnormals, overflow to ±Inf,
    canonical NaN ``0x7FC00000``, ``+0`` for an exact zero sum of opposite signs
    (contract §5; equal to numpy float32 addition up to the NaN encoding).

    It is :class:`FusedAdd` with ``b`` decoded as a 24-bit exact term.

    Parameters
    ----------
    cfg : CoreConfig
        Supplies ``add_stages``.

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=True))
        ``a``, ``b`` (``unsigned(32)`` each, FP32 bits).
    o : Out(stream.Signature(out_layout, always_ready=True))
        ``result`` (``unsigned(32)``); ``o.valid`` is ``i.valid`` delayed by ``latency``.

    Latency ``cfg.add_stages`` cycles; one addition per cycle; no back-pressure.
    """

    class Signature(PipelineSignature):
        """Layouts and latency (``cfg.add_stages``) of an :class:`FP32Adder`."""

        def __init__(self, cfg):
            self.term_layout = Unpack.Signature((FP32,)).layout
            add = FusedAdd.Signature(cfg, term_layout=self.term_layout)
            super().__init__(data.StructLayout({"a": 32, "b": 32}), add.out_layout,
                             latency=add.latency)

    def __init__(self, cfg):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpack_b = ub = Unpack((FP32,))
        m.submodules.add = add = FusedAdd(self.cfg, term_layout=self.signature.term_layout)
        m.d.comb += [
            ub.code.eq(self.i.payload.b),
            add.i.valid.eq(self.i.valid),
            add.i.payload.c.eq(self.i.payload.a),
            add.i.payload.p.eq(ub.o),
        ]
        wiring.connect(m, add.o, wiring.flipped(self.o))
        return m
