# SPDX-License-Identifier: Apache-2.0
"""The permute engine: the CC queue's two data-movement collectives, ``all_to_all`` (0x63) and
``send_recv`` (0x64) of ``rtl/isa.py``, on a unidirectional ring of ``cfg.ring_size`` cores
(docs/collectives.md §14.6).

It reads its source through its own SBUF row port (``rd``), one flit's elements a cycle in
order, and sends every flit whose destination is another rank (``tx``, the TX port's injection
input); a flit for this rank (all-to-all's own block, ``send_recv`` with ``d = 0``) is written
straight to the destination (``wr``). A flit carries K = ``link_bits / 32`` elements, of K
source partitions at one free index, when every block is whole source partitions and the
destination has the source's free size (**packed**: one row read, one masked row write);
otherwise one element. All-to-all reads its other blocks nearest destination first and its own
block on a second read stream. Received flits (``rx``) are routed by their header: ``chunk`` is
the destination rank, ``src`` the rank whose source the flit came from, ``last`` marks the last
flit of that rank's block for that destination. A flit for this rank is written at the next
position of its origin's block of the destination; any other flit is forwarded unchanged. Codes move unchanged, so the destination holds the bytes of
:func:`golden.collective.algos.all_to_all` / :func:`golden.collective.algos.permute`.

Deadlock freedom is **bubble flow control**: a forwarded flit needs one credit of the next link,
an injected flit two (``tx_credit``), so the ring's links never hold more than
``n * link_credits - 1`` flits and the link whose buffer has room always lets its upstream rank
move (docs/collectives.md §14.6 gives the argument).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl import isa
from rtl.collective.engine import done_layout, instr_layout
from rtl.collective.checks import MOVE_DTYPES, APCheck, dtype_in
from rtl.collective.link import payload_layout
from rtl.config import LANE_BITS, LINK_VCS, CoreConfig, check_config
from rtl.isa import E_AP_FORM, E_FORMAT, E_LINK, E_OPCODE, E_SHAPE, ERROR_BITS, MEM_SBUF
from rtl.mem.port import RowPort

__all__ = ["PermuteEngine", "PERMUTE_OPS"]

#: CC opcodes the permute engine runs (the others go to
#: :class:`rtl.collective.engine.CollectiveEngine`).
PERMUTE_OPS = ("all_to_all", "send_recv")
_W = 28                                  # element counts and indices


class PermuteEngine(wiring.Component):
    """Runs ``all_to_all`` and ``send_recv`` (FP32, BF16, FP16 and the FP8 formats, codes
    moved unchanged) on a ring of ``cfg.ring_size`` ranks, K = ``link_bits / 32`` elements a
    flit when packed (every block whole source partitions, the destination of the source's free
    size), one otherwise.

    Per instruction, in order (the golden's checks, ``golden/isasim/collective_engine.py``):
    ``E_OPCODE`` (info 0) an opcode other than all_to_all / send_recv; ``E_SHAPE`` a send_recv
    ``d >= n``; ``E_FORMAT`` (info the slot: 1 source, 0 destination) a dtype that is not FP32,
    BF16, FP16 or FP8, then a destination dtype that is not the source's (info 0); the
    destination's then the source's AP check (:class:`rtl.mem.ap.APGenerator`'s code, info the
    slot); ``E_AP_FORM`` (info the slot) an AP the engine does not walk (PSUM, or a second free
    dimension); ``E_SHAPE`` an all_to_all source that is not a multiple of ``n``; ``E_SHAPE`` a
    destination size other than the source's. While running: ``E_LINK`` (info the port's
    ``LINK_FAULTS`` kind) on a link error, ``E_SHAPE`` (info the flit's ``src``) on a flit that
    is not on its way from its origin to its destination through this rank, or that overruns or
    ends its origin's block at another length than this rank's (ranks that disagree on the
    size). After an error nothing more is written or sent.

    Parameters
    ----------
    cfg : CoreConfig
        ``ring_size`` (1: a local copy), ``link_bits`` (K = ``link_bits / 32`` slots a flit),
        ``link_credits``.

    Members
    -------
    instr : In(stream.Signature(instr_layout(cfg)))
    done : Out(stream.Signature(done_layout()))
    rank : In(link_src_bits)
    rd, wr : Out(RowPort.Signature(cfg, "sbuf"))
    tx : Out(stream.Signature(payload_layout(cfg)))
        Flits into the TX port's injection input, forwarded ones included.
    tx_credit : In(range(link_credits + 1))
        The TX port's credit counter of the virtual channel ``tx`` feeds: a flit is injected
        only with two credits (bubble flow control), a flit is forwarded with one.
    rx : In(stream.Signature(payload_layout(cfg))).array(LINK_VCS)
    rx_expect : Out(1)
        Flits of this collective still to arrive and none offered (the RX silence watchdog).
    link_err : In(1); link_info : In(8)
    busy : Out(1)
    """

    class Signature(wiring.Signature):
        """Members and ``latency`` (a source element's read request to its write or flit, with
        nothing stalling) of a :class:`PermuteEngine`."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PermuteEngine")
            self.latency = 2
            pl = payload_layout(cfg)
            super().__init__({
                "instr": In(stream.Signature(instr_layout(cfg))),
                "done": Out(stream.Signature(done_layout())),
                "rank": In(cfg.link_src_bits),
                "rd": Out(RowPort.Signature(cfg, "sbuf")),
                "wr": Out(RowPort.Signature(cfg, "sbuf")),
                "tx": Out(stream.Signature(pl)),
                "tx_credit": In(range(cfg.link_credits + 1)),
                "rx": In(stream.Signature(pl)).array(LINK_VCS),
                "rx_expect": Out(1), "link_err": In(1), "link_info": In(8), "busy": Out(1),
            })

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        n, P = cfg.ring_size, cfg.partitions
        K = cfg.link_bits // LANE_BITS                    # slots a flit (a power of two)
        kb = (K - 1).bit_length()
        lg = (n - 1).bit_length()
        mask = n - 1
        pb = max(1, (P - 1).bit_length())
        rb = max(1, lg)
        ins = Signal(instr_layout(cfg))
        status, info = Signal(ERROR_BITS), Signal(32)
        clr = Signal()
        running = Signal()
        rank = self.rank[:rb] if n > 1 else Const(0, 1)
        is_a2a = ins.opcode == isa.OP_ALL_TO_ALL
        d = ins.d

        # ---- the AP check (as CollectiveEngine) ---------------------------------------------
        apchk = APCheck(m, cfg)

        # ---- sizes --------------------------------------------------------------------------
        ns, nd = Signal(_W), Signal(_W)
        m.d.comb += [ns.eq(ins.src.count * ins.src.dims[0].num),
                     nd.eq(ins.dst.count * ins.dst.dims[0].num)]
        blk = Signal(_W)                                  # one origin's block
        m.d.comb += blk.eq(Mux(is_a2a, ns >> lg, ns))
        # packing (K > 1): every block whole source partitions and the destination of the
        # source's free size -> a flit carries K elements of K partitions at one free index
        # and lands in one masked row write; otherwise one element a flit
        F = ins.src.dims[0].num
        packed = Signal()
        m.d.comb += packed.eq((K > 1) & (ins.dst.dims[0].num == F)
                              & (~is_a2a | ((ins.src.count & mask) == 0)))
        bp = Signal(range(P + 1))                         # a packed block's partitions
        m.d.comb += bp.eq(Mux(is_a2a, ins.src.count >> lg, ins.src.count))
        blkf = Signal(_W)                                 # one origin's block, in flits
        m.d.comb += blkf.eq(Mux(packed, ((bp + K - 1) >> kb) * F, blk))
        # the source's reads: all-to-all's other blocks on the main stream, its own block on a
        # stream of its own (``loc``) that takes the read port when the main one does not
        tot = Signal(_W)                                  # main-stream flits (reads)
        m.d.comb += tot.eq(Mux(is_a2a, (blkf << lg) - blkf, blkf))
        ltot = Signal(_W)                                 # own-block reads (all_to_all)
        m.d.comb += ltot.eq(Mux(is_a2a, blkf, 0))
        rx_left, fwd_left = Signal(_W + 6), Signal(_W + 6)   # flits still to write / forward

        # ---- cursors: (partition, element, byte address); ``rem`` while placing -------------
        def cursor(nm):
            return {"p": Signal(range(P + 1), name=f"{nm}_p"), "j": Signal(16, name=f"{nm}_j"),
                    "a": Signal(cfg.ap_addr_bits, name=f"{nm}_a"),
                    "rem": Signal(_W, name=f"{nm}_rem"),
                    "g": Signal(range(P + K), name=f"{nm}_g")}   # packed: rows into the block
        src_c = cursor("src")
        loc_c = cursor("loc")                             # all_to_all's own block
        dst_c = [cursor(f"dst{o}") for o in range(n)]     # per origin rank

        def step_cursor(cur, desc):
            # packed: the next K rows of the block after the last free index, the next block
            # after its last row group (the source; a destination cursor has one block)
            with m.If(cur["j"] + 1 >= desc.dims[0].num):
                m.d.sync += [cur["j"].eq(0), cur["a"].eq(desc.offset)]
                with m.If(~packed):
                    m.d.sync += cur["p"].eq(cur["p"] + 1)
                with m.Elif(cur["g"] + K >= bp):
                    m.d.sync += [cur["p"].eq(cur["p"] + bp - cur["g"]), cur["g"].eq(0)]
                with m.Else():
                    m.d.sync += [cur["p"].eq(cur["p"] + K), cur["g"].eq(cur["g"] + K)]
            with m.Else():
                m.d.sync += [cur["j"].eq(cur["j"] + 1),
                             cur["a"].eq(cur["a"] + (desc.dims[0].step << desc.esize))]

        # ---- source reads: block by block; all-to-all's own block on its own stream --------
        RD = 4
        meta = data.StructLayout({"p": pb, "shift": 2, "dest": rb, "last": 1})
        nv_rd = Signal(range(K + 1))                      # the flit's elements (rows)
        m.d.comb += nv_rd.eq(Mux(packed, Mux(bp - src_c["g"] >= K, K, bp - src_c["g"]), 1))
        rmeta = m.submodules.rmeta = ResetInserter(clr)(fifo.SyncFIFO(width=meta.size,
                                                                      depth=RD))
        rdata = m.submodules.rdata = ResetInserter(clr)(fifo.SyncFIFO(width=LANE_BITS * P,
                                                                      depth=RD))
        lmeta = m.submodules.lmeta = ResetInserter(clr)(fifo.SyncFIFO(width=pb + 2, depth=RD))
        ldata = m.submodules.ldata = ResetInserter(clr)(fifo.SyncFIFO(width=LANE_BITS * P,
                                                                      depth=RD))
        rtag = m.submodules.rtag = ResetInserter(clr)(fifo.SyncFIFO(width=1, depth=2 * RD))
        rpend, lpend = Signal(range(RD + 1)), Signal(range(RD + 1))
        k_loc = Signal(_W)                                # own-block reads requested
        k_rd = Signal(_W)                                 # reads (flits) requested
        e_rd = Signal(_W)                                 # position in the current block
        b_rd = Signal(rb)                                 # blocks read (all_to_all)
        rd_p, lrd_p = Signal(range(P + 1)), Signal(range(P + 1))
        m.d.comb += [rd_p.eq(ins.src.start + src_c["p"]), lrd_p.eq(ins.src.start + loc_c["p"])]
        nv_l = Signal(range(K + 1))
        m.d.comb += nv_l.eq(Mux(packed, Mux(bp - loc_c["g"] >= K, K, bp - loc_c["g"]), 1))
        req = self.rd.req
        main_v = running & (k_rd < tot) & (rpend < RD)
        loc_v = running & ~main_v & (k_loc < ltot) & (lpend < RD)
        m.d.comb += [req.valid.eq(main_v | loc_v),
                     req.payload.addr.eq(Mux(main_v, src_c["a"], loc_c["a"])),
                     req.payload.mask.eq(Mux(main_v, ((1 << nv_rd) - 1) << rd_p[:pb],
                                             ((1 << nv_l) - 1) << lrd_p[:pb])),
                     req.payload.we.eq(0)]
        rd_fire = main_v & req.ready
        lrd_fire = loc_v & req.ready
        # responses come back in request order: the tag says which stream's
        m.d.comb += [rtag.w_en.eq(req.valid & req.ready), rtag.w_data.eq(loc_v),
                     rtag.r_en.eq(self.rd.rsp.valid),
                     lmeta.w_en.eq(lrd_fire), lmeta.w_data.eq(Cat(lrd_p[:pb], loc_c["a"][:2])),
                     ldata.w_en.eq(self.rd.rsp.valid & rtag.r_data),
                     ldata.w_data.eq(self.rd.rsp.payload)]
        with m.If(lrd_fire):
            m.d.sync += k_loc.eq(k_loc + 1)
            step_cursor(loc_c, ins.src)
        # all-to-all reads its blocks nearest destination first (rank + 1, rank + 2, ..., its
        # own last; the source cursor wraps at the source's end): every rank sends blocks of
        # the same distance at the same time, so every link carries the same load in every
        # phase
        dest_rd = Signal(rb)
        if n > 1:
            m.d.comb += dest_rd.eq(Mux(is_a2a, rank + 1 + b_rd, rank + d)[:rb])
        m.d.comb += [rmeta.w_en.eq(rd_fire),
                     rmeta.w_data.eq(Cat(rd_p[:pb], src_c["a"][:2], dest_rd, e_rd + 1 == blkf)),
                     rdata.w_en.eq(self.rd.rsp.valid & ~rtag.r_data),
                     rdata.w_data.eq(self.rd.rsp.payload)]
        with m.If(rd_fire):
            m.d.sync += k_rd.eq(k_rd + 1)
            step_cursor(src_c, ins.src)
            with m.If(e_rd + 1 == blkf):
                m.d.sync += [e_rd.eq(0), b_rd.eq(b_rd + 1)]
                if n > 1:
                    with m.If(is_a2a & (dest_rd == n - 1)):     # the source's end: wrap
                        m.d.sync += [src_c["p"].eq(0), src_c["j"].eq(0), src_c["g"].eq(0),
                                     src_c["a"].eq(ins.src.offset)]
            with m.Else():
                m.d.sync += e_rd.eq(e_rd + 1)
        om = data.View(meta, rmeta.r_data)
        lanes = data.View(data.ArrayLayout(LANE_BITS, P), rdata.r_data)
        # the flit's slots: slot s the element of row p + s (rows past the group: don't care,
        # never written)
        own = [Signal(LANE_BITS, name=f"own{s}") for s in range(K)]
        keep = Mux(ins.src.esize == 0, 0xFF, Mux(ins.src.esize == 1, 0xFFFF, 0xFFFFFFFF))
        lane_a = Array([lanes[p] for p in range(P)])
        for s in range(K):
            m.d.comb += own[s].eq((lane_a[(om.p + s)[:pb]] >> Cat(Const(0, 3), om.shift))
                                  & keep)
        own_v = rmeta.r_rdy & rdata.r_rdy & running
        own_local = om.dest == rank
        lm = data.View(data.StructLayout({"p": pb, "shift": 2}), lmeta.r_data)
        llanes = data.View(data.ArrayLayout(LANE_BITS, P), ldata.r_data)
        llane_a = Array([llanes[p] for p in range(P)])
        lown = [Signal(LANE_BITS, name=f"lown{s}") for s in range(K)]
        for s in range(K):
            m.d.comb += lown[s].eq((llane_a[(lm.p + s)[:pb]] >> Cat(Const(0, 3), lm.shift))
                                   & keep)
        lown_v = lmeta.r_rdy & ldata.r_rdy & running

        # ---- received flits: route by header ------------------------------------------------
        rxv = Signal()
        rxf = Signal(payload_layout(cfg))
        m.d.comb += [rxv.eq(self.rx[0].valid | self.rx[1].valid),
                     rxf.eq(Mux(self.rx[1].valid, self.rx[1].payload, self.rx[0].payload))]
        want_rx = running & ((rx_left != 0) | (fwd_left != 0))
        org = rxf.src[:rb] if n > 1 else Const(0, 1)
        hs = Signal(rb)                                   # hops the flit made
        m.d.comb += hs.eq(rank - org)
        hf = Signal(rb)                                   # hops from origin to destination
        m.d.comb += hf.eq(Mux(is_a2a, (rxf.chunk - org) & mask, d))
        route_ok = (rxf.chunk == ((org + hf) & mask)) & (hs != 0) & (hs <= hf)
        for_me = hs == hf
        cnt = [Signal(_W, name=f"cnt{o}") for o in range(n)]      # written, per origin
        cnt_o = Array(cnt)[org]
        blk_ok = Mux(for_me, (cnt_o < blkf) & (rxf.last == (cnt_o + 1 == blkf)), fwd_left != 0)
        rx_bad = Signal()
        m.d.comb += rx_bad.eq(want_rx & rxv & ~(route_ok & blk_ok))
        rx_ok = want_rx & rxv & ~rx_bad

        # ---- the TX: forwarded flits first, injection with two credits ----------------------
        tx = self.tx
        fwd_v = rx_ok & ~for_me
        inj_v = own_v & ~own_local & ~fwd_v & (self.tx_credit >= 2)
        inj = Signal(payload_layout(cfg))
        m.d.comb += [inj.data.eq(Cat(*own)), inj.src.eq(rank), inj.last.eq(om.last),
                     inj.stream.eq(ins.stream), inj.chunk.eq(om.dest),
                     tx.valid.eq(fwd_v | inj_v),
                     tx.payload.eq(Mux(fwd_v, rxf.as_value(), inj.as_value()))]
        fwd_go = fwd_v & tx.ready
        inj_go = inj_v & tx.ready

        # ---- the SBUF writes: received flits first, then the own block ----------------------
        wr = self.wr.req
        wrx_v = rx_ok & for_me
        wloc_m = own_v & own_local & ~wrx_v               # send_recv d = 0, a ring of one
        wloc_l = lown_v & ~wrx_v & ~wloc_m                # all_to_all's own block
        wloc_v = wloc_m | wloc_l
        wo = Signal(rb)
        m.d.comb += wo.eq(Mux(wrx_v, org, rank))
        wc = {f: Array([c[f] for c in dst_c])[wo] for f in ("p", "a", "g")}
        wp = Signal(range(P + 256))
        m.d.comb += wp.eq(ins.dst.start + wc["p"])
        nv_w = Signal(range(K + 1))                       # rows the write covers
        m.d.comb += nv_w.eq(Mux(packed, Mux(bp - wc["g"] >= K, K, bp - wc["g"]), 1))
        wv = [Signal(LANE_BITS, name=f"wv{s}") for s in range(K)]
        for s in range(K):
            m.d.comb += wv[s].eq(Mux(wrx_v, rxf.data[LANE_BITS * s:LANE_BITS * (s + 1)],
                                     Mux(wloc_l, lown[s], own[s])))
        sh = wc["a"][:2]
        ones = Mux(ins.dst.esize == 0, 0b0001, Mux(ins.dst.esize == 1, 0b0011, 0b1111))
        m.d.comb += [wr.valid.eq(wrx_v | wloc_v), wr.payload.addr.eq(wc["a"]),
                     wr.payload.we.eq(1), wr.payload.mask.eq(((1 << nv_w) - 1) << wp[:pb]),
                     wr.payload.be.eq((ones << sh)[:4])]
        wv_a = Array(wv)
        for p in range(P):                                # row p takes slot p - wp
            slot = wv_a[(p - wp[:pb])[:kb]] if K > 1 else wv[0]
            m.d.comb += wr.payload.wdata[p].eq((slot << Cat(Const(0, 3), sh))[:LANE_BITS])
        w_go = wr.valid & wr.ready
        with m.If(w_go):
            for o in range(n):
                with m.If(wo == o if n > 1 else 1):
                    step_cursor(dst_c[o], ins.dst)
        wrx_go = wrx_v & w_go
        with m.If(wrx_go):
            for o in range(n):
                with m.If(org == o if n > 1 else 1):
                    m.d.sync += cnt[o].eq(cnt[o] + 1)
            m.d.sync += rx_left.eq(rx_left - 1)
        with m.If(fwd_go):
            m.d.sync += fwd_left.eq(fwd_left - 1)
        take_rx = wrx_go | fwd_go
        m.d.comb += [self.rx[1].ready.eq(take_rx & self.rx[1].valid),
                     self.rx[0].ready.eq(take_rx & ~self.rx[1].valid),
                     self.rx_expect.eq(want_rx & ~rxv)]
        pop = inj_go | (wloc_m & w_go)
        lpop = wloc_l & w_go
        m.d.comb += [rmeta.r_en.eq(pop), rdata.r_en.eq(pop),
                     lmeta.r_en.eq(lpop), ldata.r_en.eq(lpop)]
        with m.If(lpop & ~lrd_fire):
            m.d.sync += lpend.eq(lpend - 1)
        with m.Elif(~lpop & lrd_fire):
            m.d.sync += lpend.eq(lpend + 1)
        with m.If(pop & ~rd_fire):
            m.d.sync += rpend.eq(rpend - 1)
        with m.Elif(~pop & rd_fire):
            m.d.sync += rpend.eq(rpend + 1)

        # ---- control ------------------------------------------------------------------------
        drain = Signal(3)
        pk = Signal(range(n + 3))                         # cursor being placed
        m.d.comb += [self.done.payload.status.eq(status), self.done.payload.info.eq(info)]
        # flits this rank writes and forwards: all_to_all (n-1) blocks and sum_{h=2}^{n-1} (h-1);
        # send_recv one block if d > 0 and d - 1 forwarded
        fwd_send = Array([blkf * max(0, k - 1) for k in range(max(2, n))])[d[:rb] if n > 1 else 0]

        def fail(code, inf, nxt="REPORT"):
            m.d.sync += [status.eq(code), info.eq(inf)]
            m.next = nxt

        with m.FSM(name="perm"):
            with m.State("IDLE"):
                m.d.comb += self.instr.ready.eq(1)
                with m.If(self.instr.valid):
                    m.d.sync += [ins.eq(self.instr.payload), status.eq(0), info.eq(0)]
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += self.busy.eq(1)
                with m.If(~is_a2a & (ins.opcode != isa.OP_SEND_RECV)):
                    fail(E_OPCODE, 0)
                with m.Elif(~is_a2a & (d >= n)):
                    fail(E_SHAPE, 0)
                with m.Elif(~dtype_in(ins.src_dtype, MOVE_DTYPES)):
                    fail(E_FORMAT, 1)
                with m.Elif(~dtype_in(ins.dst_dtype, MOVE_DTYPES) | (ins.dst_dtype != ins.src_dtype)):
                    fail(E_FORMAT, 0)
                with m.Else():
                    m.next = "CHK_DST"
            apchk.states(m, ins, self.busy, fail, "FORM")
            with m.State("FORM"):
                m.d.comb += self.busy.eq(1)

                def multi(desc):
                    return Cat(*[desc.dims[k].num != 0 for k in range(1, cfg.ap_dims)],
                               desc.mem != MEM_SBUF).any()
                with m.If(multi(ins.dst)):
                    fail(E_AP_FORM, 0)
                with m.Elif(multi(ins.src)):
                    fail(E_AP_FORM, 1)
                with m.Elif(is_a2a & ((ns & mask) != 0)):
                    fail(E_SHAPE, 0)
                with m.Elif(nd != ns):
                    fail(E_SHAPE, 0)
                with m.Else():
                    m.d.sync += [src_c["rem"].eq(Mux(is_a2a, blk * ((rank + 1) & mask), 0)),
                                 src_c["p"].eq(0), src_c["g"].eq(0),
                                 loc_c["rem"].eq(Mux(is_a2a, blk * rank, 0)),
                                 loc_c["p"].eq(0), loc_c["g"].eq(0), k_loc.eq(0), lpend.eq(0)]
                    for o in range(n):
                        m.d.sync += [dst_c[o]["rem"].eq(Mux(is_a2a, blk * o, 0)),
                                     dst_c[o]["p"].eq(0), dst_c[o]["g"].eq(0), cnt[o].eq(0)]
                    m.d.sync += [
                        rx_left.eq(Mux(is_a2a, blkf * (n - 1), Mux(d != 0, blkf, 0))),
                        fwd_left.eq(Mux(is_a2a, blkf * ((n - 1) * (n - 2) // 2), fwd_send)),
                        k_rd.eq(0), e_rd.eq(0), b_rd.eq(0), rpend.eq(0), pk.eq(0)]
                    m.next = "DIVIDE"
            with m.State("DIVIDE"):
                # each cursor's element index -> (partition, element) by repeated subtraction
                m.d.comb += self.busy.eq(1)
                left = []
                for cur, desc in [(src_c, ins.src), (loc_c, ins.src)] + [(c, ins.dst)
                                                                         for c in dst_c]:
                    big = (cur["rem"] >= desc.dims[0].num) & (cur["rem"] != 0)
                    left.append(big)
                    with m.If(big):
                        m.d.sync += [cur["rem"].eq(cur["rem"] - desc.dims[0].num),
                                     cur["p"].eq(cur["p"] + 1)]
                with m.If(~Cat(*left).any()):
                    m.next = "PLACE"
            with m.State("PLACE"):
                # one shared multiplier: the byte address of one cursor a cycle
                m.d.comb += self.busy.eq(1)
                curs = [(src_c, ins.src), (loc_c, ins.src)] + [(c, ins.dst) for c in dst_c]
                rem = Array([c["rem"][:16] for c, _ in curs])[pk]
                prod = Signal(32)
                is_src = pk <= 1
                m.d.comb += prod.eq(rem * Mux(is_src, ins.src.dims[0].step, ins.dst.dims[0].step))
                for k, (cur, desc) in enumerate(curs):
                    with m.If(pk == k):
                        m.d.sync += [cur["j"].eq(cur["rem"]),
                                     cur["a"].eq(desc.offset + (prod << desc.esize))]
                m.d.sync += pk.eq(pk + 1)
                with m.If(pk == len(curs) - 1):
                    m.d.sync += running.eq(1)
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(self.link_err):
                    m.d.sync += running.eq(0)
                    fail(E_LINK, self.link_info, "DRAIN")
                with m.Elif(rx_bad):
                    m.d.sync += running.eq(0)
                    fail(E_SHAPE, rxf.src, "DRAIN")
                with m.Elif((k_rd == tot) & (rpend == 0) & (k_loc == ltot) & (lpend == 0)
                            & (rx_left == 0) & (fwd_left == 0)):
                    m.d.sync += running.eq(0)
                    m.next = "REPORT"
            with m.State("DRAIN"):
                # the reads in flight come back, then everything read is dropped
                m.d.comb += self.busy.eq(1)
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == 3):
                    m.d.comb += clr.eq(1)
                    m.d.sync += drain.eq(0)
                    m.next = "REPORT"
            with m.State("REPORT"):
                m.d.comb += [self.busy.eq(1), self.done.valid.eq(1)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
