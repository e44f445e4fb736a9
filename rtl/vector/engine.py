# SPDX-License-Identifier: Apache-2.0
"""The Vector engine: decode and check one instruction, run it through the lanes frame and the
two-stage function unit, report its status (docs/vector.md)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.isa import ERROR_BITS
from rtl.mem.port import PSUM, SBUF, RowPort
from rtl.vector.frame import PORT_NAMES, LanesFrame
from rtl.vector.fu import VectorFU
from rtl.vector.isa import (ALU_ADD, ALU_BYPASS, ALU_EQ, ALU_GE, ALU_MAX, ALU_MIN, ALU_SEL,
                            BN_AGGR_N, BN_STATS_N, E_FORMAT, E_OPCODE, E_SHAPE, MAX8_K,
                            OP_AFFINE_SELECT, OP_BN_AGGR, OP_BN_STATS, OP_FIND_INDEX8, OP_IOTA,
                            OP_MAX8, OP_MEMSET, OP_SELECT, OP_TENSOR_TENSOR_SCAN, OP_TENSOR_COPY,
                            OP_TENSOR_REDUCE, OP_TENSOR_SCALAR, OP_TENSOR_TENSOR, OP_TRANSPOSE,
                            OPCODES, done_layout, dtype_table, instr_layout, transpose_block)

__all__ = ["VectorEngine"]


class VectorEngine(wiring.Component):
    """One decoded instruction per ``instr`` transfer, one ``done`` transfer per instruction.

    An instruction taken on ``instr`` is checked the next cycle in closed form, in this
    priority: E_OPCODE (opcode outside :data:`~rtl.vector.isa.OPCODES`; TENSOR_REDUCE with an
    ``op1`` other than add/max/min; MAX8 with ``op1`` > 1), E_FORMAT (a used AP's dtype not in
    :func:`~rtl.vector.isa.dtype_table`), E_SHAPE (used APs disagree in start partition,
    partition count or any ``num``; TENSOR_REDUCE: a destination ``num`` above 1; MAX8: a
    destination other than ``num = 8`` first and <= 1 after; FIND_INDEX8: the destination and
    src1 likewise, src0 of any shape on their partitions). A failing
    instruction reports its code at once and touches nothing. A passing one becomes a
    :class:`~rtl.vector.frame.LanesFrame` command (whose AP checks give E_AP_* in the order src0,
    src1, dst, again with nothing written) and :class:`~rtl.vector.fu.VectorFU` controls;
    ``done`` carries the frame's status. The next instruction is taken after ``done`` was taken.

    Used sources: src0 unless MEMSET or IOTA (which walk the destination AP as their element
    count);
    src1 for TENSOR_TENSOR and SELECT, for TENSOR_SCALAR with ``sel0`` or ``sel1``, for
    TENSOR_REDUCE with ``sel0``, for FIND_INDEX8 (its 8 values, read before src0: the frame's
    ``pre1``). Unused fields are ignored.

    Timing: one element per lane per cycle while the memories grant every access (TENSOR_TENSOR
    _SCAN: one per ``2 + fu.latency + 1`` cycles); ``done`` is offered in the cycle after the
    last write's grant (after the last output beat's status for a rejected destination). An
    n-element instruction takes n + 20 cycles from ``instr`` taken to ``done`` on the presets
    (measured, ``bench/bench_vector_scalar.py``; docs/vector.md §4); instructions do not
    overlap.

    Parameters
    ----------
    cfg : CoreConfig
    sbuf_latency, psum_latency : int
        Memory read latencies (both 1 for ``rtl/mem/sbuf.py`` and ``rtl/tensor/psum.py``).
    use_instances : bool
        The lanes' ALUs as ``Instance`` of one converted :class:`~rtl.vector.alu.LaneALU`
        (Verilator, yosys; :func:`~rtl.vector.fu.leaf_modules` names the module) or as
        submodules (amaranth.sim).

    Members
    -------
    instr : In(stream.Signature(instr_layout(cfg)))
    done : Out(stream.Signature(done_layout()))
    sbuf_rd0, sbuf_rd1, sbuf_wr : Out(RowPort.Signature(cfg, "sbuf"))
    psum_rd0, psum_rd1, psum_wr : Out(RowPort.Signature(cfg, "psum"))
        Sources 0 and 1 and the destination, on whichever memory their AP names.
    busy : Out(1)
        High from the cycle after an instruction is taken until its ``done`` is taken (so
        always while ``done.valid`` is high); low when idle.
    """

    class Signature(wiring.Signature):
        """Members of a :class:`VectorEngine`; attributes ``instr_layout``, ``done_layout``,
        ``frame`` (the :class:`LanesFrame` signature), ``fu`` (the :class:`VectorFU`
        signature), ``ways`` (reduce partials)."""

        def __init__(self, cfg: CoreConfig, *, sbuf_latency=1, psum_latency=1):
            check_config(cfg, "VectorEngine")
            self.fu = VectorFU.Signature(cfg)
            self.frame = LanesFrame.Signature(cfg, fu_latency=self.fu.latency,
                                              sbuf_latency=sbuf_latency,
                                              psum_latency=psum_latency)
            self.ways = self.fu.ways
            self.instr_layout, self.done_layout = instr_layout(cfg), done_layout()
            members = {"instr": In(stream.Signature(self.instr_layout)),
                       "done": Out(stream.Signature(self.done_layout)), "busy": Out(1)}
            for n in PORT_NAMES:
                members[n] = Out(RowPort.Signature(cfg, SBUF if n.startswith("sbuf") else PSUM))
            super().__init__(members)

    def __init__(self, cfg: CoreConfig, *, sbuf_latency=1, psum_latency=1, use_instances=False):
        super().__init__(self.Signature(cfg, sbuf_latency=sbuf_latency,
                                        psum_latency=psum_latency))
        self.cfg = cfg
        self.use_instances = use_instances
        self._lat = dict(sbuf_latency=sbuf_latency, psum_latency=psum_latency)

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        m.submodules.fu = fu = VectorFU(cfg, use_instances=self.use_instances)
        m.submodules.frame = fr = LanesFrame(cfg, fu_latency=fu.signature.latency, **self._lat)
        for n in PORT_NAMES:
            wiring.connect(m, getattr(fr, n), wiring.flipped(getattr(self, n)))
        wiring.connect(m, fr.fu_o, fu.i)
        wiring.connect(m, fu.o, fr.fu_i)
        m.d.comb += fu.start.eq(fr.start)

        ins = Signal(sig.instr_layout, name="ins")
        op = ins.opcode
        is_tt, is_ts = op == OP_TENSOR_TENSOR, op == OP_TENSOR_SCALAR
        is_red, is_cp = op == OP_TENSOR_REDUCE, op == OP_TENSOR_COPY
        is_ms, is_sel, is_iota = op == OP_MEMSET, op == OP_SELECT, op == OP_IOTA
        is_scan, is_max8 = op == OP_TENSOR_TENSOR_SCAN, op == OP_MAX8
        is_bns, is_bna = op == OP_BN_STATS, op == OP_BN_AGGR
        is_aff, is_tr, is_fi = op == OP_AFFINE_SELECT, op == OP_TRANSPOSE, op == OP_FIND_INDEX8
        known = Cat(*[op == k for k in OPCODES]).any()
        bad_op = (~known | (is_red & (ins.op1 != ALU_ADD) & (ins.op1 != ALU_MAX)
                            & (ins.op1 != ALU_MIN)) | (is_max8 & (ins.op1 > 1))
                  | (is_aff & ((ins.op0 < ALU_EQ) | (ins.op0 > ALU_GE))))
        use0 = ~is_ms & ~is_iota
        use1 = (is_tt | is_sel | is_scan | is_fi | (is_ts & (ins.sel0 | ins.sel1))
                | ((is_red | is_max8) & ins.sel0))
        table = dtype_table(cfg)

        def fmt_ok(dt):
            return Cat(*[dt == k for k in table]).any()
        bad_fmt = ~fmt_ok(ins.dst_dtype) | (use0 & ~fmt_ok(ins.src0_dtype)) \
            | (use1 & ~fmt_ok(ins.src1_dtype))

        def part(ap):
            return Cat(ap.start, ap.count)

        def nums(ap):
            return Cat(*[ap.dims[k].num for k in range(cfg.ap_dims)])

        def first_then_one(ap, n):
            """``num`` of the first slot is n (None: <= 1), the others <= 1."""
            first = ap.dims[0].num <= 1 if n is None else ap.dims[0].num == n
            return Cat(first, *[ap.dims[k].num <= 1 for k in range(1, cfg.ap_dims)]).all()
        fixed = is_red | is_max8 | is_bns | is_bna | is_fi  # a fixed destination count
        dst_ok = Mux(is_red, first_then_one(ins.dst, None),
                     Mux(is_max8 | is_fi, first_then_one(ins.dst, MAX8_K),
                         Mux(is_bns, first_then_one(ins.dst, BN_STATS_N),
                             first_then_one(ins.dst, BN_AGGR_N))))
        d_vs_0 = Mux(fixed,
                     (part(ins.dst) != part(ins.src0)) | ~dst_ok
                     | (is_bna & (ins.src0.dims[0].num != BN_STATS_N)),
                     (part(ins.dst) != part(ins.src0)) | (nums(ins.dst) != nums(ins.src0)))
        B = transpose_block(cfg)
        tr_bad = ((ins.src0.count != B) | (ins.src0.start % B != 0)
                  | ~first_then_one(ins.src0, B))
        s1_vs_0 = (part(ins.src1) != part(ins.src0)) | Mux(
            is_fi, ~first_then_one(ins.src1, MAX8_K), nums(ins.src1) != nums(ins.src0))
        bad_shape = (use0 & d_vs_0) | (use1 & s1_vs_0) | (is_tr & tr_bad)
        code = Signal(ERROR_BITS)
        m.d.comb += code.eq(Mux(bad_op, E_OPCODE, Mux(bad_fmt, E_FORMAT,
                                                      Mux(bad_shape, E_SHAPE, 0))))

        # function-unit controls (constant while the instruction runs)
        ctl = fu.ctl
        m.d.comb += [ctl.op0.eq(ins.op0), ctl.op1.eq(ins.op1), ctl.rev0.eq(ins.rev0),
                     ctl.rev1.eq(ins.rev1), ctl.sel0.eq(ins.sel0), ctl.sel1.eq(ins.sel1),
                     ctl.imm0.eq(ins.imm0), ctl.imm1.eq(ins.imm1), ctl.memset.eq(is_ms),
                     ctl.iota.eq(is_iota), ctl.reduce.eq(is_red), ctl.scan.eq(is_scan),
                     ctl.max8.eq(is_max8), ctl.bn_stats.eq(is_bns), ctl.bn_aggr.eq(is_bna),
                     ctl.affine.eq(is_aff), ctl.cmp.eq(ins.op0), ctl.transpose.eq(is_tr),
                     ctl.find8.eq(is_fi)]
        with m.If(is_tt | is_sel):
            m.d.comb += [ctl.op1.eq(ALU_BYPASS), ctl.sel0.eq(1), ctl.sel1.eq(0),
                         ctl.rev1.eq(0)]
            with m.If(is_sel):
                m.d.comb += [ctl.op0.eq(ALU_SEL), ctl.rev0.eq(0)]
        with m.If(is_cp | is_ms | is_fi):
            m.d.comb += [ctl.op0.eq(ALU_BYPASS), ctl.op1.eq(ALU_BYPASS), ctl.sel0.eq(0),
                         ctl.sel1.eq(0), ctl.rev0.eq(0), ctl.rev1.eq(0)]
        with m.If(is_red | is_max8):
            m.d.comb += [ctl.sel1.eq(0), ctl.rev1.eq(0)]
        with m.If(is_scan):
            m.d.comb += [ctl.sel0.eq(0), ctl.sel1.eq(1)]
        with m.If(is_bns | is_bna | is_aff | is_tr):
            m.d.comb += [ctl.op0.eq(Mux(is_aff, ALU_SEL, ALU_BYPASS)),
                         ctl.op1.eq(Mux(is_aff | is_tr, ALU_BYPASS, ALU_ADD)),
                         ctl.sel0.eq(0), ctl.sel1.eq(0), ctl.rev0.eq(0), ctl.rev1.eq(0)]

        cmd = fr.cmd.payload
        no_src = is_ms | is_iota              # walk the destination AP as the element source
        m.d.comb += [cmd.src0.eq(Mux(no_src, ins.dst.as_value(), ins.src0.as_value())),
                     cmd.src1.eq(ins.src1), cmd.dst.eq(ins.dst),
                     cmd.src0_dtype.eq(Mux(no_src, ins.dst_dtype, ins.src0_dtype)),
                     cmd.src1_dtype.eq(ins.src1_dtype), cmd.dst_dtype.eq(ins.dst_dtype),
                     cmd.use_src1.eq(use1), cmd.sr.eq(ins.sr),
                     cmd.tail.eq(Mux(is_red, 1, Mux(is_max8 | is_fi, MAX8_K, Mux(
                         is_bns, BN_STATS_N, Mux(is_bna, BN_AGGR_N, Mux(is_tr, B, 0)))))),
                     cmd.serial.eq(is_scan), cmd.pre1.eq(is_fi)]

        err = Signal(ERROR_BITS)
        with m.FSM(name="vector"):
            with m.State("IDLE"):
                m.d.comb += self.instr.ready.eq(1)
                with m.If(self.instr.valid):
                    m.d.sync += ins.eq(self.instr.payload)
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += self.busy.eq(1)
                with m.If(code != 0):
                    m.d.sync += err.eq(code)
                    m.next = "ERROR"
                with m.Else():
                    m.d.comb += fr.cmd.valid.eq(1)
                    with m.If(fr.cmd.ready):
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), self.done.valid.eq(fr.status.valid),
                             self.done.payload.status.eq(fr.status.payload.status),
                             fr.status.ready.eq(self.done.ready)]
                with m.If(fr.status.valid & self.done.ready):
                    m.next = "IDLE"
            with m.State("ERROR"):
                m.d.comb += [self.busy.eq(1), self.done.valid.eq(1),
                             self.done.payload.status.eq(err)]
                with m.If(self.done.ready):
                    m.next = "IDLE"
        return m
