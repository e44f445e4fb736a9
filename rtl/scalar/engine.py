# SPDX-License-Identifier: Apache-2.0
"""The Scalar (activation) engine: ``ACTIVATION`` / ``COPY`` instructions over SBUF and PSUM
access patterns, P function-unit lanes (docs/scalar.md §7; contract
``golden.activation.execute``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import FP32, check_config
from rtl.fp.adder import FP32Adder
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.fma import FMA
from rtl.fp.pipe import delay
from rtl.fp.widen import WidenToFP32
from rtl.mem.apport import APReader, APWriter
from rtl.mem.port import LANE_BITS, PSUM, SBUF, RowPort
from rtl.scalar.function import FunctionUnit, table_write_layout
from rtl.scalar.isa import (E_FORMAT, E_OK, E_OPCODE, E_SHAPE, FUNCTION_NAMES, OP_ACTIVATION,
                            OP_COPY, OPERAND_AP, REDUCE_REDUCE, REDUCE_RESET,
                            REDUCE_RESET_REDUCE, done_layout, instr_layout)

__all__ = ["ScalarEngine"]

#: §8.3 dtype codes of the dense formats.
_DTYPES = {0: "fp32", 1: "tf32", 2: "bf16", 3: "fp16", 4: "fp8_e5m2", 5: "fp8_e4m3",
           6: "fp8_e4m3fn", 7: "cfp8"}
_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
_MEM_PSUM = 2


class ScalarEngine(wiring.Component):
    """P lanes of ``y = f(RNE(x * scale + bias))`` between SBUF/PSUM access patterns.

    One instruction at a time: the static checks (``E_OPCODE``, ``E_FORMAT``, ``E_SHAPE``), then
    the source AP is given to the reader of its memory (rejected: its code), then the
    destination AP to the writer of its memory (rejected: its code; the elements already read
    are discarded). Accepted: elements stream reader -> widen -> fused MAC with ``scale``/``bias``
    -> :class:`FunctionUnit` (``COPY`` bypasses it) -> convert (RNE/SR) -> output FIFO -> writer,
    one element per lane per cycle; ``reduce_cmd`` accumulates the FP32 results of the AP's
    partitions in AP order (a single-cycle FP32 adder per lane). ``done`` carries the status
    when the last write was granted (or at once for a rejected instruction, after any
    discarded elements drained). Nothing is written for a rejected instruction and the
    accumulators are unchanged.

    v1 limits: scale/bias immediates only (``OPERAND_AP`` -> ``E_OPCODE``), opcodes ACTIVATION
    and COPY (others -> ``E_OPCODE``); tables load through ``tw`` (broadcast to every lane) while
    the engine is idle, and ACTIVATION runs only for the function id of the loaded table (word 9
    of the image; another id -> ``E_OPCODE``).

    Parameters
    ----------
    cfg : CoreConfig
    sbuf_latency, psum_latency : int
        Read latencies of the SBUF / PSUM row ports (size the readers' buffers).

    Members
    -------
    instr : In(stream.Signature(instr_layout(cfg)))
    done : Out(stream.Signature(done_layout(cfg)))
    tw : In(stream.Signature(table_write_layout(cfg), always_ready=True))
    acc : Out(ArrayLayout(32, partitions))
        The per-partition FP32 accumulators.
    busy : Out(1)
    sbuf_rd, psum_rd, sbuf_wr, psum_wr : Out(RowPort.Signature(cfg, ...))
    """

    class Signature(wiring.Signature):
        """Members of a :class:`ScalarEngine`; attribute ``pipe_latency`` (element taken from
        the reader -> its code at the output FIFO)."""

        def __init__(self, cfg, *, sbuf_latency=1, psum_latency=1):
            check_config(cfg, "ScalarEngine")
            fu = FunctionUnit.Signature(cfg)
            self.pipe_latency = (WidenToFP32.Signature(cfg).latency + fu.fma.latency
                                 + fu.latency + ConvertFromFP32.Signature(cfg).latency)
            self.sbuf_latency, self.psum_latency = sbuf_latency, psum_latency
            super().__init__({
                "instr": In(stream.Signature(instr_layout(cfg))),
                "done": Out(stream.Signature(done_layout(cfg))),
                "tw": In(stream.Signature(table_write_layout(cfg), always_ready=True)),
                "acc": Out(data.ArrayLayout(32, cfg.partitions)),
                "busy": Out(1),
                "sbuf_rd": Out(RowPort.Signature(cfg, SBUF)),
                "psum_rd": Out(RowPort.Signature(cfg, PSUM)),
                "sbuf_wr": Out(RowPort.Signature(cfg, SBUF)),
                "psum_wr": Out(RowPort.Signature(cfg, PSUM)),
            })

    def __init__(self, cfg, *, sbuf_latency=1, psum_latency=1):
        super().__init__(self.Signature(cfg, sbuf_latency=sbuf_latency,
                                        psum_latency=psum_latency))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P = cfg.partitions
        # --- memories' AP ports ---------------------------------------------------------------
        rs = APReader(cfg, SBUF, mem_latency=sig.sbuf_latency)
        rp = APReader(cfg, PSUM, mem_latency=sig.psum_latency)
        ws, wp = APWriter(cfg, SBUF), APWriter(cfg, PSUM)
        m.submodules.rd_sbuf, m.submodules.rd_psum = rs, rp
        m.submodules.wr_sbuf, m.submodules.wr_psum = ws, wp
        wiring.connect(m, rs.port, wiring.flipped(self.sbuf_rd))
        wiring.connect(m, rp.port, wiring.flipped(self.psum_rd))
        wiring.connect(m, ws.port, wiring.flipped(self.sbuf_wr))
        wiring.connect(m, wp.port, wiring.flipped(self.psum_wr))

        ins = Signal(instr_layout(cfg))
        rsel = ins.src.mem == _MEM_PSUM
        wsel = ins.dst.mem == _MEM_PSUM

        # --- dtype tables ---------------------------------------------------------------------
        wfmts = WidenToFP32.Signature(cfg).formats
        cfmts = ConvertFromFP32.Signature(cfg).formats
        wname = [f.name for f in wfmts]
        cname = [f.name for f in cfmts]

        def dtype_info(code, esize):
            """(legal, is_fp32, widen index, convert index) of dtype ``code`` on an AP of
            element size ``esize``."""
            legal, is32, wi, ci = Signal(), Signal(), Signal(range(len(wfmts))), \
                Signal(range(len(cfmts)))
            with m.Switch(code):
                for c, name in _DTYPES.items():
                    if name != "fp32" and name not in cfg.formats:
                        continue
                    nbytes = _BYTES.get(name, 1)
                    with m.Case(c):
                        m.d.comb += [legal.eq(esize == nbytes.bit_length() - 1),
                                     is32.eq(name == "fp32")]
                        if name in wname:
                            m.d.comb += wi.eq(wname.index(name))
                        if name in cname:
                            m.d.comb += ci.eq(cname.index(name))
            return legal, is32, wi, ci

        s_ok, s_32, s_wi, _ = dtype_info(ins.src_dtype, ins.src.esize)
        d_ok, d_32, _, d_ci = dtype_info(ins.dst_dtype, ins.dst.esize)

        def count(ap):
            prod, act = Const(1, 64), Const(1, 1)
            for d in ap.dims:
                act = act & (d.num != 0)
                prod = prod * Mux(act, d.num, 1)
            return prod
        shape_bad = ((ins.src.start != ins.dst.start) | (ins.src.count != ins.dst.count)
                     | (count(ins.src) != count(ins.dst)))
        is_act = ins.opcode == OP_ACTIVATION
        loaded = Signal(8)                               # table image word 9: its function id
        with m.If(self.tw.valid & (self.tw.payload.addr == 9)):
            m.d.sync += loaded.eq(self.tw.payload.data[:8])
        static = Signal(8)
        with m.If(~(is_act | (ins.opcode == OP_COPY))
                  | (is_act & ((ins.func >= len(FUNCTION_NAMES)) | (ins.func != loaded)))
                  | (ins.scale_src == OPERAND_AP) | (ins.bias_src == OPERAND_AP)):
            m.d.comb += static.eq(E_OPCODE)
        with m.Elif(~s_ok | ~d_ok):
            m.d.comb += static.eq(E_FORMAT)
        with m.Elif(shape_bad):
            m.d.comb += static.eq(E_SHAPE)
        with m.Else():
            m.d.comb += static.eq(E_OK)

        # --- element pipeline -----------------------------------------------------------------
        D = sig.pipe_latency + 4
        m.submodules.outq = outq = fifo.SyncFIFO(width=P * LANE_BITS, depth=D)
        in_flight = Signal(range(D + 1))
        discard = Signal()
        commit = Signal()
        el_valid = Mux(rsel, rp.o.valid, rs.o.valid)
        el = data.View(rs.o.payload.shape(), Mux(rsel, rp.o.payload.as_value(),
                                                 rs.o.payload.as_value()))
        credit = (in_flight + outq.level) < D
        take = Signal()
        m.d.comb += [take.eq(el_valid & credit),
                     rs.o.ready.eq(~rsel & credit), rp.o.ready.eq(rsel & credit)]
        out_valid = delay(m, take, sig.pipe_latency, name="ov")
        m.d.sync += in_flight.eq(in_flight + take - out_valid)
        fu_lat = FunctionUnit.Signature(cfg).latency
        w_lat = WidenToFP32.Signature(cfg).latency
        fma_lat = FunctionUnit.Signature(cfg).fma.latency
        c_lat = ConvertFromFP32.Signature(cfg).latency
        t_acc = w_lat + fma_lat + fu_lat             # FP32 result of the element at the adder
        acc_v = delay(m, take, t_acc, name="accv")
        mask_a = delay(m, el.mask, t_acc, name="acc_mask")
        red = commit & ((ins.reduce_cmd == REDUCE_REDUCE)
                        | (ins.reduce_cmd == REDUCE_RESET_REDUCE))
        start_reset = Signal()
        codes = []
        adder_cfg = cfg.replace(add_stages=0)
        for p in range(P):
            wd = WidenToFP32(cfg)
            m.submodules[f"widen{p}"] = wd
            m.d.comb += [wd.i.valid.eq(take), wd.i.payload.code.eq(el.data[p]),
                         wd.i.payload.fmt.eq(s_wi)]
            x = Mux(s_32, delay(m, el.data[p], w_lat, name=f"x32_{p}"), wd.o.payload.x)
            pre = FMA(cfg, formats_a=(FP32,), formats_b=(FP32,))
            m.submodules[f"pre{p}"] = pre
            m.d.comb += [pre.i.valid.eq(1), pre.i.payload.a.eq(x),
                         pre.i.payload.b.eq(ins.scale), pre.i.payload.c.eq(ins.bias)]
            fu = FunctionUnit(cfg)
            m.submodules[f"fu{p}"] = fu
            m.d.comb += [fu.i.valid.eq(1), fu.i.payload.x.eq(pre.o.payload.result),
                         fu.tw.valid.eq(self.tw.valid), fu.tw.payload.eq(self.tw.payload)]
            y = Mux(is_act, fu.o.payload.y,
                    delay(m, pre.o.payload.result, fu_lat, name=f"copy{p}"))
            add = FP32Adder(adder_cfg)
            m.submodules[f"acc_add{p}"] = add
            m.d.comb += [add.i.valid.eq(1), add.i.payload.a.eq(self.acc[p]),
                         add.i.payload.b.eq(y)]
            with m.If(start_reset & (ins.src.start <= p) & (p < ins.src.start + ins.src.count)):
                m.d.sync += self.acc[p].eq(0)
            with m.Elif(red & acc_v & mask_a[p]):
                m.d.sync += self.acc[p].eq(add.o.payload.result)
            cv = ConvertFromFP32(cfg, lane=p)
            m.submodules[f"conv{p}"] = cv
            m.d.comb += [cv.i.valid.eq(acc_v), cv.i.payload.x.eq(y), cv.i.payload.fmt.eq(d_ci),
                         cv.i.payload.sr.eq(ins.sr)]
            codes.append(Mux(d_32, delay(m, y, c_lat, name=f"y32_{p}"), cv.o.payload.code))
        m.d.comb += [outq.w_en.eq(out_valid & ~discard), outq.w_data.eq(Cat(*codes))]
        for w, sel in ((ws, ~wsel), (wp, wsel)):
            m.d.comb += [w.el.valid.eq(sel & outq.r_rdy),
                         w.el.payload.data.as_value().eq(outq.r_data)]
        m.d.comb += outq.r_en.eq(Mux(wsel, wp.el.ready, ws.el.ready))

        # --- control --------------------------------------------------------------------------
        status = Signal(8)
        wcnt = Signal(range(ws.signature.latency + 3))
        m.d.comb += [rs.i.payload.eq(ins.src), rp.i.payload.eq(ins.src),
                     ws.i.payload.eq(ins.dst), wp.i.payload.eq(ins.dst)]
        r_err = Mux(rsel, rp.err, rs.err)
        r_ok = Mux(rsel, rp.ok, rs.ok)
        r_code = Mux(rsel, rp.err_code, rs.err_code)
        w_err = Mux(wsel, wp.err, ws.err)
        w_code = Mux(wsel, wp.err_code, ws.err_code)
        w_done = Mux(wsel, wp.done, ws.done)
        idle_pipe = (in_flight == 0) & ~outq.r_rdy & ~rs.busy & ~rp.busy
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.instr.ready.eq(1)
                with m.If(self.instr.valid):
                    m.d.sync += [ins.eq(self.instr.payload), discard.eq(0)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(static != E_OK):
                    m.d.sync += status.eq(static)
                    m.next = "DONE"
                with m.Else():
                    m.next = "SRC"
            with m.State("SRC"):
                m.d.comb += [rs.i.valid.eq(~rsel), rp.i.valid.eq(rsel)]
                with m.If(Mux(rsel, rp.i.ready, rs.i.ready)):
                    m.next = "SRC_WAIT"
            with m.State("SRC_WAIT"):
                with m.If(r_err):
                    m.d.sync += status.eq(r_code)
                    m.next = "DONE"
                with m.Elif(r_ok):
                    m.next = "DST"
            with m.State("DST"):
                m.d.comb += [ws.i.valid.eq(~wsel), wp.i.valid.eq(wsel)]
                with m.If(Mux(wsel, wp.i.ready, ws.i.ready)):
                    m.d.sync += wcnt.eq(0)
                    m.next = "DST_WAIT"
            with m.State("DST_WAIT"):
                m.d.sync += wcnt.eq(wcnt + 1)
                with m.If(w_err):
                    m.d.sync += [status.eq(w_code), discard.eq(1)]
                    m.next = "DRAIN"
                with m.Elif(wcnt == ws.signature.latency + 1):
                    m.d.comb += start_reset.eq((ins.reduce_cmd == REDUCE_RESET)
                                               | (ins.reduce_cmd == REDUCE_RESET_REDUCE))
                    m.d.sync += [commit.eq(1), status.eq(E_OK)]
                    m.next = "RUN"
            with m.State("RUN"):
                with m.If(w_done):
                    m.next = "DONE"
            with m.State("DRAIN"):
                with m.If(idle_pipe):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.done.valid.eq(1), self.done.payload.status.eq(status),
                             self.done.payload.opcode.eq(ins.opcode)]
                with m.If(self.done.ready):
                    m.d.sync += [commit.eq(0), discard.eq(0)]
                    m.next = "IDLE"
        m.d.comb += self.busy.eq(~self.instr.ready | ~idle_pipe)
        return m
