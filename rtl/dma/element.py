# SPDX-License-Identifier: Apache-2.0
"""The DMA element path (docs/dma.md §4.2): ``encode_dst(round(decode(dst) op decode(src)))``.

:class:`ElementALU` is the arithmetic: two :class:`~rtl.fp.widen.WidenToFP32` (source and old
destination), the op in FP32 (:class:`~rtl.fp.adder.FP32Adder` for add; max/min on the sortable
key of the FP32 bits; copy passes the source through) and one
:class:`~rtl.fp.convert.ConvertFromFP32` (RNE or stochastic rounding, its XORWOW lane
:func:`sr_lane` of the engine). :func:`element_dtypes` lists the dtype codes it accepts.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.dma.descriptor import DESC_LAYOUT, DIMS, OP_COPY, SPACE_DRAM, esize_log2
from rtl.fp.adder import FP32Adder
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.prng import XorWow
from rtl.fp.widen import WidenToFP32
from rtl.isa import (DMA_OP_ADD as OP_ADD, DMA_OP_MAX as OP_MAX, DMA_OP_MIN as OP_MIN,
                     DMA_SR_LANE_BASE as SR_LANE_BASE, DTYPES)
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["ElementALU", "ElementMover", "element_dtypes", "sr_lane", "SR_LANE_BASE", "OP_ADD", "OP_MAX",
           "OP_MIN"]

_QNAN = 0x7FC00000
#: Elements the element path has in flight (issued and not yet written): enough to cover the
#: read latency, the ALU and the write at one element per SBUF port cycle pair.
RESULT_SLOTS = 16


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


class ElementMover(wiring.Component):
    """One element descriptor (docs/dma.md §4.2): a *reader* reads each element's source word
    and, for an op, its old destination word (one read in flight), and pushes the pair into
    :class:`ElementALU`; a *writer* takes the results in element order (with their addresses,
    up to :data:`RESULT_SLOTS` elements between the two) and writes each with byte enables.
    DRAM accesses are single-beat AXI bursts (the engine lends its AXI channels; up to
    ``dma_outstanding`` writes await their B response), SBUF ones go through the engine's
    partition port (the writer first; a request once offered is held until taken).

    Timing: the reader takes ``1 + r_src [+ 1 + r_dst]`` cycles per element (``r`` = the read
    latency of that side: AR to R, or SBUF request to response), the ALU and the writes overlap
    it; on SBUF→SBUF each write also takes a port cycle. The elements run in the order of
    ``golden.dma.run`` (``dims[0]`` fastest), so SR draws are in element order.

    Parameters
    ----------
    cfg : CoreConfig
        ``sbuf_word_bytes`` (= the AXI beat), ``sbuf_bytes_per_partition``, the ALU's fields.
    lane : int
        The ALU's PRNG lane (:func:`sr_lane` of the engine).

    Members
    -------
    start : In(1)
        Take ``desc`` (a descriptor that passed the check) and run it.
    abort : In(1)
        Give the descriptor up (back to idle; the ALU and its PRNG keep their state).
    desc : In(DESC_LAYOUT)
    busy : Out(1)
        From the cycle after ``start`` until the last element's write is complete.
    ar_valid, ar_addr, ar_ready, r_valid, r_data : the AXI read side (one beat per address;
        R is always taken)
    aw_valid, aw_addr, aw_ready, w_valid, w_data, w_strb, w_ready, b_valid : the write side
    req_valid, req_we, req_word, req_be, req_wdata, req_ready, rsp_valid, rsp_data : SBUF word
        accesses (``req_word`` = device byte address / ``sbuf_word_bytes``)
    """

    def __init__(self, cfg: CoreConfig, *, lane=SR_LANE_BASE):
        check_config(cfg, "ElementMover")
        self.cfg, self.lane = cfg, lane
        W = cfg.sbuf_word_bytes
        A = cfg.axi_addr_bits
        super().__init__({
            "start": In(1), "desc": In(DESC_LAYOUT), "busy": Out(1), "abort": In(1),
            "ar_valid": Out(1), "ar_addr": Out(A), "ar_ready": In(1),
            "r_valid": In(1), "r_data": In(8 * W),
            "aw_valid": Out(1), "aw_addr": Out(A), "aw_ready": In(1),
            "w_valid": Out(1), "w_data": Out(8 * W), "w_strb": Out(W), "w_ready": In(1),
            "b_valid": In(1),
            "req_valid": Out(1), "req_we": Out(1), "req_word": Out(64), "req_be": Out(W),
            "req_wdata": Out(8 * W), "req_ready": In(1),
            "rsp_valid": In(1), "rsp_data": In(8 * W),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        W = cfg.sbuf_word_bytes
        lw = W.bit_length() - 1
        D = RESULT_SLOTS
        OUT = cfg.dma_outstanding
        d = Signal(DESC_LAYOUT, name="el_desc")
        m.submodules.alu = alu = ElementALU(cfg, lane=self.lane)
        L = alu.signature.latency

        # --- the element walk: counters and the running addresses of both sides ---------------
        idx = [Signal(16, name=f"i{k}") for k in range(DIMS)]
        cur = [Signal(64, name="sa"), Signal(64, name="da")]
        lvl = [[Signal(64, name=f"{'sd'[s]}base{k}") for k in range(DIMS)] for s in range(2)]
        es = [esize_log2(d.src_dtype), esize_log2(d.dst_dtype)]

        def stride(k, s):
            return d.dims[k].src_stride if s == 0 else d.dims[k].dst_stride

        last = Signal()
        m.d.comb += last.eq(Cat(*[idx[k] == d.dims[k].num - 1 for k in range(DIMS)]).all())

        def advance():
            """Step to the next element (dims[0] fastest); the caller checks ``last``."""
            with m.If(idx[0] != d.dims[0].num - 1):
                m.d.sync += idx[0].eq(idx[0] + 1)
                for s in range(2):
                    m.d.sync += cur[s].eq(cur[s] + (Const(1, 4) << es[s]))
            for k in range(1, DIMS):
                lower_done = Cat(*[idx[j] == d.dims[j].num - 1 for j in range(k)]).all()
                with m.Elif(lower_done & (idx[k] != d.dims[k].num - 1)):
                    m.d.sync += idx[k].eq(idx[k] + 1)
                    for j in range(k):
                        m.d.sync += idx[j].eq(0)
                    for s in range(2):
                        nxt = (lvl[s][k] + stride(k, s))[:64]
                        m.d.sync += cur[s].eq(nxt)
                        for j in range(1, k + 1):
                            m.d.sync += lvl[s][j].eq(nxt)

        src_dram = d.src_space == SPACE_DRAM
        dst_dram = d.dst_space == SPACE_DRAM
        is_op = d.op[:2] != OP_COPY

        def lane_of(addr):
            return addr[:lw] if lw else Const(0, 1)

        # --- elements in flight: `pending` were issued (source read requested) and are not yet
        # written; the reader issues only while fewer than D are, so no FIFO below overflows
        # (the SBUF response has no back-pressure, R is always taken in element mode)
        def flushed(f):
            return ResetInserter(self.abort)(f)
        af = m.submodules.addr_fifo = flushed(fifo.SyncFIFOBuffered(width=64, depth=D))
        rf = m.submodules.res_fifo = flushed(fifo.SyncFIFOBuffered(width=32, depth=D))
        sq = m.submodules.src_fifo = flushed(fifo.SyncFIFOBuffered(width=32, depth=D))
        dq = m.submodules.dst_fifo = flushed(fifo.SyncFIFOBuffered(width=32, depth=D))
        so = m.submodules.src_lane = flushed(fifo.SyncFIFOBuffered(width=lw, depth=D))
        do = m.submodules.dst_lane = flushed(fifo.SyncFIFOBuffered(width=lw, depth=D))
        # after an abort the ALU's outputs still in flight are told apart by an epoch bit
        epoch = Signal()
        with m.If(self.abort):
            m.d.sync += epoch.eq(~epoch)
        ep = epoch
        for k in range(L):
            nxt = Signal(name=f"epoch_d{k}")
            m.d.sync += nxt.eq(ep)
            ep = nxt
        issue, pop = Signal(), Signal()
        pending = Signal(range(D + 1))
        with m.If(self.abort):
            m.d.sync += pending.eq(0)
        with m.Else():
            m.d.sync += pending.eq(pending + issue - pop)
        credit = pending < D
        active = Signal()

        # --- responses: codes taken from their lanes into the source / destination FIFOs -------
        # a channel carrying both sides (an op with source and destination in one space)
        # alternates source, destination, as the reads were issued
        for c, (c_valid, c_data, c_dram) in enumerate(((self.r_valid, self.r_data, 1),
                                                      (self.rsp_valid, self.rsp_data, 0))):
            on_src = src_dram if c_dram else ~src_dram
            on_dst = is_op & (dst_dram if c_dram else ~dst_dram)
            tog = Signal(name=f"tog{c}")
            to_src = c_valid & active & on_src & (~on_dst | ~tog)
            to_dst = c_valid & active & on_dst & ~to_src
            with m.If(self.abort | self.start):
                m.d.sync += tog.eq(0)
            with m.Elif(c_valid & active & on_src & on_dst):
                m.d.sync += tog.eq(~tog)
            with m.If(to_src):
                m.d.comb += [sq.w_en.eq(1), so.r_en.eq(1),
                             sq.w_data.eq((c_data >> Cat(Const(0, 3), so.r_data))[:32])]
            with m.If(to_dst):
                m.d.comb += [dq.w_en.eq(1), do.r_en.eq(1),
                             dq.w_data.eq((c_data >> Cat(Const(0, 3), do.r_data))[:32])]

        # --- join: a source code (and, for an op, the old destination code) into the ALU ------
        join = sq.r_rdy & (dq.r_rdy | ~is_op)
        m.d.comb += [alu.i.valid.eq(join), sq.r_en.eq(join), dq.r_en.eq(join & is_op),
                     alu.i.payload.src.eq(sq.r_data), alu.i.payload.dst.eq(dq.r_data),
                     alu.i.payload.src_dtype.eq(d.src_dtype),
                     alu.i.payload.dst_dtype.eq(d.dst_dtype), alu.i.payload.op.eq(d.op[:2]),
                     alu.i.payload.sr.eq(d.rounding),
                     rf.w_en.eq(alu.o.valid & (ep == epoch)), rf.w_data.eq(alu.o.payload.code)]

        # --- the writer: results to AXI (AW + W, up to dma_outstanding B pending) or SBUF ------
        wa = af.r_data
        be = (Cat(Const(1, 1), es[1] >= 1, es[1] >= 2, es[1] >= 2) if W >= 4 else
              Cat(Const(1, 1), es[1] >= 1))
        wdata = (rf.r_data << Cat(Const(0, 3), lane_of(wa)))[:8 * W]
        strb = (be << lane_of(wa))[:W]
        have = rf.r_rdy
        aw_done, w_done = Signal(), Signal()
        wr_pend = Signal(range(OUT + 1))
        aw_fire = self.aw_valid & self.aw_ready
        wr_port = Signal()                       # the SBUF write was taken
        m.d.comb += [self.aw_addr.eq(Cat(Const(0, lw), wa[lw:])), self.w_data.eq(wdata),
                     self.w_strb.eq(strb),
                     self.aw_valid.eq(have & dst_dram & ~aw_done & (wr_pend < OUT)),
                     self.w_valid.eq(have & dst_dram & ~w_done)]
        axi_pop = (have & dst_dram & (aw_done | aw_fire)
                   & (w_done | (self.w_valid & self.w_ready)))
        m.d.comb += pop.eq(axi_pop | wr_port)
        m.d.comb += [af.r_en.eq(pop), rf.r_en.eq(pop)]
        with m.If(self.abort | pop):
            m.d.sync += [aw_done.eq(0), w_done.eq(0)]
        with m.Else():
            with m.If(aw_fire):
                m.d.sync += aw_done.eq(1)
            with m.If(self.w_valid & self.w_ready):
                m.d.sync += w_done.eq(1)
        with m.If(self.abort):
            m.d.sync += wr_pend.eq(0)
        with m.Else():
            m.d.sync += wr_pend.eq(wr_pend + aw_fire - self.b_valid)

        # --- the SBUF port: the writer first, a request once offered held until taken ----------
        rd_want = Signal()
        rd_word = Signal(64)
        wr_want = have & ~dst_dram
        held_rd = Signal()
        sel_rd = held_rd | (rd_want & ~wr_want)
        m.d.comb += [self.req_valid.eq(Mux(sel_rd, rd_want, wr_want)),
                     self.req_we.eq(~sel_rd),
                     self.req_word.eq(Mux(sel_rd, rd_word, wa[lw:])),
                     self.req_be.eq(strb), self.req_wdata.eq(wdata),
                     wr_port.eq(~sel_rd & wr_want & self.req_ready)]
        rd_taken = sel_rd & rd_want & self.req_ready
        m.d.sync += held_rd.eq(sel_rd & rd_want & ~self.req_ready & ~self.abort)

        # --- the reader: issues the reads of one element after another (source, then the old
        # destination for an op), as long as fewer than D elements are in flight ---------------
        def abort():
            with m.If(self.abort):
                m.next = "IDLE"

        def next_element():
            advance()
            with m.If(last):
                m.next = "DRAIN"
            with m.Else():
                m.next = "RD_SRC"

        with m.FSM(name="element"):
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [d.eq(self.desc)] + [i.eq(0) for i in idx]
                    for s, base in enumerate((self.desc.src, self.desc.dst)):
                        m.d.sync += cur[s].eq(base)
                        for k in range(DIMS):
                            m.d.sync += lvl[s][k].eq(base)
                    m.next = "RD_SRC"
            for s, (name, space_dram) in enumerate((("SRC", src_dram), ("DST", dst_dram))):
                with m.State(f"RD_{name}"):
                    m.d.comb += active.eq(1)
                    # a source read starts an element: only with a free slot (the valid, once
                    # raised, stays: only this state adds to `pending`)
                    go = credit if s == 0 else Const(1, 1)
                    taken = Signal(name=f"taken_{name.lower()}")
                    with m.If(space_dram):
                        m.d.comb += [self.ar_valid.eq(go),
                                     self.ar_addr.eq(Cat(Const(0, lw), cur[s][lw:])),
                                     taken.eq(go & self.ar_ready)]
                    with m.Else():
                        m.d.comb += [rd_want.eq(go), rd_word.eq(cur[s][lw:]),
                                     taken.eq(rd_taken)]
                    with m.If(taken):
                        lane = so if s == 0 else do
                        m.d.comb += [lane.w_en.eq(1), lane.w_data.eq(lane_of(cur[s]))]
                        if s == 0:
                            m.d.comb += [issue.eq(1), af.w_en.eq(1), af.w_data.eq(cur[1])]
                            with m.If(is_op):
                                m.next = "RD_DST"
                            with m.Else():
                                next_element()
                        else:
                            next_element()
                    abort()
            with m.State("DRAIN"):
                m.d.comb += active.eq(1)
                with m.If((pending == 0) & (wr_pend == 0)):
                    m.next = "IDLE"
                abort()
        m.d.comb += self.busy.eq(active)
        return m
