# SPDX-License-Identifier: Apache-2.0
"""IEEE 754 binary32 adder ``RNE(a + b)``."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import FP32
from rtl.fp.fused_add import FusedAdd
from rtl.fp.pipe import owned
from rtl.fp.unpack import Unpack, check_cfg

__all__ = ["FP32Adder"]


class FP32Adder(wiring.Component):
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
    i_valid : In(1)
    i : In(StructLayout)
        ``a``, ``b`` (``unsigned(32)`` each, FP32 bits).
    o_valid : Out(1)
        ``i_valid`` delayed by ``latency``.
    o : Out(StructLayout)
        ``result`` (``unsigned(32)``).

    Latency ``cfg.add_stages`` cycles; one addition per cycle; no back-pressure.
    """

    def __init__(self, cfg):
        self.cfg = check_cfg(cfg)
        self._unpack = owned(Unpack((FP32,)))
        self._add = owned(FusedAdd(cfg, self._unpack.layout))
        self.in_layout = data.StructLayout({"a": 32, "b": 32})
        self.out_layout = self._add.out_layout
        super().__init__({
            "i_valid": In(1), "i": In(self.in_layout),
            "o_valid": Out(1), "o": Out(self.out_layout),
        })

    @property
    def latency(self):
        """Cycles from ``i`` to ``o`` (``cfg.add_stages``)."""
        return self._add.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpack_b = ub = self._unpack
        m.submodules.add = add = self._add
        m.d.comb += [
            ub.code.eq(self.i.b),
            add.i_valid.eq(self.i_valid),
            add.i.c.eq(self.i.a),
            add.i.p.eq(ub.o),
            self.o_valid.eq(add.o_valid),
            self.o.eq(add.o),
        ]
        return m
