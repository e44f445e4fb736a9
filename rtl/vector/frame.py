# SPDX-License-Identifier: Apache-2.0
"""The lanes frame: AP readers -> decode to FP32 -> a function unit -> encode -> AP writer.

A reusable shell for the engines that stream elements of SBUF/PSUM through a per-lane function
unit (the Vector engine today; the Scalar engine's function unit can use it unchanged). The
frame owns the memory side (two source APs and one destination AP, each on SBUF or PSUM), the
format conversions, back-pressure, the error sequencing (nothing written on a bad AP) and the
completion status; the function unit only computes.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.pipe import delay
from rtl.fp.widen import WidenToFP32
from rtl.isa import ERROR_BITS
from rtl.mem.ap import MEM_PSUM, APGenerator
from rtl.mem.apport import APReader, APWriter
from rtl.mem.port import LANE_BITS, PSUM, SBUF, RowPort
from rtl.vector.isa import dtype_table, transpose_block

__all__ = ["LanesFrame", "cmd_layout", "fu_in_layout", "fu_out_layout", "PORT_NAMES"]

#: The frame's row ports: two source readers and one writer on each memory (a source or the
#: destination on SBUF uses the ``sbuf_*`` port, on PSUM the ``psum_*`` one).
PORT_NAMES = ("sbuf_rd0", "sbuf_rd1", "sbuf_wr", "psum_rd0", "psum_rd1", "psum_wr")


def cmd_layout(cfg: CoreConfig):
    """One frame command: ``src0``, ``src1``, ``dst`` (AP descriptors; ``esize`` is replaced by
    the dtype's), ``src0_dtype``, ``src1_dtype``, ``dst_dtype`` (§8.3 codes of
    :func:`~rtl.vector.isa.dtype_table`; the caller has rejected the others), ``use_src1``,
    ``sr`` (stochastic rounding on write), ``tail`` (0: one result per input beat; k > 0: the
    function unit answers the whole instruction with k beats after the input beat with
    ``last``: 1 for a reduction, 8 for a top-8, 3 / 2 for BN_STATS / BN_AGGR, ``B`` for a
    transpose), ``serial`` (one
    beat at a time: the next beat enters only after the previous one's result came back on
    ``fu_i``, for a unit whose result feeds its next input: a scan), ``pre1`` (with
    ``use_src1``: src1's elements first, alone, as ``pre`` beats that give no result, then
    src0's alone: operands of different shapes, FIND_INDEX8's 8 values, then its data)."""
    desc = APGenerator.Signature(check_config(cfg, "cmd_layout")).in_layout
    return data.StructLayout({"src0": desc, "src1": desc, "dst": desc, "src0_dtype": 4,
                              "src1_dtype": 4, "dst_dtype": 4, "use_src1": 1, "sr": 1,
                              "tail": 6, "serial": 1, "pre1": 1})


def fu_in_layout(cfg: CoreConfig):
    """A beat to the function unit: ``x0``, ``x1`` (FP32 lanes of src0 / src1; ``x1`` is
    undefined without src1), ``last``, ``pre`` (a src1 element of a ``pre1`` command: ``x1``
    holds it, ``x0`` is undefined; no result is due)."""
    lanes = data.ArrayLayout(32, cfg.partitions)
    return data.StructLayout({"x0": lanes, "x1": lanes, "last": 1, "pre": 1})


def fu_out_layout(cfg: CoreConfig):
    """A beat from the function unit: ``r`` (FP32 lanes), ``last``."""
    return data.StructLayout({"r": data.ArrayLayout(32, cfg.partitions), "last": 1})


class LanesFrame(wiring.Component):
    """Runs one command at a time: read, decode, compute (outside), encode, write.

    Sequence of a command taken on ``cmd`` (``start`` strobes in that cycle):

    1. the source descriptors go to the readers of their memories (``mem`` 2: PSUM, anything
       else: SBUF, whose generator rejects a code other than 1 with E_AP_FORM); both are
       checked in closed form by their AP generators (3 cycles).
    2. A rejected source: status = its code (src0 first), the other reader's elements (if it
       was accepted) are discarded, nothing is written.
    3. Both accepted: the destination descriptor goes to its writer while elements already
       stream: one beat per cycle when both sources have one and the output buffer has room,
       widened to FP32 (2 cycles), through the function unit (``fu_o`` -> ``fu_i``), encoded
       into the destination format with RNE or SR (3 cycles; FP32 passes unchanged and does not
       step the PRNG), buffered, written. A rejected destination: status = its code, every
       element is still computed and discarded (nothing written). Otherwise status 0 when the
       last write is granted.
    4. ``status`` carries the code until taken; then the next command is taken.

    With ``serial`` a beat enters only when the previous one's result has returned (a unit whose
    result is its next input): one beat per ``widen + fu_latency + 1`` cycles.

    With ``pre1`` (and ``use_src1``) the sources do not pair up: src1's elements enter first,
    one per cycle, as ``pre`` beats (no result, no output slot), then src0's, one per cycle,
    each with its own ``last``. Both readers start together, so src0's first elements are
    already buffered when src1's last has entered.

    The output buffer holds ``depth`` beats and a beat enters the pipeline only with a slot
    reserved (for ``tail`` commands the last beat reserves all ``tail`` slots), so no beat is ever lost
    and memory stalls or a slow ``status`` consumer never hang the frame.

    Parameters
    ----------
    cfg : CoreConfig
    fu_latency : int
        Cycles from a ``fu_o`` beat to its ``fu_i`` beat (elementwise); sizes the buffer.
    sbuf_latency, psum_latency : int
        Read latencies of the memories (``SBUF.Signature(...).latency``,
        ``PsumUnit.Signature(...).row_latency``; both 1).

    Members
    -------
    cmd : In(stream.Signature(cmd_layout(cfg)))
    status : Out(stream.Signature(StructLayout({"status": ERROR_BITS})))
    start : Out(1)
        Strobe: a command was taken (reset the function unit's per-instruction state).
    fu_o : Out(stream.Signature(fu_in_layout(cfg), always_ready=True))
    fu_i : In(stream.Signature(fu_out_layout(cfg), always_ready=True))
    sbuf_rd0, sbuf_rd1, sbuf_wr : Out(RowPort.Signature(cfg, "sbuf"))
    psum_rd0, psum_rd1, psum_wr : Out(RowPort.Signature(cfg, "psum"))
    busy : Out(1)
        A command is running or its status waits.
    """

    class Signature(wiring.Signature):
        """Members of a :class:`LanesFrame`; attributes ``depth`` (output buffer),
        ``widen_latency``, ``convert_latency``, ``read_latency`` (descriptor taken -> first
        element out of a reader)."""

        def __init__(self, cfg: CoreConfig, *, fu_latency, sbuf_latency=1, psum_latency=1):
            check_config(cfg, "LanesFrame")
            if isinstance(fu_latency, bool) or not isinstance(fu_latency, int) \
                    or not 0 <= fu_latency <= 64:
                raise ValueError(f"LanesFrame fu_latency must be an integer in [0, 64], "
                                 f"not {fu_latency!r}")
            self.fu_latency = fu_latency
            self.sbuf_latency, self.psum_latency = sbuf_latency, psum_latency
            self.widen_latency = 2
            self.convert_latency = 3
            # full rate through the loop; at least 15 and the transpose block so that any
            # ``tail`` fits
            self.depth = max(15, transpose_block(cfg),
                             self.widen_latency + fu_latency + self.convert_latency + 3)
            self.read_latency = APReader.Signature(
                cfg, SBUF, mem_latency=max(sbuf_latency, psum_latency)).latency
            members = {
                "cmd": In(stream.Signature(cmd_layout(cfg))),
                "status": Out(stream.Signature(data.StructLayout({"status": ERROR_BITS}))),
                "start": Out(1),
                "fu_o": Out(stream.Signature(fu_in_layout(cfg), always_ready=True)),
                "fu_i": In(stream.Signature(fu_out_layout(cfg), always_ready=True)),
                "busy": Out(1),
            }
            for n in PORT_NAMES:
                members[n] = Out(RowPort.Signature(cfg, SBUF if n.startswith("sbuf") else PSUM))
            super().__init__(members)

    def __init__(self, cfg: CoreConfig, *, fu_latency, sbuf_latency=1, psum_latency=1):
        super().__init__(self.Signature(cfg, fu_latency=fu_latency, sbuf_latency=sbuf_latency,
                                        psum_latency=psum_latency))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P = cfg.partitions
        table = dtype_table(cfg)
        narrow = tuple(n for n, _, k in table.values() if k is not None)

        # --- readers and writers ------------------------------------------------------------
        rd = {}
        for k in (0, 1):
            for mem, lat in ((SBUF, sig.sbuf_latency), (PSUM, sig.psum_latency)):
                r = APReader(cfg, mem, mem_latency=lat)
                m.submodules[f"{mem}_rd{k}"] = r
                wiring.connect(m, r.port, wiring.flipped(getattr(self, f"{mem}_rd{k}")))
                rd[mem, k] = r
        wr = {}
        for mem in (SBUF, PSUM):
            w = APWriter(cfg, mem)
            m.submodules[f"{mem}_wr"] = w
            wiring.connect(m, w.port, wiring.flipped(getattr(self, f"{mem}_wr")))
            wr[mem] = w

        c = Signal(cmd_layout(cfg), name="c")             # the command running
        m.d.comb += self.start.eq(self.cmd.valid & self.cmd.ready)
        with m.If(self.start):
            m.d.sync += c.eq(self.cmd.payload)

        def info(dtype, name):
            """(esize, narrow index, is fp32) of a dtype code."""
            es = Signal(2, name=f"{name}_esize")
            ix = Signal(range(max(1, len(narrow))), name=f"{name}_ix")
            f32 = Signal(name=f"{name}_fp32")
            with m.Switch(dtype):
                for code, (_, e, k) in table.items():
                    with m.Case(code):
                        m.d.comb += [es.eq(e), ix.eq(k or 0), f32.eq(k is None)]
            return es, ix, f32

        es0, ix0, f0 = info(c.src0_dtype, "src0")
        es1, ix1, f1 = info(c.src1_dtype, "src1")
        esd, ixd, fd = info(c.dst_dtype, "dst")

        def desc(ap, es, name):
            d = Signal(ap.shape(), name=name)
            m.d.comb += [d.eq(ap), d.esize.eq(es)]
            return d
        d0, d1, dd = desc(c.src0, es0, "d0"), desc(c.src1, es1, "d1"), desc(c.dst, esd, "dd")
        p0, p1, pd = (c.src0.mem == MEM_PSUM), (c.src1.mem == MEM_PSUM), (c.dst.mem == MEM_PSUM)
        use1 = c.use_src1

        def pick(sel, attr, k):
            a, b = getattr(rd[SBUF, k], attr), getattr(rd[PSUM, k], attr)
            return Mux(sel, b, a)

        # the outputs of the readers the sources are routed to
        r0s, r0p, r1s, r1p = rd[SBUF, 0], rd[PSUM, 0], rd[SBUF, 1], rd[PSUM, 1]
        o0v = Mux(p0, r0p.o.valid, r0s.o.valid)
        o1v = Mux(p1, r1p.o.valid, r1s.o.valid)
        o0 = data.View(r0s.o.payload.shape(), Mux(p0, r0p.o.payload.as_value(),
                                                  r0s.o.payload.as_value()))
        o1 = data.View(r1s.o.payload.shape(), Mux(p1, r1p.o.payload.as_value(),
                                                  r1s.o.payload.as_value()))
        ok0, err0, code0 = pick(p0, "ok", 0), pick(p0, "err", 0), pick(p0, "err_code", 0)
        ok1, err1, code1 = pick(p1, "ok", 1), pick(p1, "err", 1), pick(p1, "err_code", 1)
        wd = {SBUF: ~pd, PSUM: pd}

        # --- strobes collected per command ---------------------------------------------------
        got0, got1, bad0, bad1 = (Signal(name=n) for n in ("got0", "got1", "bad0", "bad1"))
        sc0, sc1 = Signal(ERROR_BITS, name="sc0"), Signal(ERROR_BITS, name="sc1")
        with m.If(self.start):
            m.d.sync += [got0.eq(0), got1.eq(0), bad0.eq(0), bad1.eq(0)]
        with m.Elif(ok0 | err0):
            m.d.sync += [got0.eq(1), bad0.eq(err0), sc0.eq(code0)]
        with m.If(~self.start & (ok1 | err1)):
            m.d.sync += [got1.eq(1), bad1.eq(err1), sc1.eq(code1)]
        t0, t1, td = Signal(name="t0"), Signal(name="t1"), Signal(name="td")
        status = Signal(ERROR_BITS)

        # --- the element pipeline -----------------------------------------------------------
        D = sig.depth
        m.submodules.obuf = ob = fifo.SyncFIFO(width=P * LANE_BITS + 1, depth=D)
        reserved = Signal(range(D + 1))
        flow = Signal()                     # sources accepted: elements may stream
        drain_out = Signal()                # destination rejected: discard the output
        drain_src = Signal()                # a source rejected: discard the other's elements
        pre_on = Signal()                   # pre1: src1's elements still entering, alone
        pair = use1 & ~c.pre1               # src1 enters alongside src0, element by element
        have = Mux(pre_on, o1v, o0v & (~pair | o1v))
        beat_last = o0.last & ~pre_on
        reserve = Signal()
        fire = Signal()
        in_fu = Signal()                    # serial: a beat is between fire and its result
        with m.If(self.start):
            m.d.sync += in_fu.eq(0)
        with m.Elif(fire):
            m.d.sync += in_fu.eq(1)
        with m.Elif(self.fu_i.valid):
            m.d.sync += in_fu.eq(0)
        need = Signal(7)                    # output slots this beat reserves
        m.d.comb += need.eq(Mux(pre_on, 0, Mux(c.tail == 0, 1, Mux(beat_last, c.tail, 0))))
        m.d.comb += [fire.eq(flow & have & (reserved + need <= D) & ~(c.serial & in_fu)),
                     reserve.eq(fire)]
        take_out = ob.r_en & ob.r_rdy
        m.d.sync += reserved.eq(reserved + Mux(reserve, need, 0) - take_out)
        with m.If(self.start):
            m.d.sync += pre_on.eq(self.cmd.payload.use_src1 & self.cmd.payload.pre1)
        with m.Elif(fire & pre_on & o1.last):
            m.d.sync += pre_on.eq(0)
        src_ready0 = (fire & ~pre_on) | (drain_src & ~bad0)
        src_ready1 = (fire & (pre_on | pair)) | (drain_src & ~bad1)
        for k, (sel, rdy) in enumerate(((p0, src_ready0), (p1, src_ready1))):
            m.d.comb += [rd[SBUF, k].o.ready.eq(~sel & rdy), rd[PSUM, k].o.ready.eq(sel & rdy)]

        W = sig.widen_latency
        xs = []
        for k, (o, ix, f) in enumerate(((o0, ix0, f0), (o1, ix1, f1))):
            lanes = []
            for p in range(P):
                raw = o.data[p]
                if narrow:
                    wdn = WidenToFP32(cfg, formats=narrow)
                    m.submodules[f"widen{k}_{p}"] = wdn
                    m.d.comb += [wdn.i.valid.eq(fire), wdn.i.payload.code.eq(raw),
                                 wdn.i.payload.fmt.eq(ix)]
                    lanes.append(Mux(f, delay(m, raw, W, name=f"raw{k}_{p}"),
                                     wdn.o.payload.x))
                else:
                    lanes.append(delay(m, raw, W, name=f"raw{k}_{p}"))
            xs.append(lanes)
        m.d.comb += [self.fu_o.valid.eq(delay(m, fire, W, name="fv")),
                     self.fu_o.payload.last.eq(delay(m, beat_last, W, name="fl")),
                     self.fu_o.payload.pre.eq(delay(m, pre_on, W, name="fp"))]
        for p in range(P):
            m.d.comb += [self.fu_o.payload.x0[p].eq(xs[0][p]), self.fu_o.payload.x1[p].eq(xs[1][p])]

        Cv = sig.convert_latency
        r = self.fu_i.payload
        out_lanes = []
        for p in range(P):
            if narrow:
                cv = ConvertFromFP32(cfg, formats=narrow, lane=p)
                m.submodules[f"conv{p}"] = cv
                m.d.comb += [cv.i.valid.eq(self.fu_i.valid & ~fd), cv.i.payload.x.eq(r.r[p]),
                             cv.i.payload.fmt.eq(ixd), cv.i.payload.sr.eq(c.sr)]
                out_lanes.append(Mux(fd, delay(m, r.r[p], Cv, name=f"res{p}"), cv.o.payload.code))
            else:
                out_lanes.append(delay(m, r.r[p], Cv, name=f"res{p}"))
        m.d.comb += [ob.w_en.eq(delay(m, self.fu_i.valid, Cv, name="ov")),
                     ob.w_data.eq(Cat(*out_lanes, delay(m, r.last, Cv, name="ol")))]
        ob_lanes = data.View(data.ArrayLayout(LANE_BITS, P), ob.r_data[:P * LANE_BITS])
        ob_last = ob.r_data[P * LANE_BITS]
        for mem in (SBUF, PSUM):
            w = wr[mem]
            for p in range(P):
                m.d.comb += w.el.payload.data[p].eq(ob_lanes[p])
            m.d.comb += w.el.valid.eq(ob.r_rdy & ~drain_out & wd[mem])
        m.d.comb += ob.r_en.eq(drain_out | Mux(pd, wr[PSUM].el.ready, wr[SBUF].el.ready))
        w_err = Mux(pd, wr[PSUM].err, wr[SBUF].err)
        w_code = Mux(pd, wr[PSUM].err_code, wr[SBUF].err_code)
        w_done = Mux(pd, wr[PSUM].done, wr[SBUF].done)

        # --- control ---------------------------------------------------------------------------
        for mem in (SBUF, PSUM):
            for k, dsc in enumerate((d0, d1)):
                m.d.comb += rd[mem, k].i.payload.eq(dsc)
            m.d.comb += wr[mem].i.payload.eq(dd)
        with m.FSM(name="frame"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [t0.eq(0), t1.eq(0), td.eq(0)]
                    m.next = "SRC"
            with m.State("SRC"):
                m.d.comb += self.busy.eq(1)
                g0 = Mux(p0, r0p.i.ready, r0s.i.ready)
                g1 = Mux(p1, r1p.i.ready, r1s.i.ready)
                m.d.comb += [r0s.i.valid.eq(~t0 & ~p0), r0p.i.valid.eq(~t0 & p0),
                             r1s.i.valid.eq(~t1 & use1 & ~p1), r1p.i.valid.eq(~t1 & use1 & p1)]
                with m.If(~t0 & g0):
                    m.d.sync += t0.eq(1)
                with m.If(~t1 & use1 & g1):
                    m.d.sync += t1.eq(1)
                with m.If((t0 | g0) & (t1 | g1 | ~use1)):
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                with m.If(got0 & (got1 | ~use1)):
                    with m.If(bad0 | (use1 & bad1)):
                        m.d.sync += status.eq(Mux(bad0, sc0, sc1))
                        with m.If(use1 & (bad0 != bad1)):
                            m.next = "DRAIN_SRC"
                        with m.Else():
                            m.next = "DONE"
                    with m.Else():
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), flow.eq(1)]
                m.d.comb += [wr[SBUF].i.valid.eq(~td & ~pd), wr[PSUM].i.valid.eq(~td & pd)]
                with m.If(Mux(pd, wr[PSUM].i.ready, wr[SBUF].i.ready)):
                    m.d.sync += td.eq(1)
                with m.If(w_err):
                    m.d.sync += status.eq(w_code)
                    m.next = "DRAIN_OUT"
                with m.Elif(w_done):
                    m.d.sync += status.eq(0)
                    m.next = "DONE"
            with m.State("DRAIN_SRC"):
                m.d.comb += [self.busy.eq(1), drain_src.eq(1)]
                last_gone = Mux(bad0, o1v & o1.last, o0v & o0.last)
                with m.If(last_gone):
                    m.next = "DONE"
            with m.State("DRAIN_OUT"):
                m.d.comb += [self.busy.eq(1), flow.eq(1), drain_out.eq(1)]
                with m.If(take_out & ob_last):
                    m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [self.busy.eq(1), self.status.valid.eq(1),
                             self.status.payload.status.eq(status)]
                with m.If(self.status.ready):
                    m.next = "IDLE"
        return m
