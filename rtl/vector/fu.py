# SPDX-License-Identifier: Apache-2.0
"""The Vector engine's function unit: two chained ALU stages per lane and the interleaved
reduction (``docs/vector.md``), plugged into a :class:`~rtl.vector.frame.LanesFrame`."""

from __future__ import annotations

import numpy as np

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.pipe import delay
from rtl.leaf import Leaf
from rtl.tensor.layouts import config_tag
from rtl.vector.alu import ALU_FMA, LaneALU
from rtl.vector.frame import fu_in_layout, fu_out_layout
from rtl.vector.isa import (ALU_ADD, ALU_EQ, ALU_GE, ALU_GT, ALU_LE, ALU_LT, ALU_MAX, ALU_MIN,
                            ALU_MUL, ALU_NE, BN_AGGR_N, BN_RCP_MAGIC, BN_NEWTON_STEPS,
                            BN_STATS_N, IOTA_BITS, MAX8_K, transpose_block)

__all__ = ["VectorFU", "ctl_layout", "u24_to_fp32", "bn_programs", "alu_module_name",
           "leaf_modules"]


def alu_module_name(cfg):
    """Verilog module name of the separately converted :class:`~rtl.vector.alu.LaneALU`."""
    return f"nc_vecalu_{config_tag(cfg)}"


def leaf_modules(cfg):
    """``{Verilog module name: component}`` a :class:`VectorFU` built with
    ``use_instances=True`` instantiates by name (the lane ALU, converted once)."""
    return {alu_module_name(cfg): LaneALU(cfg)}

_ONE = 0x3F800000


def bn_programs(K):
    """The tail programs of BN_STATS and BN_AGGR for ``K`` partials: lists of steps
    ``(op, x, y, c, dst)`` run one at a time on stage 1 (``x``, ``y``, ``c``, ``dst`` name the
    lane's registers: ``int`` = accumulator entry, ``"R"``, ``"E"``, ``"M"``, or the sources
    ``"SEED"`` (``BN_RCP_MAGIC - bits(acc[0])``), ``"-N"`` (``acc[0]`` negated), ``"-M"``,
    ``"ONE"``, ``"ZERO"``). BN_STATS' accumulators: ``S`` partials 0..K-1, ``Q`` partials
    K..2K-1; BN_AGGR's: 3K interleaved (n, S, Q) partials. ``golden.vector.bn_stats_lanes`` /
    ``bn_aggr_lanes`` are the same operations in the same order."""
    stats = ([(ALU_ADD, 0, j, "ZERO", 0) for j in range(1, K)]
             + [(ALU_ADD, K, K + j, "ZERO", K) for j in range(1, K)])
    aggr = [(ALU_ADD, t, t + 3 * j, "ZERO", t) for t in range(3) for j in range(1, K)]
    r = "SEED"
    for _ in range(BN_NEWTON_STEPS):
        aggr += [(ALU_FMA, "-N", r, "ONE", "E"), (ALU_FMA, r, "E", r, "R")]
        r = "R"
    aggr += [(ALU_MUL, 1, "R", "ZERO", "M"), (ALU_MUL, 2, "R", "ZERO", "E"),
             (ALU_FMA, "-M", "M", "E", "E"), (ALU_MAX, "E", "ZERO", "ZERO", "E")]
    return stats, aggr


def ctl_layout():
    """The function unit's per-instruction controls (held constant while it runs):
    ``op0``, ``op1``, ``rev0``, ``rev1``, ``sel0``, ``sel1``, ``imm0``, ``imm1`` as in
    :func:`~rtl.vector.isa.instr_layout` after the opcode's overrides, ``memset`` (stage 0's
    ``x`` is ``imm0``), ``iota`` (``x0`` is the element index, ``x1`` the partition index, both
    as FP32), ``reduce`` (stage 1 reduces with ``op1``; one output per instruction), ``scan``
    (stage 0's ``x`` is the previous result, ``imm0`` first, and its ``y`` is ``x0``; the frame
    runs such a command ``serial``), ``max8`` (keep the 8 largest stage-0 results per lane, then
    emit them, or with ``op1`` = 1 their element indices, as 8 beats), ``bn_stats`` /
    ``bn_aggr`` (the layer-norm statistics: accumulate, run the tail program of
    :func:`bn_programs`, emit 3 / 2 beats), ``affine`` (stage 0 is a select whose ``x`` is the
    predicate ``(off + cp*p + ci*i) cmp 0`` from ``imm1``'s fields and ``cmp``; ``op0`` must
    be select, ``y`` the src0 element), ``transpose`` (keep the B beats of stage-0 results,
    emit the B x B block transposed), ``find8`` (the ``pre`` beats load the 8 values into the
    top-8 list, then each stage-0 result latches its element index into every slot whose value
    it equals bit for bit and that has none yet; the indices leave as MAX8's do)."""
    return data.StructLayout({"op0": 4, "op1": 4, "rev0": 1, "rev1": 1, "sel0": 1, "sel1": 1,
                              "imm0": 32, "imm1": 32, "memset": 1, "iota": 1, "reduce": 1,
                              "scan": 1, "max8": 1, "bn_stats": 1, "bn_aggr": 1,
                              "affine": 1, "cmp": 4, "transpose": 1, "find8": 1})


def u24_to_fp32(m, n, name):
    """Exact FP32 bits of the unsigned ``n`` (``len(n)`` <= 24 bits), built combinationally in
    module ``m`` (IOTA's index converter); returns the 32-bit signal."""
    W = len(n)
    msb = Signal(range(W), name=f"{name}_msb")
    for k in range(W):                   # the highest set bit wins (last assignment)
        with m.If(n[k]):
            m.d.comb += msb.eq(k)
    sh = Signal(range(W), name=f"{name}_sh")
    man = Signal(W, name=f"{name}_man")
    m.d.comb += [sh.eq(W - 1 - msb), man.eq(n << sh)]
    out = Signal(32, name=f"{name}_fp32")
    m.d.comb += out.eq(Mux(n == 0, 0, Cat((man[:W - 1] << (24 - W))[:23], (msb + 127)[:8])))
    return out


def _key_total(v):
    """Unsigned key whose order is IEEE 754 totalOrder of the FP32 pattern ``v``."""
    return Mux(v[31], ~v, Cat(v[:31], 1))


class VectorFU(wiring.Component):
    """Per lane: ``r0 = alu(op0, x0 | imm0, x1 | imm0, imm0)``, then
    ``r1 = alu(op1, r0, x1 | imm1, imm1)`` (``rev`` swaps a stage's operands), two
    :class:`~rtl.vector.alu.LaneALU`.

    Elementwise: each input beat gives one output beat ``2 * La`` cycles later (``La`` the
    ALU latency), ``last`` carried along.

    Scan (``ctl.scan``): stage 0 computes ``prev op0 x0`` where ``prev`` is the lane's previous
    result (``imm0`` after ``start``), stage 1 as elementwise; the caller feeds one beat at a
    time (the frame's ``serial``).

    Top 8 (``ctl.max8``): each stage-0 result is inserted into a per-lane list of 8 kept in
    IEEE totalOrder (largest first; an equal key goes after the ones already there), one
    element per cycle; after the beat with ``last`` the 8 entries (values, or their element
    indices as FP32 when ``op1`` = 1; unfilled: ``0xFFFFFFFF`` / ``-1.0``) leave as 8 beats.

    Find 8 (``ctl.find8``, the frame's ``pre1``): the 8 ``pre`` beats write ``x1`` (the values)
    into the top-8 list's value registers in order; then every element's stage-0 result
    (``op0`` bypass: the widened element) is compared with the 8 values (8 equality comparators
    per lane), and each slot not yet found that equals it bit for bit takes the element index
    (the ``pre`` beats are not counted) and is marked found. After the beat with ``last`` the
    8 indices (``-1.0`` where none was found) leave as MAX8's indices do.

    Reduce (``ctl.reduce``): stage 1 folds the stage-0 results into ``K = La + 1`` interleaved
    partials per lane (element i into partial ``i % K``, each starting at the op's identity),
    so one element per cycle needs no forwarding: partial ``j`` is written ``La`` cycles after
    it was read and read again at the earliest ``K`` cycles later. After the beat with
    ``last``, the partials are combined left to right, ``((p0 op p1) op p2) ...``, one ALU pass
    of ``La + 1`` cycles each, and the result leaves as the instruction's only output beat
    (``last`` set): ``(K - 1) * (La + 1)`` cycles after the last partial was written.
    (``golden.vector.reduce_lanes`` is the same order.)

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    ctl : In(ctl_layout())
    start : In(1)
        Strobe before an instruction's first beat: the partials take the op's identity.
    i : In(stream.Signature(fu_in_layout(cfg), always_ready=True))
    o : Out(stream.Signature(fu_out_layout(cfg), always_ready=True))
    busy : Out(1)
        A beat in flight or a reduction combining.
    """

    class Signature(wiring.Signature):
        """Members of a :class:`VectorFU`; attributes ``latency`` (elementwise input ->
        output) and ``ways`` (reduce partials)."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "VectorFU")
            la = LaneALU.Signature(cfg).latency
            self.alu_latency = la
            self.latency = 2 * la
            self.ways = la + 1
            super().__init__({
                "ctl": In(ctl_layout()), "start": In(1),
                "i": In(stream.Signature(fu_in_layout(cfg), always_ready=True)),
                "o": Out(stream.Signature(fu_out_layout(cfg), always_ready=True)),
                "busy": Out(1),
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=False):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        P = self.cfg.partitions
        sig = self.signature
        La, K = sig.alu_latency, sig.ways
        ctl, i = self.ctl, self.i

        # --- the element index (mod 2**IOTA_BITS; IOTA, MAX8 indices), shared by every lane ----
        idx = Signal(IOTA_BITS, name="iota_idx")
        with m.If(self.start):
            m.d.sync += idx.eq(0)
        with m.Elif(i.valid & ~i.payload.pre):
            m.d.sync += idx.eq(idx + 1)

        # --- stage-1 issue bookkeeping (shared by every lane) -----------------------------------
        v0 = delay(m, i.valid, La, name="v0")            # stage-0 result valid
        last0 = delay(m, i.payload.last, La, name="last0")
        slot = Signal(range(K), name="slot")             # next partial of a reduce element
        comb_on = Signal()                               # combining the partials
        comb_j = Signal(range(K), name="comb_j")
        comb_issue = Signal()                            # issue combine step comb_j now
        red = ctl.reduce
        s1_valid = Signal()
        s1_slot = Signal(range(K))
        s1_tag_comb = Signal()
        s1_tag_final = Signal()
        s1_last = Signal()
        m.d.comb += [
            s1_valid.eq(Mux(red, (v0 & ~comb_on) | comb_issue, v0)),
            s1_slot.eq(Mux(comb_issue, 0, slot)),
            s1_tag_comb.eq(comb_issue),
            s1_tag_final.eq(comb_issue & (comb_j == K - 1)),
            s1_last.eq(v0 & last0),
        ]
        with m.If(red & v0 & ~comb_on):
            m.d.sync += slot.eq(Mux(slot == K - 1, 0, slot + 1))
        v1 = delay(m, s1_valid, La, name="v1")
        slot1 = delay(m, s1_slot, La, name="slot1")
        comb1 = delay(m, s1_tag_comb, La, name="comb1")
        final1 = delay(m, s1_tag_final, La, name="final1")
        last1 = delay(m, s1_last, La, name="last1")
        m.d.sync += comb_issue.eq(0)
        elem_done = red & v1 & ~comb1 & last1            # last partial written this cycle
        emit_red = Signal()
        if K > 1:
            with m.If(elem_done):
                m.d.sync += [comb_on.eq(1), comb_j.eq(1), comb_issue.eq(1)]
            with m.If(red & v1 & comb1):
                with m.If(final1):
                    m.d.sync += comb_on.eq(0)
                with m.Else():
                    m.d.sync += [comb_j.eq(comb_j + 1), comb_issue.eq(1)]
            m.d.comb += emit_red.eq(red & v1 & comb1 & final1)
        else:
            m.d.comb += emit_red.eq(elem_done)
        with m.If(self.start):
            m.d.sync += [slot.eq(0), comb_on.eq(0), comb_issue.eq(0)]
        ident = Mux(ctl.op1 == ALU_MAX, 0xFF800000, Mux(ctl.op1 == ALU_MIN, 0x7F800000,
                                                        0x80000000))
        # --- top 8 / find 8: emit 8 beats after the last element was inserted ------------------
        mx, fi = ctl.max8, ctl.find8
        top = mx | fi                                   # the 8 slots leave as beats
        want_idx = ctl.op1[0] | fi                      # their indices, not their values
        pre0 = delay(m, i.payload.pre, La, name="pre0")  # a find-8 value at stage-0 output
        vslot = Signal(range(MAX8_K), name="vslot")     # the slot of the next find-8 value
        with m.If(self.start):
            m.d.sync += vslot.eq(0)
        with m.Elif(fi & v0 & pre0):
            m.d.sync += vslot.eq(vslot + 1)
        emit8 = Signal()
        emit_n = Signal(range(MAX8_K))
        with m.If(top & v0 & last0):
            m.d.sync += [emit8.eq(1), emit_n.eq(0)]
        with m.Elif(emit8):
            m.d.sync += emit_n.eq(emit_n + 1)
            with m.If(emit_n == MAX8_K - 1):
                m.d.sync += emit8.eq(0)
        with m.If(self.start):
            m.d.sync += emit8.eq(0)
        idx0 = delay(m, idx, La, name="idx0")
        idx0_f = u24_to_fp32(m, idx0, "idx0")

        # --- BN_STATS / BN_AGGR: accumulate at input time, then the tail program -------------
        bn = ctl.bn_stats | ctl.bn_aggr
        tr = ctl.transpose
        B = transpose_block(self.cfg)
        A = 3 * K                                   # accumulator entries
        bslot = Signal(range(A), name="bslot")      # partial of the element entering now
        with m.If(self.start):
            m.d.sync += bslot.eq(0)
        with m.Elif(bn & i.valid):
            m.d.sync += bslot.eq(Mux(bslot == Mux(ctl.bn_aggr, A - 1, K - 1), 0, bslot + 1))
        bslot_d = delay(m, bslot, La, name="bslot_d")
        stats_prog, aggr_prog = bn_programs(K)
        nsteps = max(len(stats_prog), len(aggr_prog))
        tail_on = Signal()
        tstep = Signal(range(nsteps + 1), name="tstep")
        tcnt = Signal(range(La + 1), name="tcnt")
        t_issue = Signal()
        t_wb = Signal()
        m.d.comb += [t_issue.eq(tail_on & (tcnt == 0)), t_wb.eq(tail_on & (tcnt == La))]
        t_end = Mux(ctl.bn_aggr, len(aggr_prog) - 1, max(0, len(stats_prog) - 1))
        gemit = Signal()                            # emitting the BN / transpose beats
        gemit_n = Signal(range(max(B, BN_STATS_N)), name="gemit_n")
        gtotal = Mux(tr, B - 1, Mux(ctl.bn_aggr, BN_AGGR_N - 1, BN_STATS_N - 1))
        stream_done = (bn | tr) & v0 & last0
        with m.If(stream_done):
            with m.If(tr | (ctl.bn_stats & int(not stats_prog))):
                m.d.sync += [gemit.eq(1), gemit_n.eq(0)]
            with m.Else():
                m.d.sync += [tail_on.eq(1), tstep.eq(0), tcnt.eq(0)]
        with m.Elif(tail_on):
            m.d.sync += tcnt.eq(Mux(tcnt == La, 0, tcnt + 1))
            with m.If(tcnt == La):
                m.d.sync += tstep.eq(tstep + 1)
                with m.If(tstep == t_end):
                    m.d.sync += [tail_on.eq(0), gemit.eq(1), gemit_n.eq(0)]
        with m.If(gemit):
            m.d.sync += gemit_n.eq(gemit_n + 1)
            with m.If(gemit_n == gtotal):
                m.d.sync += gemit.eq(0)
        with m.If(self.start):
            m.d.sync += [tail_on.eq(0), gemit.eq(0)]
        t_op = Signal(5, name="t_op")
        with m.If(ctl.bn_aggr):
            with m.Switch(tstep):
                for k, st in enumerate(aggr_prog):
                    with m.Case(k):
                        m.d.comb += t_op.eq(st[0])
        with m.Else():
            with m.Switch(tstep):
                for k, st in enumerate(stats_prog):
                    with m.Case(k):
                        m.d.comb += t_op.eq(st[0])
        count_f = u24_to_fp32(m, idx, "count")      # BN_STATS' n (after the last element)

        # --- AFFINE_SELECT: off + cp*p + ci*i (exact integers), compared with 0 ---------------
        off = ctl.imm1[:16].as_signed()
        ci = ctl.imm1[16:24].as_signed()
        cp = ctl.imm1[24:32].as_signed()
        aff_base = Signal(signed(36), name="aff_base")
        m.d.comb += aff_base.eq(off + ci * idx)

        def affine_pred(p):
            e = Signal(signed(37), name=f"aff_e{p}")
            pred = Signal(name=f"aff_pred{p}")
            m.d.comb += e.eq(aff_base + cp * p)
            with m.Switch(ctl.cmp):
                for code, fn in ((ALU_EQ, lambda v: v == 0), (ALU_NE, lambda v: v != 0),
                                 (ALU_LT, lambda v: v < 0), (ALU_LE, lambda v: v <= 0),
                                 (ALU_GT, lambda v: v > 0), (ALU_GE, lambda v: v >= 0)):
                    with m.Case(code):
                        m.d.comb += pred.eq(fn(e))
            return Mux(pred, _ONE, 0)

        m.d.comb += [self.o.valid.eq(Mux(red, emit_red, Mux(top, emit8,
                                                            Mux(bn | tr, gemit, v1)))),
                     self.o.payload.last.eq(Mux(red, 1, Mux(top, emit_n == MAX8_K - 1,
                                                            Mux(bn | tr, gemit_n == gtotal,
                                                                last1)))),
                     self.busy.eq(comb_on | comb_issue | emit8 | tail_on | gemit)]
        inflight = Signal(range(2 * La + 2))
        m.d.sync += inflight.eq(inflight + i.valid - (v1 & ~comb1))
        with m.If(inflight != 0):
            m.d.comb += self.busy.eq(1)

        idx_f = u24_to_fp32(m, idx, "iota")

        # --- per lane -----------------------------------------------------------------------
        tbufs, outs = [], []
        for p in range(P):
            if self.use_instances:
                a0, a1 = (Leaf(LaneALU.Signature(self.cfg), alu_module_name(self.cfg))
                          for _ in range(2))
            else:
                a0, a1 = LaneALU(self.cfg), LaneALU(self.cfg)
            m.submodules[f"alu0_{p}"] = a0
            m.submodules[f"alu1_{p}"] = a1
            prev = Signal(32, name=f"scan{p}")       # scan: the previous result
            x0 = Mux(ctl.memset, ctl.imm0, Mux(ctl.iota, idx_f, Mux(ctl.scan, prev,
                                                                      i.payload.x0[p])))
            p_f = int(np.float32(p).view(np.uint32))
            s1 = Mux(ctl.iota, p_f, i.payload.x1[p])
            y0 = Mux(ctl.scan, i.payload.x0[p], Mux(ctl.sel0, s1, ctl.imm0))
            m.d.comb += [a0.i.valid.eq(i.valid), a0.i.payload.op.eq(ctl.op0),
                         a0.i.payload.x.eq(Mux(ctl.rev0, y0, x0)),
                         a0.i.payload.y.eq(Mux(ctl.rev0, x0, y0)),
                         a0.i.payload.c.eq(ctl.imm0)]
            accl = [Signal(32, name=f"acc{p}_{j}") for j in range(A)]
            acc = Array(accl)
            x1_d = delay(m, s1, La, name=f"x1d{p}")
            r0 = a0.o.payload.r
            y1 = Mux(ctl.sel1, x1_d, ctl.imm1)
            x1 = Mux(ctl.rev1, y1, r0)
            y1s = Mux(ctl.rev1, r0, y1)
            m.d.comb += [a1.i.valid.eq(s1_valid), a1.i.payload.op.eq(ctl.op1),
                         a1.i.payload.c.eq(ctl.imm1)]
            with m.If(red):
                m.d.comb += [a1.i.payload.x.eq(acc[s1_slot]),
                             a1.i.payload.y.eq(Mux(comb_issue, acc[comb_j], r0))]
            with m.Else():
                m.d.comb += [a1.i.payload.x.eq(x1), a1.i.payload.y.eq(y1s)]
            r1 = a1.o.payload.r
            with m.If(red & v1):
                m.d.sync += acc[slot1].eq(r1)
            with m.If(self.start):
                for j in range(A):
                    m.d.sync += accl[j].eq(ident)
                m.d.sync += prev.eq(ctl.imm0)
            with m.Elif(ctl.scan & v1):
                m.d.sync += prev.eq(r1)
            # top 8 of this lane
            kv = [Signal(32, name=f"top{p}_{j}") for j in range(MAX8_K)]
            ki = [Signal(32, name=f"topi{p}_{j}") for j in range(MAX8_K)]
            kf = [Signal(name=f"topf{p}_{j}") for j in range(MAX8_K)]
            gt = [Signal(name=f"gt{p}_{j}") for j in range(MAX8_K)]
            key_new = _key_total(r0)
            for j in range(MAX8_K):
                m.d.comb += gt[j].eq(~kf[j] | (key_new > _key_total(kv[j])))
            with m.If(self.start):
                for j in range(MAX8_K):
                    m.d.sync += [kv[j].eq(0xFFFFFFFF), ki[j].eq(0xBF800000), kf[j].eq(0)]
            with m.Elif(mx & v0):
                for j in range(MAX8_K):
                    here = gt[j] if j == 0 else gt[j] & ~gt[j - 1]
                    with m.If(here):
                        m.d.sync += [kv[j].eq(r0), ki[j].eq(idx0_f), kf[j].eq(1)]
                    if j > 0:
                        with m.Elif(gt[j]):
                            m.d.sync += [kv[j].eq(kv[j - 1]), ki[j].eq(ki[j - 1]),
                                         kf[j].eq(kf[j - 1])]
            with m.Elif(fi & v0 & pre0):                 # find 8: the values, in order
                with m.Switch(vslot):
                    for j in range(MAX8_K):
                        with m.Case(j):
                            m.d.sync += kv[j].eq(x1_d)
            with m.Elif(fi & v0):                        # find 8: the first equal element
                for j in range(MAX8_K):
                    with m.If(~kf[j] & (r0 == kv[j])):
                        m.d.sync += [ki[j].eq(idx0_f), kf[j].eq(1)]
            sel_v = Array(kv)[emit_n]
            sel_i = Array(ki)[emit_n]

            # BN_STATS / BN_AGGR: streaming into the partials, then the tail program
            regs = {n: Signal(32, name=f"bn{n}{p}") for n in ("R", "E", "M")}

            def src(name, accl=accl, regs=regs):
                if isinstance(name, int):
                    return accl[name]
                if name in regs:
                    return regs[name]
                return {"SEED": Const(BN_RCP_MAGIC, 32) - accl[0], "-N": accl[0] ^ 0x80000000,
                        "-M": regs["M"] ^ 0x80000000, "ONE": Const(_ONE, 32),
                        "ZERO": Const(0, 32)}[name]

            def dst(name, accl=accl, regs=regs):
                return accl[name] if isinstance(name, int) else regs[name]
            tx, ty, tc = (Signal(32, name=f"t{n}{p}") for n in "xyc")
            for sel, prog in ((ctl.bn_aggr, aggr_prog), (~ctl.bn_aggr, stats_prog)):
                with m.If(sel):
                    with m.Switch(tstep):
                        for k, (_, x, y, c, d) in enumerate(prog):
                            with m.Case(k):
                                m.d.comb += [tx.eq(src(x)), ty.eq(src(y)), tc.eq(src(c))]
                                with m.If(t_wb):
                                    m.d.sync += dst(d).eq(r1)
            x0_in = i.payload.x0[p]
            with m.If(tail_on):
                m.d.comb += [a1.i.valid.eq(t_issue), a1.i.payload.op.eq(t_op),
                             a1.i.payload.x.eq(tx), a1.i.payload.y.eq(ty),
                             a1.i.payload.c.eq(tc)]
            with m.Elif(bn):
                m.d.comb += [a1.i.valid.eq(i.valid), a1.i.payload.op.eq(ALU_ADD),
                             a1.i.payload.x.eq(acc[bslot]), a1.i.payload.y.eq(x0_in),
                             a1.i.payload.c.eq(0)]
            with m.If(ctl.bn_stats):
                m.d.comb += [a0.i.payload.op.eq(ALU_FMA), a0.i.payload.x.eq(x0_in),
                             a0.i.payload.y.eq(x0_in), a0.i.payload.c.eq(acc[bslot + K])]
            with m.Elif(ctl.affine):
                m.d.comb += [a0.i.payload.x.eq(affine_pred(p)), a0.i.payload.y.eq(x0_in)]
            with m.If(bn & v0 & ~tail_on):
                m.d.sync += acc[bslot_d].eq(r1)
                with m.If(ctl.bn_stats):
                    m.d.sync += acc[bslot_d + K].eq(r0)
            bn_out = Mux(ctl.bn_aggr, Array([regs["M"], regs["E"]])[gemit_n],
                         Array([count_f, accl[0], accl[K]])[gemit_n])

            # TRANSPOSE: keep the B stage-0 results of this lane, emit lane (q*B + j) of beat
            # i from lane q*B + i's beat j
            tb = [Signal(32, name=f"tr{p}_{b}") for b in range(B)]
            tbufs.append(tb)
            with m.If(tr & v0):
                with m.Switch(idx0[:max(1, (B - 1).bit_length())]):
                    for b in range(B):
                        with m.Case(b):
                            m.d.sync += tb[b].eq(r0)
            outs.append((top, Mux(want_idx, sel_i, sel_v), bn_out, r1))
        for p in range(P):
            mxp, max8_out, bn_out, r1 = outs[p]
            q, j = divmod(p, B)
            tr_out = Array([tbufs[q * B + k][j] if q * B + k < P else Const(0, 32)
                            for k in range(B)])[gemit_n]
            m.d.comb += self.o.payload.r[p].eq(Mux(mxp, max8_out,
                                                   Mux(bn, bn_out, Mux(tr, tr_out, r1))))
        return m
