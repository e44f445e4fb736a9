# SPDX-License-Identifier: Apache-2.0
"""The collective engine: runs the CC queue's instructions (``rtl/isa.py`` 0x60-0x64) on a
unidirectional ring of ``cfg.ring_size`` cores (docs/collectives.md §14).

It reads its source through its own SBUF row port (``rd``), sends and receives flits through
the core's link ports (``tx`` into :class:`rtl.collective.link.LinkTX` input VC0, ``rx`` from
:class:`rtl.collective.link.LinkRX`), reduces in FP32 with the vector engine's lane ALU
(:class:`rtl.vector.alu.LaneALU`: add, max, min), rounds once into the destination format
(:class:`rtl.fp.convert.ConvertFromFP32`, RNE) and writes its destination through a second row
port (``wr``). The schedule (:mod:`rtl.collective.phases`) is the golden ring schedule cut into
segments, so every element is combined in the order of
:func:`golden.collective.schedule.sum_order` and the results are the bits of
:mod:`golden.collective.algos`.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.collective.checks import MOVE_DTYPES, APCheck, dtype_in
from rtl.collective.link import payload_layout
from rtl.collective.phases import (KIND_AG, KIND_AR, KIND_RS, MODE_OWN_RAW, MODE_RED,
                                   MODE_RX_RAW, PhaseWalker)
from rtl.config import LANE_BITS, LINK_VCS, CoreConfig, check_config
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.pipe import delay
from rtl.fp.widen import WidenToFP32
from rtl.isa import (ALU_ADD, ALU_BYPASS, ALU_MAX, ALU_MIN, E_AP_FORM, E_FORMAT, E_LINK,
                     E_OPCODE, E_SHAPE, ERROR_BITS, MEM_SBUF)
from rtl.mem.ap import APGenerator
from rtl.mem.port import RowPort
from rtl.vector.alu import LaneALU

__all__ = ["CollectiveEngine", "instr_layout", "done_layout", "INFO_NOT_BUILT", "CC_BUILT"]

#: ``err_info`` of ``E_OPCODE`` for a CC opcode the engine does not run (all_to_all,
#: send_recv).
INFO_NOT_BUILT = 0xFF
#: CC opcodes the engine runs.
CC_BUILT = ("all_reduce", "reduce_scatter", "all_gather")
_W = 28                                  # element counts and indices (n * 2**8 * 2**16 max)


def instr_layout(cfg: CoreConfig):
    """A decoded CC instruction: ``opcode``, the immediates ``op``, ``stream``, ``d``, the
    destination (``ap0``) and source (``ap1``) AP descriptors and dtype codes."""
    desc = APGenerator.Signature(cfg).in_layout
    return data.StructLayout({"opcode": 8, "op": 8, "stream": 4, "d": 8, "dst_dtype": 4,
                              "src_dtype": 4, "dst": desc, "src": desc})


def done_layout():
    """One status per instruction: ``status`` (``E_*``, 0 = done) and ``info``."""
    return data.StructLayout({"status": ERROR_BITS, "info": 32})


def _select(curs, idx):
    """The cursor ``curs[idx]`` (``idx`` a signal) as a dict of muxed fields."""
    if len(curs) == 1:
        return curs[0]
    return {f: Array([c[f] for c in curs])[idx] for f in curs[0]}


class CollectiveEngine(wiring.Component):
    """Runs all-reduce, reduce-scatter and all-gather (add / max / min; FP32, BF16, FP16 in and
    out for reductions, those and FP8 for the gather) on a ring of ``cfg.ring_size`` ranks.

    Per instruction, in order (the golden's checks, ``golden/isasim/collective_engine.py``):
    ``E_OPCODE`` (info :data:`INFO_NOT_BUILT`) for all_to_all and send_recv (not built);
    ``E_OPCODE`` a reduce ``op`` other than add/max/min; ``E_FORMAT`` (info the slot: 1 source,
    0 destination) a dtype outside the op's list or a gather whose destination dtype is not the
    source's (info 0); the destination's then the source's AP check
    (:class:`rtl.mem.ap.APGenerator`'s code, info the slot); ``E_AP_FORM`` (info the slot) an
    AP the engine does not walk: in PSUM, or with a second free dimension (``dims[1].num !=
    0``); ``E_SHAPE`` a destination size that is not the table's. Then the ring schedule runs;
    ``E_LINK`` (info the port's ``LINK_FAULTS`` kind) when a link port reports an error, and
    ``E_SHAPE`` (info the sending rank) when a received flit is not the chunk or segment end
    this rank expects (ranks that disagree on the size). After an error the engine drops what
    is in flight and writes nothing more.

    Parameters
    ----------
    cfg : CoreConfig
        ``ring_size`` (1: a local copy, as the golden's ring of one), ``link_bits`` (>= 32:
        ``link_bits / 32`` elements per flit), ``link_credits`` (segments of
        ``link_credits - 1`` flits).

    Members
    -------
    instr : In(stream.Signature(instr_layout(cfg)))
    done : Out(stream.Signature(done_layout()))
    rank : In(link_src_bits)
    rd, wr : Out(RowPort.Signature(cfg, "sbuf"))
    tx : Out(stream.Signature(payload_layout(cfg)))
    rx : In(stream.Signature(payload_layout(cfg))).array(LINK_VCS)
    rx_expect : Out(1)
        Waiting for a flit with none received (the RX port's silence watchdog).
    link_err : In(1); link_info : In(8)
    busy : Out(1)

    After elaboration ``probe`` maps names to internal signals (issue, read, RX, write and TX
    handshakes) for a testbench's stall profile (:mod:`tb.collective.stall`).
    """

    class Signature(wiring.Signature):
        """Members, ``seg`` (elements per segment) and ``latency`` (issue to result) of a
        :class:`CollectiveEngine`."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "CollectiveEngine")
            self.seg = max(1, cfg.link_credits - 1)
            self.slots = cfg.link_bits // LANE_BITS
            self.latency = 2 + LaneALU.Signature(cfg).latency + 3
            pl = payload_layout(cfg)
            super().__init__({
                "instr": In(stream.Signature(instr_layout(cfg))),
                "done": Out(stream.Signature(done_layout())),
                "rank": In(cfg.link_src_bits),
                "rd": Out(RowPort.Signature(cfg, "sbuf")),
                "wr": Out(RowPort.Signature(cfg, "sbuf")),
                "tx": Out(stream.Signature(pl)),
                "rx": In(stream.Signature(pl)).array(LINK_VCS),
                "rx_expect": Out(1), "link_err": In(1), "link_info": In(8), "busy": Out(1),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        n, P = cfg.ring_size, cfg.partitions
        K = sig.slots
        lg = (n - 1).bit_length()
        ins = Signal(instr_layout(cfg))
        kind = Signal(2)
        alu_op = Signal(5)
        status, info = Signal(ERROR_BITS), Signal(32)
        clr = Signal()                              # drops everything in flight

        # ---- the AP check: an APGenerator, reset once it has answered ----------------------
        apchk = APCheck(m, cfg)

        # ---- sizes and chunks ---------------------------------------------------------------
        def elems(d):
            return d.count * d.dims[0].num
        ns, nd = Signal(_W), Signal(_W)
        m.d.comb += [ns.eq(elems(ins.src)), nd.eq(elems(ins.dst))]
        q, r = Signal(_W), Signal(max(1, lg))
        m.d.comb += [q.eq(ns >> lg), r.eq(ns & (n - 1) if n > 1 else 0)]

        def elem_len(c):
            return Mux(kind == KIND_AG, ns, q + (c < r) if n > 1 else q)

        # packing: ``packed`` (every chunk whole partitions: K elements of K partitions per
        # flit) or one element per flit; ``flen`` a packed chunk's flits
        packed = Signal()
        mparts = Signal(range(P + 1))
        # a gather into rows ``2**rsh`` times the source's: a flit's slots are source partitions
        # ``2**rsh`` apart, ``K`` rows of the destination at one index (one row write); the
        # packed walk runs over "rows" of ``vper`` elements (``2**rsh`` source partitions)
        RSH = max(1, (P - 1).bit_length() + 1)
        rsh = Signal(range(RSH))
        vper = Signal(16)
        flen = Signal(_W)
        keff = Signal(range(K + 1))
        m.d.comb += keff.eq(Mux(packed, K, 1))

        def chunk_len(c):
            return Mux(packed, flen, elem_len(c))

        def chunk_lo(c):
            return c * q + Mux(c < r, c, r) if n > 1 else Const(0, 1)
        rank = self.rank if n > 1 else Const(0, 1)
        own_len = Signal(_W)
        m.d.comb += own_len.eq(elem_len(rank))
        max_len = Signal(_W)
        m.d.comb += max_len.eq(Mux(packed, flen, Mux(kind == KIND_AG, ns, q + (r != 0))))

        # ---- cursors: per chunk, the source and destination position ----------------------
        # (partition p, element j of it, byte address a); ``rem`` while dividing at the start
        def cursor(nm):
            return {"p": Signal(range(P + 1), name=f"{nm}_p"), "j": Signal(16, name=f"{nm}_j"),
                    "a": Signal(cfg.ap_addr_bits, name=f"{nm}_a"),
                    "rem": Signal(_W, name=f"{nm}_rem")}
        src_c = [cursor(f"src{c}") for c in range(n)]
        # destination: one cursor per chunk and flit slot (slot s of a packed flit is element
        # j of the block's partition s), the flits written in the chunk's current block
        # (``wj``) and the partitions left (``wrem``)
        dst_c = [[cursor(f"dst{c}_{k}") for k in range(K)] for c in range(n)]
        wj = [Signal(16, name=f"wj{c}") for c in range(n)]
        wrem = [Signal(range(P + 1), name=f"wrem{c}") for c in range(n)]
        # the jump of a slot cursor from one block to the next: (K - 1) source rows in
        # destination partitions, elements and bytes; ``wrap_a`` the bytes of a destination row
        dl = cursor("dl")
        dl_a, wrap_a = Signal(cfg.ap_addr_bits), Signal(cfg.ap_addr_bits)
        sper, dper = ins.src.dims[0].num, ins.dst.dims[0].num
        fast = Signal()

        def step_src(cur, d, esize):
            e = d.dims[0].num
            q_last = (cur["p"] & ((Const(1, RSH + 1) << rsh) - 1)) == \
                (Const(1, RSH + 1) << rsh) - 1
            inc = Mux(packed & q_last, 1 + (Const(K - 1, K.bit_length()) << rsh), 1)
            with m.If(cur["j"] + 1 >= e):
                m.d.sync += [cur["p"].eq(cur["p"] + inc), cur["j"].eq(0),
                             cur["a"].eq(d.offset)]
            with m.Else():
                m.d.sync += [cur["j"].eq(cur["j"] + 1),
                             cur["a"].eq(cur["a"] + (d.dims[0].step << esize))]

        def step_dst(c):
            d = ins.dst
            bend = wj[c] + 1 >= vper
            with m.If(bend):
                m.d.sync += [wj[c].eq(0), wrem[c].eq(Mux(wrem[c] > keff, wrem[c] - keff, 0))]
            with m.Else():
                m.d.sync += wj[c].eq(wj[c] + 1)
            for cur in dst_c[c]:
                wrap = cur["j"] + 1 >= dper
                j1 = Mux(wrap, 0, cur["j"] + 1)
                p1 = cur["p"] + wrap
                a1 = Mux(wrap, d.offset, cur["a"] + (d.dims[0].step << d.esize))
                j2 = j1 + dl["j"]
                c2 = j2 >= dper
                m.d.sync += [cur["j"].eq(Mux(bend, Mux(c2, j2 - dper, j2), j1)),
                             cur["p"].eq(Mux(bend, p1 + dl["p"] + c2, p1)),
                             cur["a"].eq(Mux(bend, a1 + dl_a - Mux(c2, wrap_a, 0), a1))]

        start = Signal()
        rw = PhaseWalker("rw")                  # source reads
        iw = PhaseWalker("iw")                  # elements
        rw.build(m, n, kind, rank, start, sig.seg, chunk_len, max_len,
                 filt=lambda a: a["own"])
        tw = PhaseWalker("tw")                  # all-reduce's receive-only phase (the tail)
        TP = 2 * n - 2                          # its index

        def is_tail(a):
            return (kind == KIND_AR) & (a["k"] == TP) if n > 1 else Const(0, 1)
        iw.build(m, n, kind, rank, start, sig.seg, chunk_len, max_len,
                 count=(lambda a: Mux(kind == KIND_AR, TP, a["count"])) if n > 1 else None)
        tw.build(m, n, kind, rank, start, sig.seg, chunk_len, max_len, filt=is_tail)
        ia, ta_ = iw.attrs, tw.attrs
        # RX order is the upstream's send order: the tail of segment s takes flits once the
        # elements walk has left segment s; the elements walk takes flits of segment s + 1
        # once the tail has taken all of segment s's (its phase 0, own data only, runs beside)
        tail_ok = Signal()
        main_rx_ok = Signal()
        m.d.comb += [tail_ok.eq(tw.valid & (iw.done | (iw.base > tw.base))),
                     main_rx_ok.eq(tw.done | (tw.base >= iw.base))]

        # ---- source reads -------------------------------------------------------------------
        RD = 4
        pb = max(1, (P - 1).bit_length())
        meta = data.StructLayout({"p": pb, "shift": 2})
        rmeta = m.submodules.rmeta = ResetInserter(clr)(fifo.SyncFIFO(width=meta.size,
                                                                      depth=RD))
        rdata = m.submodules.rdata = ResetInserter(clr)(fifo.SyncFIFO(width=LANE_BITS * P,
                                                                      depth=RD))
        rpend = Signal(range(RD + 1))
        running = Signal()
        rc = _select(src_c, rw.attrs["chunk"])
        rd_p = Signal(range(P + 1))
        rd_a = Signal(cfg.ap_addr_bits)
        m.d.comb += [rd_p.eq(ins.src.start + rc["p"]), rd_a.eq(rc["a"])]
        req = self.rd.req
        spread = Array([Const(sum(1 << (k << x) for k in range(K)) & ((1 << P) - 1), P)
                        for x in range(RSH)])[rsh]
        m.d.comb += [req.valid.eq(running & rw.valid & (rpend < RD)),
                     req.payload.addr.eq(rd_a),
                     req.payload.mask.eq(Mux(packed, spread, 1) << rd_p[:pb]),
                     req.payload.we.eq(0)]
        rd_fire = req.valid & req.ready
        m.d.comb += [rw.step.eq(rd_fire), rmeta.w_en.eq(rd_fire),
                     rmeta.w_data.eq(Cat(rd_p[:pb], rd_a[:2])),
                     rdata.w_en.eq(self.rd.rsp.valid), rdata.w_data.eq(self.rd.rsp.payload)]
        with m.If(rd_fire):
            for c in range(n):
                with m.If(rw.attrs["chunk"] == c if n > 1 else 1):
                    step_src(src_c[c], ins.src, ins.src.esize)
        own_meta = data.View(meta, rmeta.r_data)
        lanes = data.View(data.ArrayLayout(LANE_BITS, P), rdata.r_data)
        own = [Signal(32, name=f"own{k}") for k in range(K)]
        keep = Mux(ins.src.esize == 0, 0xFF, Mux(ins.src.esize == 1, 0xFFFF, 0xFFFFFFFF))
        lane_arr = Array([lanes[p] for p in range(P)])
        for k in range(K):
            lane = (own_meta.p + (Const(k, K.bit_length()) << rsh))[:pb] if P > 1 else 0
            m.d.comb += own[k].eq((lane_arr[lane] >> Cat(Const(0, 3), own_meta.shift)) & keep)
        own_valid = rmeta.r_rdy & rdata.r_rdy

        # ---- received flits -----------------------------------------------------------------
        rxv = Signal()
        rxf = Signal(payload_layout(cfg))
        m.d.comb += [rxv.eq(self.rx[0].valid | self.rx[1].valid),
                     rxf.eq(Mux(self.rx[1].valid, self.rx[1].payload, self.rx[0].payload))]

        # ---- element issue ------------------------------------------------------------------
        LT = sig.latency
        OUTD = LT + 4
        pend = Signal(range(OUTD + 1))
        need_own, need_rx = ia["own"], ia["rx"]
        mismatch = Signal()
        m.d.comb += mismatch.eq(running & rxv & (
            (iw.valid & need_rx & main_rx_ok &
             ((rxf.chunk != ia["chunk"]) | (rxf.last != iw.last))) |
            (tail_ok & ((rxf.chunk != ta_["chunk"]) | (rxf.last != tw.last)))))
        go = Signal()
        m.d.comb += go.eq(running & iw.valid & (pend < OUTD) & (~need_own | own_valid) &
                          (~need_rx | (rxv & main_rx_ok)) & ~mismatch)
        # the tail: received flits to the destination through ``tailq`` (``TQ`` flits;
        # ``tv``: one at its head)
        TQ = OUTD
        tv, tfin, tq_room = Signal(), Signal(), Signal()
        go2 = Signal()
        m.d.comb += go2.eq(running & tail_ok & rxv & ~mismatch & tq_room)
        take_rx = (go & need_rx) | go2
        m.d.comb += [iw.step.eq(go), tw.step.eq(go2),
                     rmeta.r_en.eq(go & need_own), rdata.r_en.eq(go & need_own),
                     self.rx[1].ready.eq(take_rx & self.rx[1].valid),
                     self.rx[0].ready.eq(take_rx & ~self.rx[1].valid),
                     self.rx_expect.eq(running & ~rxv & ((iw.valid & need_rx & main_rx_ok) |
                                                         tail_ok))]
        with m.If(go & need_own & ~rd_fire):
            m.d.sync += rpend.eq(rpend - 1)
        with m.Elif(~(go & need_own) & rd_fire):
            m.d.sync += rpend.eq(rpend + 1)
        # the destination cursors of the chunk written now: the tail's or the elements walk's
        # (never both in one cycle: the walk writes only in phases that take flits)
        wchunk = Signal.like(ia["chunk"])
        m.d.comb += wchunk.eq(Mux(go2, ta_["chunk"], ia["chunk"]))
        wcs = [_select([dst_c[c][k] for c in range(n)], wchunk) for k in range(K)]
        wrem_c = Array(wrem)[wchunk] if n > 1 else wrem[0]
        with m.If((go & ia["wr"]) | go2):
            for c in range(n):
                with m.If(wchunk == c if n > 1 else 1):
                    step_dst(c)

        side = data.StructLayout({"mode": 2, "round": 1, "tx": 1, "wr": 1, "last": 1, "chunk": 8,
                                  "cnt": range(K + 1),
                                  "p": data.ArrayLayout(range(P + 256), K),
                                  "a": data.ArrayLayout(cfg.ap_addr_bits, K),
                                  "raw": data.ArrayLayout(32, K)})
        s0 = Signal(side)
        m.d.comb += [s0.mode.eq(ia["mode"]), s0.round.eq(ia["round"]), s0.tx.eq(ia["tx"]),
                     s0.wr.eq(ia["wr"]), s0.last.eq(iw.last), s0.chunk.eq(ia["chunk"]),
                     s0.cnt.eq(Mux(packed, Mux(wrem_c > K, K, wrem_c), 1))]
        for k in range(K):
            m.d.comb += [s0.p[k].eq(ins.dst.start + wcs[k]["p"]), s0.a[k].eq(wcs[k]["a"]),
                         s0.raw[k].eq(Mux(ia["mode"] == MODE_OWN_RAW, own[k],
                                          rxf.data[32 * k:32 * k + 32]))]
        vchain = Signal(LT)
        m.d.sync += vchain.eq(Cat(go, vchain[:-1]))
        with m.If(clr):
            m.d.sync += vchain.eq(0)

        # widen (2) -> lane ALU -> round (3)
        src_idx = Mux(ins.src_dtype == isa.DTYPE_CODES["fp16"], 1, 0)
        dst_idx = Mux(ins.dst_dtype == isa.DTYPE_CODES["fp16"], 1, 0)
        src32 = ins.src_dtype == isa.DTYPE_CODES["fp32"]
        dst32 = ins.dst_dtype == isa.DTYPE_CODES["fp32"]
        s2 = delay(m, s0, 2, name="s2")
        la = LaneALU.Signature(cfg).latency
        s3 = delay(m, s2, la, name="s3")
        s4 = delay(m, s3, 3, name="s4")
        red = s2.mode == MODE_RED
        raw_mode = (s4.mode == MODE_OWN_RAW) | (s4.mode == MODE_RX_RAW)
        res = []
        for k in range(K):
            wid = m.submodules[f"widen{k}"] = WidenToFP32(cfg, formats=("bf16", "fp16"))
            m.d.comb += [wid.i.valid.eq(go), wid.i.payload.code.eq(own[k]),
                         wid.i.payload.fmt.eq(src_idx)]
            own2 = delay(m, own[k], 2, name=f"own2_{k}")
            rx2 = delay(m, rxf.data[32 * k:32 * k + 32], 2, name=f"rx2_{k}")
            w32 = Mux(src32, own2, wid.o.payload.x)
            alu = m.submodules[f"alu{k}"] = LaneALU(cfg)
            m.d.comb += [alu.i.valid.eq(vchain[1]),
                         alu.i.payload.op.eq(Mux(red, alu_op, ALU_BYPASS)),
                         alu.i.payload.x.eq(Mux(red, rx2, w32)), alu.i.payload.y.eq(w32),
                         alu.i.payload.c.eq(0)]
            cvt = m.submodules[f"cvt{k}"] = ConvertFromFP32(cfg, formats=("bf16", "fp16"))
            m.d.comb += [cvt.i.valid.eq(vchain[1 + la] if la else vchain[1]),
                         cvt.i.payload.x.eq(alu.o.payload.r), cvt.i.payload.fmt.eq(dst_idx),
                         cvt.i.payload.sr.eq(0)]
            r4 = delay(m, alu.o.payload.r, 3, name=f"r4_{k}")
            res.append(Mux(raw_mode, s4.raw[k], Mux(s4.round & ~dst32, cvt.o.payload.code, r4)))

        outl = data.StructLayout({"v": data.ArrayLayout(32, K), "tx": 1, "wr": 1, "last": 1,
                                  "chunk": 8, "cnt": range(K + 1),
                                  "p": data.ArrayLayout(range(P + 256), K),
                                  "a": data.ArrayLayout(cfg.ap_addr_bits, K)})
        of = m.submodules.out = ResetInserter(clr)(fifo.SyncFIFO(width=outl.size, depth=OUTD))
        o_in = Signal(outl)
        m.d.comb += [o_in.v.eq(Cat(*res)), o_in.tx.eq(s4.tx), o_in.wr.eq(s4.wr),
                     o_in.last.eq(s4.last), o_in.chunk.eq(s4.chunk), o_in.cnt.eq(s4.cnt),
                     o_in.p.eq(s4.p), o_in.a.eq(s4.a),
                     of.w_en.eq(vchain[LT - 1]), of.w_data.eq(o_in)]
        o = data.View(outl, of.r_data)
        tx, wr = self.tx, self.wr.req
        ov = of.r_rdy & running
        kb = max(1, (K - 1).bit_length())

        def write_of(v, cnt, ps, as_, sl):
            """The write port's payload for slot ``sl`` of a flit (all slots when ``fast``)
            and whether this write is its last."""
            last_sl = fast | (sl + 1 >= cnt)
            sel = Mux(fast, 0, sl)[:kb]
            a_sel = Array(list(as_))[sel] if K > 1 else as_[0]
            p_sel = Array(list(ps))[sel] if K > 1 else ps[0]
            v_sel = Array(list(v))[sel] if K > 1 else v[0]
            fmask = Signal(P)
            m.d.comb += fmask.eq(Cat(*[(k < cnt) for k in range(K)]) << ps[0][:pb])
            sh = a_sel[:2]
            ones = Mux(ins.dst.esize == 0, 0b0001, Mux(ins.dst.esize == 1, 0b0011, 0b1111))
            wd = []
            for p in range(P):
                vp = Array(list(v))[(p - ps[0])[:kb]] if K > 1 else v[0]
                wd.append((Mux(fast, vp, v_sel) << Cat(Const(0, 3), sh))[:LANE_BITS])
            return ({"addr": a_sel, "mask": Mux(fast, fmask, 1 << p_sel[:pb]),
                     "be": (ones << sh)[:4], "wdata": wd}, last_sl)

        # the write port: the elements' head flit first (it holds the port only while it
        # writes: once written, ``wdone``, it waits for TX with the port free), then the tail
        wdone = Signal()
        ew = Signal()
        m.d.comb += ew.eq(ov & o.wr & ~wdone)
        t_port = tv & ~ew
        # the tail's flits (raw codes, slot count, destination positions) wait in ``tailq``,
        # so the tail takes its flits from RX while the elements' last writes hold the port
        tl = data.StructLayout({"v": data.ArrayLayout(32, K), "cnt": range(K + 1),
                                "p": data.ArrayLayout(range(P + 256), K),
                                "a": data.ArrayLayout(cfg.ap_addr_bits, K)})
        tq = m.submodules.tailq = ResetInserter(clr)(fifo.SyncFIFO(width=tl.size, depth=TQ))
        tq_in = Signal(tl)
        m.d.comb += [tq_in.v.eq(rxf.data), tq_in.cnt.eq(s0.cnt), tq_in.p.eq(s0.p),
                     tq_in.a.eq(s0.a), tq.w_en.eq(go2), tq.w_data.eq(tq_in),
                     tq_room.eq(tq.w_rdy), tv.eq(tq.r_rdy)]
        th = data.View(tl, tq.r_data)
        tsl = Signal(range(K + 1))
        tw_pl, t_last = write_of([th.v[k] for k in range(K)], th.cnt,
                                 [th.p[k] for k in range(K)], [th.a[k] for k in range(K)], tsl)
        with m.If(tfin | clr):
            m.d.sync += tsl.eq(0)
        with m.Elif(t_port & wr.ready):
            m.d.sync += tsl.eq(tsl + 1)
        m.d.comb += [tfin.eq(t_port & running & wr.ready & t_last), tq.r_en.eq(tfin)]

        # the elements' flits: the write port first
        sl = Signal(range(K + 1))
        o_v = [o.v[k] for k in range(K)]
        ow_pl, last_sl = write_of(o_v, o.cnt, [o.p[k] for k in range(K)],
                                  [o.a[k] for k in range(K)], sl)
        wpl = {f: Mux(ew, ow_pl[f], tw_pl[f]) for f in ("addr", "mask", "be")}
        wrdy = wr.ready & ew
        written = ~o.wr | wdone | (wrdy & last_sl)
        m.d.comb += [wr.valid.eq(running & (tv | ew)),
                     wr.payload.addr.eq(wpl["addr"]), wr.payload.we.eq(1),
                     wr.payload.mask.eq(wpl["mask"]), wr.payload.be.eq(wpl["be"]),
                     tx.valid.eq(ov & o.tx & written),
                     tx.payload.data.eq(o.v), tx.payload.src.eq(rank),
                     tx.payload.last.eq(o.last), tx.payload.stream.eq(ins.stream),
                     tx.payload.chunk.eq(o.chunk)]
        for p in range(P):
            m.d.comb += wr.payload.wdata[p].eq(Mux(ew, ow_pl["wdata"][p], tw_pl["wdata"][p]))
        pop = ov & written & (~o.tx | tx.ready)
        m.d.comb += of.r_en.eq(pop)
        with m.If(clr | pop):
            m.d.sync += [sl.eq(0), wdone.eq(0)]
        with m.Elif(wrdy & last_sl):
            m.d.sync += wdone.eq(1)
        with m.Elif(wrdy):
            m.d.sync += sl.eq(sl + 1)
        with m.If(clr):
            m.d.sync += pend.eq(0)
        with m.Elif(go & ~pop):
            m.d.sync += pend.eq(pend + 1)
        with m.Elif(~go & pop):
            m.d.sync += pend.eq(pend - 1)

        # ---- control ------------------------------------------------------------------------
        opc = ins.opcode
        is_ar = opc == isa.OP_ALL_REDUCE
        is_rs = opc == isa.OP_REDUCE_SCATTER
        is_ag = opc == isa.OP_ALL_GATHER
        reducing = is_ar | is_rs
        red_ok = (ins.op == ALU_ADD) | (ins.op == ALU_MAX) | (ins.op == ALU_MIN)
        move_dt = MOVE_DTYPES
        red_dt = ("fp32", "bf16", "fp16")
        drain = Signal(range(LT + 4))
        m.d.comb += self.done.payload.status.eq(status)
        m.d.comb += self.done.payload.info.eq(info)

        def fail(code, inf, nxt="REPORT"):
            m.d.sync += [status.eq(code), info.eq(inf)]
            m.next = nxt

        with m.FSM(name="cc"):
            with m.State("IDLE"):
                m.d.comb += self.instr.ready.eq(1)
                with m.If(self.instr.valid):
                    m.d.sync += [ins.eq(self.instr.payload), status.eq(0), info.eq(0)]
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [kind.eq(Mux(is_ar, KIND_AR, Mux(is_rs, KIND_RS, KIND_AG))),
                             alu_op.eq(ins.op)]
                with m.If(~(reducing | is_ag)):
                    fail(E_OPCODE, INFO_NOT_BUILT)
                with m.Elif(reducing & ~red_ok):
                    fail(E_OPCODE, 0)
                with m.Elif(Mux(reducing, ~dtype_in(ins.src_dtype, red_dt),
                                ~dtype_in(ins.src_dtype, move_dt))):
                    fail(E_FORMAT, 1)
                with m.Elif(Mux(reducing, ~dtype_in(ins.dst_dtype, red_dt),
                                ~dtype_in(ins.dst_dtype, move_dt))):
                    fail(E_FORMAT, 0)
                with m.Elif(is_ag & (ins.dst_dtype != ins.src_dtype)):
                    fail(E_FORMAT, 0)
                with m.Else():
                    m.next = "CHK_DST"
            apchk.states(m, ins, self.busy, fail, "FORM")
            with m.State("FORM"):
                m.d.comb += self.busy.eq(1)
                multi_d = Cat(*[ins.dst.dims[k].num != 0 for k in range(1, cfg.ap_dims)],
                              ins.dst.mem != MEM_SBUF).any()
                multi_s = Cat(*[ins.src.dims[k].num != 0 for k in range(1, cfg.ap_dims)],
                              ins.src.mem != MEM_SBUF).any()
                want = Mux(is_ag, ns * n, Mux(is_rs, own_len, ns))
                with m.If(multi_d):
                    fail(E_AP_FORM, 0)
                with m.Elif(multi_s):
                    fail(E_AP_FORM, 1)
                with m.Elif(nd != want):
                    fail(E_SHAPE, 0)
                with m.Else():
                    # the gather's stride: the destination rows 2**x times the source's and
                    # the source partitions a multiple of 2**x
                    rs_c = Const(0, range(RSH))
                    if K > 1:
                        for x in range(1, RSH):
                            rs_c = Mux((kind == KIND_AG) & (dper == (sper << x)) &
                                       ((ins.src.count & ((1 << x) - 1)) == 0), x, rs_c)
                    vp_c = Mux(rs_c != 0, dper, sper)
                    m.d.sync += [rsh.eq(rs_c), vper.eq(vp_c)]
                    for c in range(n):
                        lo = chunk_lo(c)
                        m.d.sync += [src_c[c]["rem"].eq(Mux(kind == KIND_AG, 0, lo)),
                                     src_c[c]["p"].eq(0), wj[c].eq(0)]
                        base = Mux(kind == KIND_AG, c * ns, Mux(kind == KIND_RS, 0, lo))
                        for k, cur in enumerate(dst_c[c]):
                            m.d.sync += [cur["rem"].eq(base + k * vp_c), cur["p"].eq(0)]
                    m.next = "DIVIDE"
            with m.State("DIVIDE"):
                m.d.comb += self.busy.eq(1)
                left = []
                curs_all = [(cur, ins.src) for cur in src_c] + \
                           [(cur, ins.dst) for cc in dst_c for cur in cc]
                for cur, d in curs_all:
                    e = d.dims[0].num
                    big = cur["rem"] >= e
                    left.append(big)
                    with m.If(big):
                        m.d.sync += [cur["rem"].eq(cur["rem"] - e), cur["p"].eq(cur["p"] + 1)]
                with m.If(~Cat(*left).any()):
                    for cur, d in curs_all:
                        m.d.sync += [cur["j"].eq(cur["rem"]),
                                     cur["a"].eq(d.offset + ((cur["rem"][:16] * d.dims[0].step)
                                                             << d.esize))]
                    m.next = "PACK"
            with m.State("PACK"):
                # packed when every chunk is whole source partitions (a gather's always)
                m.d.comb += self.busy.eq(1)
                whole = Const(1, 1) if n == 1 else ((r == 0) & (src_c[1]["j"] == 0))
                pk = (kind == KIND_AG) | whole
                mp = ins.src.count if n == 1 else Mux(kind == KIND_AG, ins.src.count,
                                                      src_c[1]["p"])
                lk = (K - 1).bit_length()
                rows = mp >> rsh                 # packed "rows" of vper elements
                m.d.sync += [packed.eq(pk), mparts.eq(mp),
                             flen.eq(((rows + K - 1) >> lk) * vper),
                             fast.eq(pk & (dper == vper)),
                             dl["rem"].eq(Mux(pk, (K - 1) * vper, 0)), dl["p"].eq(0),
                             wrap_a.eq((dper * ins.dst.dims[0].step) << ins.dst.esize)]
                for c in range(n):
                    m.d.sync += wrem[c].eq(rows)
                m.next = "JUMP"
            with m.State("JUMP"):
                m.d.comb += self.busy.eq(1)
                with m.If(dl["rem"] >= dper):
                    m.d.sync += [dl["rem"].eq(dl["rem"] - dper), dl["p"].eq(dl["p"] + 1)]
                with m.Else():
                    m.d.sync += [dl["j"].eq(dl["rem"]),
                                 dl_a.eq((dl["rem"][:16] * ins.dst.dims[0].step)
                                         << ins.dst.esize)]
                    m.next = "START"
            with m.State("START"):
                m.d.comb += [self.busy.eq(1), start.eq(1)]
                m.d.sync += [running.eq(1), rpend.eq(0)]
                m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(self.link_err):
                    m.d.sync += running.eq(0)
                    fail(E_LINK, self.link_info, "DRAIN")
                with m.Elif(mismatch):
                    m.d.sync += running.eq(0)
                    fail(E_SHAPE, rxf.src, "DRAIN")
                with m.Elif(iw.done & tw.done & rw.done & (pend == 0) & ~tv):
                    m.d.sync += running.eq(0)
                    m.next = "REPORT"
            with m.State("DRAIN"):
                # let the pipeline and the reads in flight empty, then drop them
                m.d.comb += self.busy.eq(1)
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == LT + 2):
                    m.d.comb += clr.eq(1)
                    m.d.sync += drain.eq(0)
                    m.next = "REPORT"
            with m.State("REPORT"):
                m.d.comb += [self.busy.eq(1), self.done.valid.eq(1)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
        # internal signals a testbench samples to tell why TX is idle (amaranth.sim only)
        self.probe = {"running": running, "go": go, "iw_valid": iw.valid, "k": ia["k"],
                      "need_own": need_own, "own_valid": own_valid, "need_rx": need_rx,
                      "rxv": rxv, "main_rx_ok": main_rx_ok, "pend_full": pend >= OUTD,
                      "rd_valid": req.valid, "rd_ready": req.ready, "wr_valid": wr.valid,
                      "wr_ready": wr.ready, "ov": ov, "o_tx": o.tx, "o_wr": o.wr,
                      "wdone": wdone, "go2": go2, "tv": tv}
        return m
