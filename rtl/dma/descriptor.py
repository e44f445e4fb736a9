# SPDX-License-Identifier: Apache-2.0
"""The 64-byte DMA descriptor (docs/dma.md §2) and its closed-form check (§3).

:data:`DESC_LAYOUT` is the encoding as an Amaranth layout (LSB = byte 0, little-endian fields),
so a descriptor written to memory by software is this layout's bits. :class:`DescriptorCheck`
decides before the first access whether a descriptor may run; it mirrors ``golden.dma.check``
(the specification is docs/dma.md, both are written from it).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data

from rtl.config import CoreConfig, check_config
from rtl.isa import (DESC_BYTES, DESC_DIMS as DIMS, DMA_DRAM as SPACE_DRAM,
                     DMA_F_ADDR_ALIGN as F_ADDR_ALIGN, DMA_F_BRESP as F_BRESP,
                     DMA_F_DIM0 as F_DIM0, DMA_F_DTYPE as F_DTYPE, DMA_F_ELEMWISE as F_ELEMWISE,
                     DMA_F_LANE as F_LANE, DMA_F_NUM as F_NUM, DMA_F_OP as F_OP,
                     DMA_F_RANGE as F_RANGE, DMA_F_RESERVED as F_RESERVED,
                     DMA_F_RRESP as F_RRESP, DMA_F_SEM as F_SEM, DMA_F_SPACE as F_SPACE,
                     DMA_F_STRIDE_ALIGN as F_STRIDE_ALIGN, DMA_F_TIMEOUT as F_TIMEOUT,
                     DMA_OP_COPY as OP_COPY, DMA_SBUF as SPACE_SBUF, DTYPES, E_AP_ALIGN,
                     E_AP_RANGE, E_AXI, E_DESC, E_OK, E_SEM, E_TIMEOUT, ERROR_BITS)
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["DIM_LAYOUT", "DESC_LAYOUT", "DESC_BITS", "DIMS", "SPACE_DRAM", "SPACE_SBUF",
           "OP_COPY", "E_OK", "E_AP_RANGE", "E_SEM", "E_TIMEOUT", "E_AXI", "E_DESC",
           "E_AP_ALIGN", "F_TIMEOUT",
           "F_RESERVED", "F_OP", "F_SPACE", "F_DTYPE", "F_NUM", "F_DIM0", "F_SEM", "F_ELEMWISE",
           "F_ADDR_ALIGN", "F_STRIDE_ALIGN", "F_LANE", "F_RANGE", "F_RRESP", "F_BRESP",
           "DescriptorCheck", "esize_log2"]

DIM_LAYOUT = data.StructLayout({"num": 16, "src_stride": signed(32), "dst_stride": signed(32)})
DESC_LAYOUT = data.StructLayout({
    "src": 64, "dst": 64, "dims": data.ArrayLayout(DIM_LAYOUT, DIMS),
    "op": 8, "src_space": 2, "dst_space": 2, "rounding": 1, "post": 1, "res0": 2,
    "src_dtype": 4, "dst_dtype": 4, "sem": 8, "inc": 16, "res1": 16,
})
#: Bits of one descriptor (``rtl.isa.DESC_BYTES``).
DESC_BITS = 8 * DESC_BYTES
assert DESC_LAYOUT.size == DESC_BITS

# Spaces, ops, error codes (E_TIMEOUT: the AXI watchdog, no response for
# ``DMAEngine.timeout`` cycles) and the error detail's field ids come from rtl.isa.

#: Cycles from a descriptor on ``i`` to its verdict on ``o``: 1 the spans and the form flags,
#: 2 the extents, the comparisons and the code.
_LATENCY = 2


def esize_log2(dtype):
    """``log2`` of the element bytes of a dtype code (fp32/tf32 4, bf16/fp16 2, the rest 1)."""
    return Mux(dtype < 2, 2, Mux(dtype < 4, 1, 0))


def _info(field, side=0, dim=0):
    return field | (side << 8) | (dim << 10)


class DescriptorCheck(Pipeline):
    """The closed-form check of a DMA descriptor, in docs/dma.md §3's order: form (E_DESC),
    alignment (E_AP_ALIGN), range (E_AP_RANGE for SBUF, E_AXI for the DRAM window).

    No back-pressure: a descriptor taken on ``i`` gives its verdict ``latency`` (2) cycles
    later on ``o``: ``code`` (0 = may run) and ``info`` (the detail word of docs/dma.md §3).

    Parameters
    ----------
    cfg : CoreConfig
        ``partitions`` x ``sbuf_bytes_per_partition`` (the SBUF range), ``sbuf_word_bytes``
        (the lane rule of copies), ``semaphores``.
    element_ops : bool
        Whether the engine has the element path (ops and casts); without it such descriptors
        are E_DESC (``F_ELEMWISE``).

    Members
    -------
    i : In(stream.Signature(in_layout)), no back-pressure
        ``desc`` (:data:`DESC_LAYOUT`), ``dram_base``, ``dram_limit`` (``axi_addr_bits``): the
        DRAM window ``[dram_base, dram_limit)``.
    o : Out(stream.Signature(out_layout))
        ``code`` (8 bits), ``info`` (32 bits).
    """

    class Signature(PipelineSignature):
        """Layouts and latency of a :class:`DescriptorCheck`."""

        def __init__(self, cfg: CoreConfig, *, element_ops=False):
            check_config(cfg, "DescriptorCheck")
            self.element_ops = bool(element_ops)
            in_layout = data.StructLayout({"desc": DESC_LAYOUT, "dram_base": cfg.axi_addr_bits,
                                           "dram_limit": cfg.axi_addr_bits})
            out_layout = data.StructLayout({"code": ERROR_BITS, "info": 32})
            super().__init__(in_layout, out_layout, latency=_LATENCY)

    def __init__(self, cfg: CoreConfig, *, element_ops=False):
        super().__init__(self.Signature(cfg, element_ops=element_ops))
        self.cfg = cfg
        self.element_ops = bool(element_ops)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.sbuf_word_bytes
        lw = W.bit_length() - 1
        d = Signal(DESC_LAYOUT, name="desc")
        base, limit = Signal(cfg.axi_addr_bits), Signal(cfg.axi_addr_bits)
        v1, v2 = Signal(), Signal()
        m.d.sync += [v1.eq(self.i.valid), v2.eq(v1)]
        with m.If(self.i.valid):
            m.d.sync += [d.eq(self.i.payload.desc), base.eq(self.i.payload.dram_base),
                         limit.eq(self.i.payload.dram_limit)]

        # --- stage 1 (registered from i): the descriptor; spans combinationally --------------
        es = [Signal(2, name="es_src"), Signal(2, name="es_dst")]
        m.d.comb += [es[0].eq(esize_log2(d.src_dtype)), es[1].eq(esize_log2(d.dst_dtype))]
        SW = 32 + 16 + 1
        spans = [[Signal(signed(SW), name=f"span{k}_{s}") for s in range(2)]
                 for k in range(DIMS)]
        for k in range(1, DIMS):
            m.d.comb += [spans[k][0].eq(d.dims[k].src_stride * (d.dims[k].num - 1)),
                         spans[k][1].eq(d.dims[k].dst_stride * (d.dims[k].num - 1))]
        RW = 64 + SW + 4
        lo = [Signal(signed(RW), name=f"lo_{s}") for s in range(2)]
        hi = [Signal(signed(RW), name=f"hi_{s}") for s in range(2)]
        for s, addr in enumerate((d.src, d.dst)):
            run = Signal(19, name=f"run_{s}")
            m.d.comb += run.eq(d.dims[0].num << es[s])
            neg = sum(Mux(spans[k][s] < 0, spans[k][s], 0) for k in range(1, DIMS))
            pos = sum(Mux(spans[k][s] > 0, spans[k][s], 0) for k in range(1, DIMS))
            m.d.comb += [lo[s].eq(addr + neg), hi[s].eq(addr + pos + run - 1)]

        # --- the ordered rules: a priority chain of (condition, code, info) ------------------
        rules = []
        rules.append((Cat(d.res0, d.res1).any(), E_DESC, _info(F_RESERVED)))
        rules.append((d.op > 3, E_DESC, _info(F_OP)))
        for s, sp in enumerate((d.src_space, d.dst_space)):
            rules.append((sp > SPACE_SBUF, E_DESC, _info(F_SPACE, s)))
        for s, dt in enumerate((d.src_dtype, d.dst_dtype)):
            rules.append(((dt == 8) | (dt >= 10), E_DESC, _info(F_DTYPE, s)))
        for k in range(DIMS):
            rules.append((d.dims[k].num == 0, E_DESC, _info(F_NUM, 0, k)))
        for s, st in enumerate((d.dims[0].src_stride, d.dims[0].dst_stride)):
            rules.append((st != (Const(1, 3) << es[s]), E_DESC, _info(F_DIM0, s)))
        rules.append((d.post & (d.sem >= cfg.semaphores), E_DESC, _info(F_SEM)))
        elementwise = (d.op != OP_COPY) | (d.src_dtype != d.dst_dtype)
        if not self.element_ops:
            rules.append((elementwise, E_DESC, _info(F_ELEMWISE)))
        else:
            # an op or a cast needs an enabled dense format on both sides (not e8m0)
            ok = set(c for c, n in enumerate(DTYPES) if n in cfg.formats)
            for s, dt in enumerate((d.src_dtype, d.dst_dtype)):
                allowed = Const(sum(1 << c for c in ok), 16).bit_select(dt, 1)
                rules.append((elementwise & ~allowed, E_DESC, _info(F_DTYPE, s)))
        for s, addr in enumerate((d.src, d.dst)):
            mask = Mux(es[s] == 0, 0, Mux(es[s] == 1, 1, 3))
            rules.append(((addr[:2] & mask) != 0, E_AP_ALIGN, _info(F_ADDR_ALIGN, s)))
        for k in range(1, DIMS):
            for s, st in enumerate((d.dims[k].src_stride, d.dims[k].dst_stride)):
                mask = Mux(es[s] == 0, 0, Mux(es[s] == 1, 1, 3))
                rules.append(((d.dims[k].num > 1) & ((st[:2] & mask) != 0), E_AP_ALIGN,
                              _info(F_STRIDE_ALIGN, s, k)))
        if lw:       # the lane rule binds copies only (the element path realigns)
            rules.append((~elementwise & (d.src[:lw] != d.dst[:lw]), E_AP_ALIGN,
                          _info(F_LANE)))
            for k in range(1, DIMS):
                rules.append((~elementwise & (d.dims[k].num > 1)
                              & (d.dims[k].src_stride[:lw] != d.dims[k].dst_stride[:lw]),
                              E_AP_ALIGN, _info(F_LANE, 0, k)))
        sbuf_size = cfg.partitions * cfg.sbuf_bytes_per_partition
        for s, sp in enumerate((d.src_space, d.dst_space)):
            sbuf_bad = (lo[s] < 0) | (hi[s] >= sbuf_size)
            dram_bad = (lo[s] < base) | (hi[s] >= limit)
            rules.append(((sp == SPACE_SBUF) & sbuf_bad, E_AP_RANGE, _info(F_RANGE, s)))
            rules.append(((sp == SPACE_DRAM) & dram_bad, E_AXI, _info(F_RANGE, s)))

        # --- stage 2: the first failing rule, registered --------------------------------------
        code, info = Signal(ERROR_BITS), Signal(32)
        c_code, c_info = Signal(ERROR_BITS), Signal(32)
        with m.Switch(Cat(*[cond for cond, _, _ in rules])):
            for n, (_, rc, ri) in enumerate(rules):
                with m.Case("-" * (len(rules) - 1 - n) + "1" + "0" * n):
                    m.d.comb += [c_code.eq(rc), c_info.eq(ri)]
        m.d.sync += [code.eq(c_code), info.eq(c_info)]
        m.d.comb += [self.o.valid.eq(v2), self.o.payload.code.eq(code),
                     self.o.payload.info.eq(info)]
        return m
