# SPDX-License-Identifier: Apache-2.0
"""The tensor engine: command dispatch, stationary / moving issue, the array, PSUM, read-out."""

from __future__ import annotations

from amaranth.hdl import Module, Signal, Mux, Cat, Const
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.emit import Design
from rtl.pipeline import signature_attr
from rtl.tensor.array import SystolicArray, array_leaf_modules, group_module_name, row_module_name
from rtl.tensor.layouts import (TensorLayouts, OP_LOAD, OP_MATMUL, OP_TRANSPOSE, OP_READ,
                                ERR_SHAPE, ERR_FORMAT, ERR_PAIR, ERR_SPARSE)
from rtl.tensor.sparse import group_bus
from rtl.mem.port import PSUM as MEM_PSUM, RowPort
from rtl.tensor.psum import ENGINE_ROW_PORTS, PsumUnit, psum_adder_module_name
from rtl.fp.adder import FP32Adder

__all__ = ["TensorEngine", "build_tensor_engine", "leaf_modules", "leaf_pragmas"]

#: Operations in flight between dispatch and their last PSUM write (op-descriptor FIFO depth).
OPS_IN_FLIGHT = 8


class TensorEngine(wiring.Component):
    """Weight-stationary tensor engine: ``PSUM[bank][m][n] (+)= S[K, M].T @ X[K, N]``.

    Commands (``cmd`` stream, :class:`~rtl.tensor.layouts.TensorLayouts` ``cmd`` layout),
    executed in order of acceptance:

    * ``OP_LOAD`` (LoadStationary): ``m`` beats of the ``st`` stream (beat j = column j of S,
      lane k = S[k, j], codes of format ``fmt``; MX: ``scales`` of column j) are loaded into the
      PEs' *shadow* weights, in the background of the running matmul. Starts ``swap_guard``
      cycles after the swap of the previous shadow (by a matmul) began (the weight-load bus is
      skewed like the moving bus, so the swap stays ahead of it); a shadow that no matmul took
      is simply replaced. Sparse (``sp = i + 1``, pattern n:m = ``tl.patterns[i]``): lane k is
      the kept value of physical row k and ``tags[k]`` its position in its group; the tags of
      rows ``k < K`` (``k`` field, a multiple of n) are checked beat by beat (every tag ``< m``,
      the n tags of a group distinct); a bad beat raises ``ERR_SPARSE`` and poisons the shadow:
      a matmul that would use it is rejected (``ERR_SPARSE``) until the next load.
    * ``OP_MATMUL`` (MultiplyMoving): ``n`` beats of the ``mv`` stream (beat n = X[:, n],
      format ``fmt``) flow through the array using rows ``k < K`` (``k`` field); the result
      ``R[M, n]`` (M = columns of the last load) is written (``acc = 0``) or added (``acc = 1``)
      to PSUM ``bank`` entry ``n``. The first matmul after a load swaps in the new weights.
      ``mx = 1``: the codes are MX elements and the beats' E8M0 scales apply. ``sp`` must equal
      the pattern of the weights it uses (0 for dense weights); a sparse matmul runs ``k``
      physical rows (a multiple of n, at most the load's ``k``) over ``k * m / n`` logical K
      elements, beat n carrying ``m / n`` packed elements per lane (moving format ``fmt`` of
      at most ``32 * n / m`` bits), in the time of a dense matmul over ``k`` rows.
      With ``cfg.fp32_passes == 4`` a matmul with an FP32 operand (moving ``fmt`` or the
      weights' format) issues each moving beat four times into the array (parts 0..3; ``mv``
      is ready only on the last part), so it takes ``4 n`` cycles: FP32 at 1/4 rate, the
      results bit-identical (one rounding per PE step). TF32 x TF32 and every narrower pair
      issue each beat once.
    * ``OP_TRANSPOSE``: the loaded weights T[K, M] (any format) are written as raw bits,
      zero-extended: PSUM[bank][m][n] = T[n, m] for n < K (``k`` field). The identity moving
      tile is generated internally (no ``mv`` beats).
    * ``OP_READ``: after every earlier operation has written PSUM, stream ``n`` entries of
      ``bank`` on ``res`` (beat n = ``pe_cols`` FP32 words).

    An invalid command (shape out of range, unknown format, forbidden pair, MX operation on a
    non-MX format, matmul before any load) is consumed and dropped: nothing is written, the
    engine keeps running, ``err`` rises and ``err_code`` keeps the first error. A rejected
    command consumes no data beats (the program must not send beats for it).

    Every stream has valid/ready back-pressure. The array never stops (its registers have no
    enable): a result reaches PSUM a fixed number of cycles after its beat entered the array,
    so the engine predicts PSUM's read-after-write hazard at issue and holds a column whose
    accumulating result would meet an earlier one for the same entry still in PSUM's pipeline
    (``PsumUnit.Signature.hazard_window``); PSUM then always takes every result.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        PEs as ``Instance`` of one separately converted module (default) or as submodules.

    Members
    -------
    cmd : In(stream.Signature(cmd layout))
    st : In(stream.Signature(tl.lanes_st))
        Stationary beats (with sparsity: ``tags`` after the ``lanes_in`` members).
    mv : In(stream.Signature(tl.lanes_in))
        Moving beats.
    res : Out(stream.Signature(ArrayLayout(32, pe_cols)))
        PSUM read-out beats.
    err : Out(1)
    err_code : Out(3)
        ``ERR_*`` of :mod:`rtl.tensor.layouts` (``ERR_SPARSE`` = architecture E_SPARSE_TAG).
    busy : Out(1)
        Any command, beat or write still in progress.
    mv_fire : Out(1)
        A moving (or identity) beat enters the array this cycle (benchmarks); an FP32
        four-pass column fires it on each of its four parts.
    psum_we : Out(1)
        A PSUM write lands this cycle (benchmarks).
    op_issue : Out(1)
        A matmul or transpose is taken (not rejected) this cycle: it will write PSUM.
    op_done : Out(1)
        Pulses once per ``op_issue``, in the same order, the cycle after the operation's last
        PSUM write landed (``done_latency`` cycles after PSUM accepted its last result): from
        then on every PSUM read sees its results. Later operations keep streaming meanwhile;
        the core's decoder counts these to complete a posting matmul without waiting for the
        array to empty (docs/core.md §4).
    cmd_reject : Out(1)
        The command taken this cycle is rejected (it consumes no data beats): lets a feeder
        that fetched its beats ahead (``rtl/tensor/sbuf_fed.py``) discard them.
    psum_vector, psum_scalar : In(RowPort.Signature(cfg, "psum"))
        PSUM row ports of the vector and scalar engines (:class:`PsumUnit` row ports: the
        tensor engine wins a bank, the other stalls).

    Timing: a matmul's first result reaches PSUM ``latency`` cycles after its first beat was
    accepted; back-to-back matmuls issue one beat per cycle with no gap.
    """

    class Signature(wiring.Signature):
        """The engine's members for ``cfg``, with ``tl`` (its :class:`TensorLayouts`),
        ``array`` and ``psum`` (the signatures of its parts), ``latency`` (cycles from a moving
        beat's acceptance to its PSUM write with no stalls: input register, array, PSUM
        pipeline) and ``swap_guard`` (cycles after a weight swap starts before the next
        load may enter the array) as attributes."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "TensorEngine")
            self.tl = tl = TensorLayouts(cfg)
            self.array = SystolicArray.Signature(cfg)
            self.psum = PsumUnit.Signature(cfg, row_ports=ENGINE_ROW_PORTS)
            self.latency = 1 + self.array.latency + self.psum.latency
            # the weight-load bus is skewed like the moving bus (SystolicArray): a load beat
            # issued one cycle after the swapping beat reaches each PE after the swap did
            self.swap_guard = 1
            # an accepted result is written psum.latency cycles later (at the end of that
            # cycle); op_done rises the cycle after
            self.done_latency = self.psum.latency + 1
            super().__init__({
                "cmd": In(stream.Signature(tl.cmd)),
                "st": In(stream.Signature(tl.lanes_st)),
                "mv": In(stream.Signature(tl.lanes_in)),
                "res": Out(stream.Signature(tl.lanes_out)),
                "err": Out(1), "err_code": Out(3), "busy": Out(1),
                "mv_fire": Out(1), "psum_we": Out(1), "cmd_reject": Out(1),
                "op_issue": Out(1), "op_done": Out(1),
                **{f"psum_{n}": In(RowPort.Signature(cfg, MEM_PSUM)) for n in ENGINE_ROW_PORTS},
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.tl = self.signature.tl
        self.use_instances = use_instances

    done_latency = signature_attr("done_latency", "Cycles from PSUM accepting an operation's "
                                                  "last result to its ``op_done``.")
    latency = signature_attr("latency", "Cycles from a moving beat's acceptance to its PSUM "
                                        "write (no stalls).")
    swap_guard = signature_attr("swap_guard", "Cycles after a weight swap starts before "
                                              "the next load may enter the array.")

    def elaborate(self, platform):
        m = Module()
        cfg, tl = self.cfg, self.tl
        R, C, B = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
        m.submodules.array = arr = SystolicArray(cfg, use_instances=self.use_instances)
        m.submodules.psum = psu = PsumUnit(cfg, use_instances=self.use_instances,
                                           row_ports=ENGINE_ROW_PORTS)
        for n in ENGINE_ROW_PORTS:         # the vector / scalar engines' PSUM row ports
            wiring.connect(m, wiring.flipped(getattr(self, f"psum_{n}")), getattr(psu, n))
        desc = data.StructLayout({"bank": tl.cmd["bank"].shape, "acc": 1, "mask": C,
                                  "n": range(B + 1)})
        m.submodules.ops = ops = fifo.SyncFIFO(width=desc.size, depth=OPS_IN_FLIGHT)

        def addr(bank, n):
            if B == 1:
                return bank
            return Cat(n[:(B - 1).bit_length()], bank)

        # ---------------------------------------------------------- result path -> PSUM
        head = data.View(desc, ops.r_data)
        out_n = Signal(range(B))
        m.d.comb += [
            psu.i.valid.eq(arr.out.valid),
            psu.i.payload.addr.eq(addr(head.bank, out_n)),
            psu.i.payload.acc.eq(head.acc),
            psu.i.payload.mask.eq(head.mask),
            psu.i.payload.value.eq(arr.out.value),
            self.psum_we.eq(psu.we),
        ]
        with m.If(arr.out.valid & psu.i.ready):
            with m.If(out_n == head.n - 1):
                m.d.sync += out_n.eq(0)
                m.d.comb += ops.r_en.eq(1)
            with m.Else():
                m.d.sync += out_n.eq(out_n + 1)
        # per-operation completion: the op FIFO's pop (its last result accepted by PSUM),
        # delayed until that result's write has landed
        done_pipe, done_regs = ops.r_en, []
        for i in range(self.done_latency):
            nxt = Signal(name=f"op_done_{i}")
            m.d.sync += nxt.eq(done_pipe)
            done_pipe = nxt
            done_regs.append(nxt)
        m.d.comb += self.op_done.eq(done_pipe)

        # ---------------------------------------------------------- state
        ld_busy = Signal()
        ld_left = Signal(range(C + 1))
        ld_col = Signal(range(C))
        ld_fmt = Signal(tl.fmt_shape)
        shadow_new = Signal()
        shadow_m = Signal(range(C + 1))
        shadow_fmt = Signal(tl.fmt_shape)
        have_w = Signal()
        cur_m = Signal(range(C + 1))
        cur_fmt = Signal(tl.fmt_shape)
        cd = Signal(range(self.swap_guard + 1))
        sp_shape = tl.cmd["sp"].shape if tl.sparse else range(2)
        ld_sp = Signal(sp_shape)            # pattern index + 1 of the running load (0: dense)
        ld_k = Signal(range(R + 1))         # rows whose tags the running load checks
        shadow_sp = Signal(sp_shape)
        shadow_k = Signal(range(R + 1))
        shadow_bad = Signal()               # a tag error in the shadow's load
        cur_sp = Signal(sp_shape)
        cur_k = Signal(range(R + 1))
        cur_bad = Signal()                  # active weights from a bad load (via a transpose)
        ld_pk = Signal()                    # x4 MX load: the scale of row k is block
        #                                     mx_pack * k // mx_block
        shadow_pk = Signal(2)               # packing of the weights: 0 none, 1 FP8 x2, 2 MX x4
        cur_pk = Signal(2)

        mv_busy = Signal()
        mv_left = Signal(range(B + 1))
        mv_n = Signal(range(max(B, R)))
        mv_k = Signal(range(tl.k_max + 1))     # K (packed: elements, up to P * rows)
        mv_fmt = Signal(tl.fmt_shape)
        mv_tp = Signal()
        mv_mx = Signal()
        mv_swap = Signal()
        mv_bank = Signal(tl.cmd["bank"].shape)
        mv_sp = Signal()                    # sparse beats: lanes -> group bus
        mv_pat = Signal(range(max(2, len(tl.patterns))))
        mv_wsel = Signal(range(max(2, len(tl.sparse_widths))))
        mv_multi = Signal()                 # FP32 four-pass matmul: each column is 4 parts
        mv_part = Signal(2)
        mv_pk = Signal()                    # packed matmul (double-rate FP8 / x4 MX)
        mv_acc = Signal()                   # the matmul accumulates into PSUM

        rd_busy = Signal()
        rd_left = Signal(range(B + 1))
        rd_n = Signal(range(B))
        rd_bank = Signal(tl.cmd["bank"].shape)

        inflight = Signal(16)

        # ---------------------------------------------------------- moving issue
        src_valid = mv_tp | self.mv.valid
        issue = Signal()        # a beat (one part of a four-pass column) enters the array
        col_done = Signal()     # ... and it is the column's last part
        last_part = ~mv_multi | (mv_part == 3)
        # PSUM's read-after-write hazard, predicted at issue: a result reaches PSUM a fixed
        # number of cycles after its beat entered the array, in issue order, so PSUM would
        # refuse an accumulating result iff a result for its address was issued in one of the
        # last hazard_window cycles. Such a column's last part waits here instead, and the
        # array never has to stop for PSUM.
        cur_addr = addr(mv_bank, mv_n)
        recent = []
        prev_v, prev_a = col_done, cur_addr
        for d in range(self.signature.psum.hazard_window):
            rv, ra = Signal(name=f"recent{d}_valid"), Signal(len(cur_addr), name=f"recent{d}")
            m.d.sync += [rv.eq(prev_v), ra.eq(prev_a)]
            recent.append(rv & (ra == cur_addr))
            prev_v, prev_a = rv, ra
        hold = Signal()
        m.d.comb += hold.eq(last_part & mv_acc & Cat(*recent).any())
        m.d.comb += [
            issue.eq(mv_busy & src_valid & ~hold),
            col_done.eq(issue & last_part),
            self.mv.ready.eq(mv_busy & ~mv_tp & last_part & ~hold),
            self.mv_fire.eq(issue),
        ]
        mv_reg = Signal(arr.mv_in.shape())
        ld_reg = Signal(arr.ld_in.shape())
        m.d.comb += [arr.mv_in.eq(mv_reg), arr.ld_in.eq(ld_reg)]
        mvp = self.mv.payload
        lanes = [mvp.codes[k] for k in range(R)]
        for k in range(R):
            lane = mv_reg[k]
            code = lanes[k]
            if tl.sparse:
                code = Mux(mv_sp, group_bus(tl, lanes, k, mv_pat, mv_wsel), code)
                m.d.sync += [lane.sp.eq(mv_sp), lane.wsel.eq(mv_wsel)]
            if tl.fp32_split:
                m.d.sync += [lane.part.eq(mv_part), lane.last.eq(last_part)]
            m.d.sync += [
                lane.valid.eq(issue),
                lane.first.eq(mv_swap & (mv_n == 0) & (mv_part == 0)),
                lane.tp.eq(mv_tp),
                lane.active.eq(k < mv_k),
                lane.hit.eq(mv_n == k),
                lane.fmt.eq(mv_fmt),
                lane.code.eq(Mux(mv_tp, 0, code)),
            ]
            if tl.packed:
                # packed: row k holds elements P*k .. P*k + P - 1 (those below K)
                nel = Signal(2, name=f"nel_{k}")
                act = Signal(name=f"act_{k}")
                m.d.comb += [nel.eq(0), act.eq(k < mv_k)]
                for P, sel in ((tl.fp8_pack, ~mv_mx), (tl.mx_pack, mv_mx)):
                    if P:
                        with m.If(mv_pk & sel):
                            m.d.comb += [act.eq(P * k < mv_k),
                                         nel.eq(Mux(mv_k >= P * k + P, P - 1,
                                                    mv_k - P * k - 1))]
                m.d.sync += [lane.dot.eq(mv_pk & ~mv_tp), lane.nel.eq(nel),
                             lane.active.eq(act)]
            if tl.mx:
                sc = mvp.scales[k // cfg.mx_block]
                if tl.mx_pack:
                    sc = Mux(mv_pk, mvp.scales[tl.mx_pack * k // cfg.mx_block], sc)
                m.d.sync += [lane.mx.eq(mv_mx), lane.scale.eq(sc)]
        with m.If(issue & mv_multi):
            m.d.sync += mv_part.eq(mv_part + 1)
        with m.If(col_done):
            m.d.sync += [mv_n.eq(mv_n + 1), mv_left.eq(mv_left - 1)]
            with m.If(mv_left == 1):
                m.d.sync += mv_busy.eq(0)
        swap_pending = mv_busy & mv_swap & (mv_n == 0) & (mv_part == 0)
        with m.If(issue & mv_swap & (mv_n == 0) & (mv_part == 0)):
            m.d.sync += cd.eq(self.swap_guard)
        with m.Elif(cd != 0):
            m.d.sync += cd.eq(cd - 1)

        # ---------------------------------------------------------- stationary issue
        ld_fire = Signal()
        m.d.comb += [ld_fire.eq(ld_busy & self.st.valid),
                     self.st.ready.eq(ld_busy)]
        stp = self.st.payload
        for k in range(R):
            lane = ld_reg[k]
            m.d.sync += [lane.valid.eq(ld_fire), lane.fmt.eq(ld_fmt), lane.col.eq(ld_col),
                         lane.code.eq(stp.codes[k])]
            if tl.mx:
                sc = stp.scales[k // cfg.mx_block]
                if tl.mx_pack:
                    sc = Mux(ld_pk, stp.scales[tl.mx_pack * k // cfg.mx_block], sc)
                m.d.sync += lane.scale.eq(sc)
            if tl.sparse:
                m.d.sync += lane.tag.eq(stp.tags[k])
        # sparse tag check of a stationary beat: rows k < ld_k, every tag < m, the n tags of a
        # group distinct (ld_k is a multiple of n: whole groups only)
        beat_bad = Signal()
        if tl.sparse:
            with m.Switch(ld_sp):
                for pi, (n, mm) in enumerate(tl.patterns):
                    with m.Case(pi + 1):
                        errs = []
                        for g in range(R // n):
                            t = [stp.tags[g * n + i] for i in range(n)]
                            e = [x >= mm for x in t] if mm < (1 << tl.tag_bits) else []
                            e += [t[a] == t[b] for a in range(n) for b in range(a + 1, n)]
                            if e:
                                errs.append((g * n < ld_k) & Cat(*e).any())
                        if errs:
                            m.d.comb += beat_bad.eq(Cat(*errs).any())
            with m.If(ld_fire & beat_bad):
                m.d.sync += shadow_bad.eq(1)
        with m.If(ld_fire):
            m.d.sync += [ld_col.eq(ld_col + 1), ld_left.eq(ld_left - 1)]
            with m.If(ld_left == 1):
                m.d.sync += ld_busy.eq(0)

        # ---------------------------------------------------------- in-flight beats
        acc_beat = arr.out.valid & psu.i.ready
        m.d.sync += inflight.eq(inflight + col_done - acc_beat)

        # ---------------------------------------------------------- read-out
        res_v = Signal()
        slot = ~res_v | self.res.ready
        m.d.comb += [
            psu.rd.en.eq(slot),
            psu.rd.addr.eq(addr(rd_bank, rd_n)),
            self.res.valid.eq(res_v),
            self.res.payload.eq(psu.rd.data),
        ]
        with m.If(slot):
            m.d.sync += res_v.eq(rd_busy)
            with m.If(rd_busy):
                m.d.sync += [rd_n.eq(rd_n + 1), rd_left.eq(rd_left - 1)]
                with m.If(rd_left == 1):
                    m.d.sync += rd_busy.eq(0)

        # ---------------------------------------------------------- dispatch
        c = self.cmd.payload
        nf = len(tl.pe_formats)
        nd = len(cfg.formats)

        def in_set(x, idx):
            return Cat(*[x == i for i in idx]).any() if idx else Const(0)

        s_fmt = Mux(shadow_new, shadow_fmt, cur_fmt)
        s_m = Mux(shadow_new, shadow_m, cur_m)
        s_sp = Mux(shadow_new, shadow_sp, cur_sp)
        s_k = Mux(shadow_new, shadow_k, cur_k)
        s_bad = Mux(shadow_new, shadow_bad, cur_bad)
        c_sp = c.sp if tl.sparse else Const(0, 1)
        c_pk = c.pk if tl.packed else Const(0, 1)
        c_pkm = Mux(c_pk, Mux(c.mx, 2, 1), 0)      # the packing the command names
        s_pk = Mux(shadow_new, shadow_pk, cur_pk)
        npat = len(tl.patterns)

        def sp_switch(body):
            """``body(pattern index, n, m)`` under a Switch on the command's ``sp``."""
            with m.Switch(c_sp):
                for pi, (n, mm) in enumerate(tl.patterns):
                    with m.Case(pi + 1):
                        body(pi, n, mm)

        def k_fits(n, hi):
            """``n <= k <= hi`` and ``k % n == 0`` (n is a power of two in every pattern)."""
            assert n & (n - 1) == 0
            ok = (c.k >= n) & (c.k <= hi)
            return ok & (c.k[:n.bit_length() - 1] == 0) if n > 1 else ok
        bad = Signal()
        code = Signal(3)
        k_ok = (c.k >= 1) & (c.k <= R)
        # packed matmul: K up to P * rows elements
        pk_k_ok = Const(0)
        if tl.packed:
            P_of = Mux(c.mx, tl.mx_pack, tl.fp8_pack)
            pk_k_ok = (c.k >= 1) & (c.k <= P_of * R) & (P_of != 0)
        n_ok = (c.n >= 1) & (c.n <= B)
        bank_ok = c.bank < cfg.psum_banks
        wide = tl.wide_indices
        with m.Switch(c.op):
            with m.Case(OP_LOAD):
                with m.If(~((c.m >= 1) & (c.m <= C))):
                    m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]
                with m.Elif(c.fmt >= nf):
                    m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                if tl.packed:       # a packed load: a packed format, not sparse
                    pk_fmt_ok = Mux(c.mx, in_set(c.fmt, tl.mx_indices) & (tl.mx_pack != 0),
                                    in_set(c.fmt, tl.fp8_indices) & (tl.fp8_pack != 0))
                    with m.Elif(c_pk & (~pk_fmt_ok | (c_sp != 0))):
                        m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                if tl.sparse:       # no sparsity: not even dead logic (the dense hardware)
                    with m.Elif(c_sp > npat):
                        m.d.comb += [bad.eq(1), code.eq(ERR_SPARSE)]
                    with m.Elif(c_sp != 0):
                        def load_body(pi, n, mm):
                            with m.If(~k_fits(n, R)):
                                m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]
                            with m.Elif(c.fmt >= nd):
                                m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                        sp_switch(load_body)
            with m.Case(OP_MATMUL):
                with m.If(~(Mux(c_pk, pk_k_ok, k_ok) & n_ok & bank_ok & have_w)):
                    m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]
                if tl.packed:
                    # packed matmul: packed weights (pk load), both formats packed ones, dense
                    with m.Elif(c_pkm != s_pk):
                        m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                    with m.Elif(c_pk & ((c_sp != 0) | ~pk_fmt_ok
                                        | ~Mux(c.mx, in_set(s_fmt, tl.mx_indices),
                                               in_set(s_fmt, tl.fp8_indices)))):
                        m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                if tl.sparse:
                    with m.Elif((c_sp != s_sp) | ((c_sp != 0) & s_bad)):
                        m.d.comb += [bad.eq(1), code.eq(ERR_SPARSE)]
                    with m.Elif(c_sp != 0):
                        def mm_body(pi, n, mm):
                            with m.If(~k_fits(n, s_k)):
                                m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]
                            with m.Elif(c.mx | ~in_set(c.fmt, tl.sparse_fmt_ok(pi))
                                        | ~(s_fmt < nd)):
                                m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                            with m.Elif(in_set(c.fmt, wide) != in_set(s_fmt, wide)):
                                m.d.comb += [bad.eq(1), code.eq(ERR_PAIR)]
                        sp_switch(mm_body)
                with m.Elif(c.mx):
                    mx_ok = in_set(c.fmt, tl.mx_indices) & in_set(s_fmt, tl.mx_indices)
                    with m.If(~mx_ok):
                        m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                with m.Elif(~((c.fmt < nd) & (s_fmt < nd))):
                    m.d.comb += [bad.eq(1), code.eq(ERR_FORMAT)]
                with m.Elif(in_set(c.fmt, wide) != in_set(s_fmt, wide)):
                    m.d.comb += [bad.eq(1), code.eq(ERR_PAIR)]
            with m.Case(OP_TRANSPOSE):
                # K result entries go to one bank: K must fit it as well as the rows
                with m.If(~(k_ok & (c.k <= B) & bank_ok & have_w)):
                    m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]
            with m.Case(OP_READ):
                with m.If(~(n_ok & bank_ok)):
                    m.d.comb += [bad.eq(1), code.eq(ERR_SHAPE)]

        # a load may replace a shadow no matmul has taken yet; it must not touch one whose
        # swap is still travelling down the rows
        can_load = ~ld_busy & ~swap_pending & (cd == 0)
        # the next matmul may be dispatched in the cycle its predecessor issues its last beat,
        # so back-to-back matmuls issue one beat per cycle with no gap
        last_beat = col_done & (mv_left == 1)
        can_mm = ((~mv_busy | last_beat) & ~ld_busy & ops.w_rdy
                  & ~(rd_busy & (rd_bank == c.bank)))
        can_read = ~mv_busy & ~rd_busy & (inflight == 0) & ~psu.busy
        take = Signal()
        with m.If(bad):
            m.d.comb += take.eq(1)
        with m.Else():
            with m.Switch(c.op):
                with m.Case(OP_LOAD):
                    m.d.comb += take.eq(can_load)
                with m.Case(OP_MATMUL, OP_TRANSPOSE):
                    m.d.comb += take.eq(can_mm)
                with m.Case(OP_READ):
                    m.d.comb += take.eq(can_read)
        m.d.comb += self.cmd.ready.eq(take)
        fire = self.cmd.valid & take

        wdesc = Signal(desc)
        is_tp = c.op == OP_TRANSPOSE
        m.d.comb += [
            wdesc.bank.eq(c.bank),
            wdesc.acc.eq(c.acc & ~is_tp),
            wdesc.mask.eq(Cat(*[s_m > j for j in range(C)])),
            wdesc.n.eq(Mux(is_tp, c.k, c.n)),
            ops.w_data.eq(wdesc),
        ]
        m.d.comb += self.cmd_reject.eq(fire & bad)
        with m.If(fire & bad & ~self.err):
            m.d.sync += [self.err.eq(1), self.err_code.eq(code)]
        if tl.sparse:
            with m.If(ld_fire & beat_bad & ~self.err):
                m.d.sync += [self.err.eq(1), self.err_code.eq(ERR_SPARSE)]
            # element width of a sparse matmul's moving format (index into tl.sparse_widths)
            wsel_of = Signal.like(mv_wsel)
            for i, f in enumerate(tl.pe_formats[:nd]):
                if f.width in tl.sparse_widths:
                    with m.If(c.fmt == i):
                        m.d.comb += wsel_of.eq(tl.sparse_widths.index(f.width))
        with m.If(fire & ~bad):
            with m.Switch(c.op):
                with m.Case(OP_LOAD):
                    m.d.sync += [ld_busy.eq(1), ld_left.eq(c.m), ld_col.eq(0), ld_fmt.eq(c.fmt),
                                 shadow_new.eq(1), shadow_m.eq(c.m), shadow_fmt.eq(c.fmt),
                                 have_w.eq(1)]
                    if tl.sparse:
                        m.d.sync += [ld_sp.eq(c_sp), ld_k.eq(c.k), shadow_sp.eq(c_sp),
                                     shadow_k.eq(c.k), shadow_bad.eq(0)]
                    if tl.packed:
                        m.d.sync += [ld_pk.eq(c_pk & c.mx), shadow_pk.eq(c_pkm)]
                with m.Case(OP_MATMUL, OP_TRANSPOSE):
                    m.d.comb += [ops.w_en.eq(1), self.op_issue.eq(1)]
                    m.d.sync += [mv_busy.eq(1), mv_left.eq(Mux(is_tp, c.k, c.n)), mv_n.eq(0),
                                 mv_k.eq(c.k), mv_fmt.eq(c.fmt), mv_tp.eq(is_tp),
                                 mv_mx.eq(c.mx & ~is_tp), mv_swap.eq(shadow_new),
                                 mv_bank.eq(c.bank), mv_acc.eq(c.acc & ~is_tp),
                                 shadow_new.eq(0),
                                 cur_m.eq(s_m), cur_fmt.eq(s_fmt), mv_part.eq(0)]
                    if tl.packed:
                        m.d.sync += [mv_pk.eq(c_pk & ~is_tp), cur_pk.eq(s_pk)]
                    if tl.fp32_split:
                        fi = tl.fp32_index
                        m.d.sync += mv_multi.eq(~is_tp & ~c.mx & ((c.fmt == fi) | (s_fmt == fi)))
                    if tl.sparse:
                        m.d.sync += [cur_sp.eq(s_sp), cur_k.eq(s_k), cur_bad.eq(s_bad),
                                     mv_sp.eq((c_sp != 0) & ~is_tp), mv_pat.eq(c_sp - 1),
                                     mv_wsel.eq(wsel_of)]
                with m.Case(OP_READ):
                    m.d.sync += [rd_busy.eq(1), rd_left.eq(c.n), rd_n.eq(0),
                                 rd_bank.eq(c.bank)]

        m.d.comb += self.busy.eq(ld_busy | mv_busy | rd_busy | res_v | (inflight != 0)
                                 | psu.busy | self.cmd.valid | Cat(*done_regs).any())
        return m


def leaf_modules(cfg: CoreConfig):
    """``{Verilog module name: component}`` of the modules the engine instantiates by name
    (the PE, the group and the row of PEs, the PSUM lane adder), each to be converted once."""
    return {**array_leaf_modules(cfg), psum_adder_module_name(cfg): FP32Adder(cfg)}


def leaf_pragmas(cfg: CoreConfig):
    """Verilator metacomment of each leaf module: the PE group is a ``hier_block`` (with
    ``verilator --hierarchical`` it is verilated and compiled once, as a library, however many
    instances the design has; its PEs are inlined in it), the row and the PSUM adder
    ``no_inline_module`` (all instances share one C++ class). Comments only: synthesis ignores
    them."""
    return {group_module_name(cfg): "hier_block", row_module_name(cfg): "no_inline_module",
            psum_adder_module_name(cfg): "no_inline_module"}


def build_tensor_engine(cfg: CoreConfig):
    """The engine as a :class:`~rtl.emit.Design`: the top whose array and PSUM instantiate the
    leaf modules by name, and those leaf components (each converted once)."""
    return Design(top=TensorEngine(cfg, use_instances=True), modules=leaf_modules(cfg),
                  pragmas=leaf_pragmas(cfg))
