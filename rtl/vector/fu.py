# SPDX-License-Identifier: Apache-2.0
"""The Vector engine's function unit: two chained ALU stages per lane and the interleaved
reduction (``docs/vector.md``), plugged into a :class:`~rtl.vector.frame.LanesFrame`."""

from __future__ import annotations

import numpy as np

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.pipe import delay
from rtl.vector.alu import LaneALU
from rtl.vector.frame import fu_in_layout, fu_out_layout
from rtl.vector.isa import ALU_MAX, ALU_MIN, IOTA_BITS, MAX8_K

__all__ = ["VectorFU", "ctl_layout", "u24_to_fp32"]


def ctl_layout():
    """The function unit's per-instruction controls (held constant while it runs):
    ``op0``, ``op1``, ``rev0``, ``rev1``, ``sel0``, ``sel1``, ``imm0``, ``imm1`` as in
    :func:`~rtl.vector.isa.instr_layout` after the opcode's overrides, ``memset`` (stage 0's
    ``x`` is ``imm0``), ``iota`` (``x0`` is the element index, ``x1`` the partition index, both
    as FP32), ``reduce`` (stage 1 reduces with ``op1``; one output per instruction), ``scan``
    (stage 0's ``x`` is the previous result, ``imm0`` first, and its ``y`` is ``x0``; the frame
    runs such a command ``serial``), ``max8`` (keep the 8 largest stage-0 results per lane, then
    emit them, or with ``op1`` = 1 their element indices, as 8 beats)."""
    return data.StructLayout({"op0": 4, "op1": 4, "rev0": 1, "rev1": 1, "sel0": 1, "sel1": 1,
                              "imm0": 32, "imm1": 32, "memset": 1, "iota": 1, "reduce": 1,
                              "scan": 1, "max8": 1})


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

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

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
        with m.Elif(i.valid):
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
        # --- top 8: emit 8 beats after the last element was inserted -----------------------------
        mx = ctl.max8
        emit8 = Signal()
        emit_n = Signal(range(MAX8_K))
        with m.If(mx & v0 & last0):
            m.d.sync += [emit8.eq(1), emit_n.eq(0)]
        with m.Elif(emit8):
            m.d.sync += emit_n.eq(emit_n + 1)
            with m.If(emit_n == MAX8_K - 1):
                m.d.sync += emit8.eq(0)
        with m.If(self.start):
            m.d.sync += emit8.eq(0)
        idx0_f = u24_to_fp32(m, delay(m, idx, La, name="idx0"), "idx0")
        m.d.comb += [self.o.valid.eq(Mux(red, emit_red, Mux(mx, emit8, v1))),
                     self.o.payload.last.eq(Mux(red, 1, Mux(mx, emit_n == MAX8_K - 1, last1))),
                     self.busy.eq(comb_on | comb_issue | emit8)]
        inflight = Signal(range(2 * La + 2))
        m.d.sync += inflight.eq(inflight + i.valid - (v1 & ~comb1))
        with m.If(inflight != 0):
            m.d.comb += self.busy.eq(1)

        idx_f = u24_to_fp32(m, idx, "iota")

        # --- per lane -----------------------------------------------------------------------
        for p in range(P):
            a0 = LaneALU(self.cfg)
            a1 = LaneALU(self.cfg)
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
            acc = Array(Signal(32, name=f"acc{p}_{j}") for j in range(K))
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
                for j in range(K):
                    m.d.sync += acc[j].eq(ident)
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
            sel_v = Array(kv)[emit_n]
            sel_i = Array(ki)[emit_n]
            m.d.comb += self.o.payload.r[p].eq(Mux(mx, Mux(ctl.op1[0], sel_i, sel_v), r1))
        return m
