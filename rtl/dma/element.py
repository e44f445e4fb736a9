# SPDX-License-Identifier: Apache-2.0
"""The DMA element path (docs/dma.md §4.2): ``encode_dst(round(decode(dst) op decode(src)))``.

:class:`ElementALU` is the arithmetic: two :class:`~rtl.fp.widen.WidenToFP32` (source and old
destination), the op in FP32 (:class:`~rtl.fp.adder.FP32Adder` for add; max/min on the sortable
key of the FP32 bits; copy passes the source through) and one
:class:`~rtl.fp.convert.ConvertFromFP32` (RNE or stochastic rounding, its XORWOW lane
:func:`sr_lane` of the engine). :func:`element_dtypes` lists the dtype codes it accepts.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data

from rtl.config import CoreConfig, check_config
from rtl.fp.adder import FP32Adder
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.prng import XorWow
from rtl.fp.widen import WidenToFP32
from rtl.isa import DTYPES
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["ElementALU", "element_dtypes", "sr_lane", "SR_LANE_BASE", "OP_ADD", "OP_MAX",
           "OP_MIN"]

OP_ADD, OP_MAX, OP_MIN = 1, 2, 3
#: The stochastic-rounding PRNG of DMA engine ``e`` is XORWOW lane ``SR_LANE_BASE + e`` of
#: ``cfg.sr_seed`` (docs/dma.md §2; the partition lanes 0..P-1 belong to the compute engines).
SR_LANE_BASE = 1 << 16
_QNAN = 0x7FC00000


def sr_lane(engine):
    """The XORWOW lane of DMA engine ``engine`` (docs/dma.md §2)."""
    return SR_LANE_BASE + engine


def element_dtypes(cfg: CoreConfig):
    """dtype codes (architecture §8.3) the element path accepts on ``cfg``: the enabled dense
    formats (``cfg.formats``); e8m0 and FP4 never."""
    return tuple(c for c, n in enumerate(DTYPES) if n in cfg.formats)


def _key(x):
    """A key whose unsigned order is the FP32 order of non-NaN bits ``x`` (-0 < +0)."""
    return Mux(x[31], ~x, x | 0x80000000)


class ElementALU(Pipeline):
    """One element of the DMA element path per cycle, fixed latency, no stalls.

    ``code = encode_dst(round(decode(dst) op decode(src)))`` bit for bit as
    ``golden.dma.run``: decode is exact (a 4-byte TF32 element is its 19-bit code, the bits
    above ignored), add is ``RNE_fp32(old + src)``, max/min give the canonical NaN
    ``0x7FC00000`` if either is NaN, max(+0, -0) = +0 and min = -0; copy passes the decoded
    source (a NaN keeps its sign); the result is rounded into the destination format by RNE or
    stochastic rounding (``sr``). The XORWOW lane advances once per valid element with
    ``sr = 1``, whatever the formats (an FP32 destination too).

    Parameters
    ----------
    cfg : CoreConfig
        ``formats`` (the dtypes of :func:`element_dtypes`), ``add_stages``, ``sr_seed``.
    lane : int
        The PRNG lane (:func:`sr_lane` of the engine).

    Members
    -------
    i : In(stream.Signature(StructLayout({"src": 32, "dst": 32, "src_dtype": 4,
            "dst_dtype": 4, "op": 2, "sr": 1}), always_ready=True))
        Element codes in their low bits (higher bits ignored), dtype codes, op (0 copy, 1 add,
        2 max, 3 min), rounding (0 RNE, 1 SR). ``dst`` is ignored for copy.
    o : Out(stream.Signature(StructLayout({"code": 32}), always_ready=True))
        The destination code, zero-extended; ``latency`` = 2 + ``add_stages`` + 3 cycles after
        ``i``.
    """

    class Signature(PipelineSignature):
        """Layouts and latency (widen 2 + ``add_stages`` + convert 3) of an
        :class:`ElementALU`."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "ElementALU")
            self.dtypes = element_dtypes(cfg)
            self.op_latency = FP32Adder.Signature(cfg).latency
            lat = (WidenToFP32.Signature(cfg, formats=("fp32",)).latency + self.op_latency
                   + ConvertFromFP32.Signature(cfg, formats=("bf16",)).latency)
            super().__init__(
                data.StructLayout({"src": 32, "dst": 32, "src_dtype": 4, "dst_dtype": 4,
                                   "op": 2, "sr": 1}),
                data.StructLayout({"code": 32}), latency=lat)

    def __init__(self, cfg: CoreConfig, *, lane=SR_LANE_BASE):
        super().__init__(self.Signature(cfg))
        self.cfg, self.lane = cfg, lane

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        sig = self.signature
        names = [DTYPES[c] for c in sig.dtypes]
        narrow = [n for n in names if n != "fp32"]
        A = sig.op_latency

        def fmt_index(code, table):
            idx = Signal(range(max(2, len(table))))
            for k, n in enumerate(table):
                with m.If(code == DTYPES.index(n)):
                    m.d.comb += idx.eq(k)
            return idx

        def delay(sig_, n, name):
            for k in range(n):
                r = Signal.like(sig_, name=f"{name}_d{k}")
                m.d.sync += r.eq(sig_)
                sig_ = r
            return sig_

        p = self.i.payload
        ws, wd = WidenToFP32(cfg, formats=names), WidenToFP32(cfg, formats=names)
        m.submodules.widen_src, m.submodules.widen_dst = ws, wd
        m.d.comb += [ws.i.valid.eq(self.i.valid), ws.i.payload.code.eq(p.src),
                     ws.i.payload.fmt.eq(fmt_index(p.src_dtype, names)),
                     wd.i.valid.eq(self.i.valid), wd.i.payload.code.eq(p.dst),
                     wd.i.payload.fmt.eq(fmt_index(p.dst_dtype, names))]
        WL = ws.signature.latency
        op = delay(p.op, WL, "op")
        ctl = Cat(p.dst_dtype, p.sr)
        ctl_w = delay(ctl, WL, "ctl")
        a, b = wd.o.payload.x, ws.o.payload.x          # a: old destination, b: source

        # --- the op (add: the FP32 adder; the others delayed to its latency) ---------------
        add = m.submodules.add = FP32Adder(cfg)
        m.d.comb += [add.i.valid.eq(ws.o.valid), add.i.payload.a.eq(a), add.i.payload.b.eq(b)]
        nan_a = (a[23:31] == 0xFF) & (a[:23] != 0)
        nan_b = (b[23:31] == 0xFF) & (b[:23] != 0)
        a_ge = _key(a) >= _key(b)
        sel = Signal(32)
        with m.Switch(op):
            with m.Case(OP_MAX):
                m.d.comb += sel.eq(Mux(nan_a | nan_b, _QNAN, Mux(a_ge, a, b)))
            with m.Case(OP_MIN):
                m.d.comb += sel.eq(Mux(nan_a | nan_b, _QNAN, Mux(a_ge, b, a)))
            with m.Default():
                m.d.comb += sel.eq(b)
        sel_d = delay(sel, A, "sel")
        is_add = delay(op == OP_ADD, A, "isadd")
        ctl_o = delay(ctl_w, A, "ctlo")
        valid_o = delay(ws.o.valid, A, "vo")
        r = Mux(is_add, add.o.payload.result, sel_d)

        # --- encode into the destination format ------------------------------------------
        dst_dtype, sr = ctl_o[:4], ctl_o[4]
        CL = ConvertFromFP32.Signature(cfg, formats=("bf16",)).latency
        if narrow:
            cv = m.submodules.convert = ConvertFromFP32(cfg, formats=narrow, lane=self.lane)
            # every element goes through (an FP32 destination too), so the PRNG advances once
            # per SR element whatever the formats
            m.d.comb += [cv.i.valid.eq(valid_o), cv.i.payload.x.eq(r),
                         cv.i.payload.fmt.eq(fmt_index(dst_dtype, narrow)),
                         cv.i.payload.sr.eq(sr)]
            is32 = delay(dst_dtype == 0, CL, "is32")
            m.d.comb += self.o.payload.code.eq(Mux(is32, delay(r, CL, "r32"), cv.o.payload.code))
        else:                       # FP32 only: nothing to round, the PRNG still draws
            m.submodules.prng = prng = XorWow(cfg.sr_seed, self.lane)
            m.d.comb += [prng.next.eq(valid_o & sr),
                         self.o.payload.code.eq(delay(r, CL, "r32"))]
        m.d.comb += self.o.valid.eq(delay(valid_o, CL, "vc"))
        return m
