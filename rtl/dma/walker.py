# SPDX-License-Identifier: Apache-2.0
"""The segment walker: one side (source or destination) of a checked DMA descriptor as a
stream of word-aligned segments, at most one per cycle.

A descriptor's side is a sequence of *rows*: ``dims[0]`` is a contiguous run of ``row_bytes``
bytes, ``dims[1..3]`` (``num``, ``stride``) place the rows, ``dims[1]`` fastest. A row covers
the words ``row_addr // W .. (row_addr + row_bytes - 1) // W`` (``W`` = ``sbuf_word_bytes``, the
AXI beat); the walker cuts them into segments of at most :data:`MAX_BURST` (256) words and, on
the AXI side, never across a 4 KiB page: each segment is one AXI INCR burst or a run of SBUF
word accesses.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.dma.axi import MAX_BURST, PAGE_BYTES

__all__ = ["SegmentWalker", "seg_layout"]


def seg_layout(cfg):
    """A segment: ``word`` (word address, 64 - log2 W bits), ``count`` (1..256 words),
    ``first``/``last`` (the segment starts / ends its row), ``soff`` (byte offset of the row's
    first byte in its word), ``eoff`` (byte offset just past the row's last byte in its word;
    0 = the whole word)."""
    lw = cfg.sbuf_word_bytes.bit_length() - 1
    return data.StructLayout({"word": 64 - lw, "count": 9, "first": 1, "last": 1,
                              "soff": max(1, lw), "eoff": max(1, lw)})


class SegmentWalker(wiring.Component):
    """Walks one side of a descriptor: rows, then segments of each row.

    A ``start`` strobe (while idle) latches ``base`` (byte address), ``row_bytes``, ``nums``
    (``dims[1..3].num``, each >= 1), ``strides`` (bytes) and ``axi`` (cut at 4 KiB pages);
    from the next cycle ``seg`` offers one segment per cycle while ``seg.ready`` is high, in
    row order; ``busy`` falls the cycle after the last segment was taken. Addresses wrap
    modulo 2**64: the descriptor check proved they lie in their memory.

    Parameters
    ----------
    cfg : CoreConfig
        ``sbuf_word_bytes`` (the word), nothing else.

    Members
    -------
    start : In(1)
    base : In(64)
    row_bytes : In(19)
    nums : In(ArrayLayout(16, 3))
    strides : In(ArrayLayout(signed(32), 3))
    axi : In(1)
    seg : Out(stream.Signature(seg_layout(cfg)))
    busy : Out(1)
    """

    class Signature(wiring.Signature):
        """Members of a :class:`SegmentWalker`; ``seg_layout``."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "SegmentWalker")
            self.seg_layout = seg_layout(cfg)
            super().__init__({
                "start": In(1), "base": In(64), "row_bytes": In(19),
                "nums": In(data.ArrayLayout(16, 3)),
                "strides": In(data.ArrayLayout(signed(32), 3)), "axi": In(1),
                "seg": Out(stream.Signature(self.seg_layout)), "busy": Out(1),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        W = self.cfg.sbuf_word_bytes
        lw = W.bit_length() - 1
        page_words = PAGE_BYTES // W
        WB = 64 - lw

        busy = Signal()
        axi = Signal()
        row_bytes = Signal(19)
        nums = Signal(data.ArrayLayout(16, 3))
        strides = Signal(data.ArrayLayout(signed(32), 3))
        cnt = [Signal(16, name=f"c{k + 1}") for k in range(3)]
        row = Signal(64)            # current row's byte address
        b2, b3 = Signal(64), Signal(64)   # start of the current dims[1] / dims[2] block
        fresh = Signal()            # the row has emitted no segment yet
        cur = Signal(WB)            # next word of the row (when not fresh)
        rem = Signal(17)            # words left in the row (when not fresh)

        with m.If(self.start & ~busy):
            m.d.sync += [busy.eq(1), axi.eq(self.axi), row_bytes.eq(self.row_bytes),
                         nums.eq(self.nums), strides.eq(self.strides), row.eq(self.base),
                         b2.eq(self.base), b3.eq(self.base), fresh.eq(1)]
            m.d.sync += [c.eq(0) for c in cnt]

        # the row's word span (used when fresh)
        end = Signal(64)
        m.d.comb += end.eq(row + row_bytes)
        last_byte = Signal(64)
        m.d.comb += last_byte.eq(end - 1)
        first_word = row[lw:]
        nwords = Signal(17)
        m.d.comb += nwords.eq(last_byte[lw:] - first_word + 1)
        w = Signal(WB)
        r = Signal(17)
        m.d.comb += [w.eq(Mux(fresh, first_word, cur)), r.eq(Mux(fresh, nwords, rem))]
        bound = Signal(17)
        to_page = page_words - w[:max(1, (page_words - 1).bit_length())] \
            if page_words > 1 else 1
        m.d.comb += bound.eq(Mux(axi & (to_page < MAX_BURST), to_page, MAX_BURST))
        count = Signal(17)
        m.d.comb += count.eq(Mux(r < bound, r, bound))
        seg_last = Signal()
        m.d.comb += seg_last.eq(count == r)

        p = self.seg.payload
        m.d.comb += [self.seg.valid.eq(busy), p.word.eq(w), p.count.eq(count),
                     p.first.eq(fresh), p.last.eq(seg_last), self.busy.eq(busy)]
        if lw:
            m.d.comb += [p.soff.eq(row[:lw]), p.eoff.eq(end[:lw])]

        with m.If(self.seg.valid & self.seg.ready):
            with m.If(~seg_last):
                m.d.sync += [fresh.eq(0), cur.eq(w + count), rem.eq(r - count)]
            with m.Else():
                m.d.sync += fresh.eq(1)
                with m.If(cnt[0] + 1 < nums[0]):
                    m.d.sync += [cnt[0].eq(cnt[0] + 1), row.eq(row + strides[0])]
                with m.Elif(cnt[1] + 1 < nums[1]):
                    nb2 = b2 + strides[1]
                    m.d.sync += [cnt[0].eq(0), cnt[1].eq(cnt[1] + 1), b2.eq(nb2), row.eq(nb2)]
                with m.Elif(cnt[2] + 1 < nums[2]):
                    nb3 = b3 + strides[2]
                    m.d.sync += [cnt[0].eq(0), cnt[1].eq(0), cnt[2].eq(cnt[2] + 1),
                                 b3.eq(nb3), b2.eq(nb3), row.eq(nb3)]
                with m.Else():
                    m.d.sync += busy.eq(0)
        return m
