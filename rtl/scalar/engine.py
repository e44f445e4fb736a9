# SPDX-License-Identifier: Apache-2.0
"""The Scalar (activation) engine: ``ACTIVATION`` / ``COPY`` / ``ACT_TABLE_LOAD`` instructions
over SBUF and PSUM access patterns, P function-unit lanes (docs/scalar.md §7; contract
``golden.activation.execute``)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import (ACT_BINADES, ACT_MAP_BASE, ACT_SEG_BASE, ACT_SEG_STRIDE, AP_NUM_BITS,
                        AP_OFFSET_BITS, AP_PART_BITS, AP_STEP_BITS, DENSE_FORMAT_NAMES, FP32,
                        check_config)
from rtl.fp.adder import FP32Adder
from rtl.fp.convert import ConvertFromFP32
from rtl.fp.fma import FMA
from rtl.fp.pipe import delay
from rtl.fp.widen import WidenToFP32
from rtl.isa import DTYPES, ERROR_BITS
from rtl.leaf import Leaf
from rtl.mem.apport import APReader, APWriter
from rtl.mem.port import LANE_BITS, PSUM, SBUF, RowPort
from rtl.scalar.function import NCOEF, FunctionUnit, table_write_layout
from rtl.scalar.isa import (E_FORMAT, E_OK, E_OPCODE, E_SHAPE, FUNCTION_NAMES, OP_ACT_TABLE_LOAD,
                            OP_ACTIVATION, OP_COPY, REDUCE_REDUCE, REDUCE_RESET,
                            REDUCE_RESET_REDUCE, TABLE_HEADER_WORDS, done_layout, instr_layout)
from rtl.tensor.layouts import config_tag

__all__ = ["ScalarEngine", "fu_module_name", "leaf_modules", "leaf_pragmas"]

#: §8.3 dtype codes of the dense formats.
_DTYPES = {code: name for code, name in enumerate(DTYPES) if name in DENSE_FORMAT_NAMES}
_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
_MEM_PSUM = 2
#: Kinds of the reader-stream entries (what the elements of one accepted descriptor are for).
_DATA, _SCALE, _BIAS, _DROP, _TABLE = range(5)
#: ``loaded`` after reset or a bad table image: no function id matches it.
_NONE = 0xFF


def fu_module_name(cfg):
    """Verilog module name of the separately converted :class:`FunctionUnit` of ``cfg``."""
    return f"nc_actfu_{config_tag(cfg)}"


def leaf_modules(cfg):
    """``{Verilog module name: component}`` the engine instantiates by name when built with
    ``use_instances=True`` (the function unit, converted once)."""
    return {fu_module_name(cfg): FunctionUnit(cfg)}


def leaf_pragmas(cfg):
    """Verilator metacomment of each leaf module: the function unit is a ``hier_block``."""
    return {fu_module_name(cfg): "hier_block"}


_RW = AP_STEP_BITS + AP_NUM_BITS + AP_OFFSET_BITS + 8    # signed byte-range width


def _byte_range(m, ap, name):
    """``(lo, hi)``: the first and last byte an AP touches (its closed-form footprint, as
    :class:`~rtl.mem.ap.APGenerator` computes it for its range check)."""
    lo, hi = Signal(signed(_RW), name=f"{name}_lo"), Signal(signed(_RW), name=f"{name}_hi")
    pos, neg, act = 0, 0, Const(1, 1)
    for d in ap.dims:
        act = act & (d.num != 0)
        span = Mux(act, d.step * (d.num - 1).as_unsigned(), 0)
        pos = pos + Mux(span > 0, span, 0)
        neg = neg + Mux(span < 0, span, 0)
    m.d.comb += [lo.eq(ap.offset + (neg << ap.esize)),
                 hi.eq(ap.offset + (pos << ap.esize) + (Const(1, 4) << ap.esize) - 1)]
    return lo, hi


class ScalarEngine(wiring.Component):
    """P lanes of ``y = f(RNE(x * scale + bias))`` between SBUF/PSUM access patterns.

    Front end, one instruction at a time: the static checks (``E_OPCODE``, ``E_FORMAT``,
    ``E_SHAPE``), then the operand APs in the order scale, bias (when per-partition), source
    (each to the reader of its memory), destination (to a writer of its memory); the first AP
    rejected gives the status. Accepted, the instruction's elements follow the previous
    instruction's in the readers' stream: reader -> widen -> fused MAC with ``scale``/``bias``
    -> :class:`FunctionUnit` (``COPY`` bypasses it) -> convert (RNE/SR) -> output FIFO ->
    writer, one element per lane per cycle, with **no gap between consecutive instructions**:
    the front end checks instruction n + 1 while n streams (two instruction contexts, two
    writers per memory, the readers' prefetching generators). The per-partition scale/bias
    elements are read through the same readers (one element per partition) and captured into
    the instruction's context ahead of its data. ``reduce_cmd`` accumulates the FP32 results of
    the AP's partitions in AP order (single-cycle FP32 adder per lane; ``reset`` applies at the
    instruction's first element). ``done`` records leave in instruction order: an accepted
    instruction's when its last write is granted, a rejected one's after every earlier one.
    Nothing is written for a rejected instruction and the accumulators are unchanged (source
    elements already read for it are dropped before the lanes).

    ``ACT_TABLE_LOAD`` waits until the lanes are idle, then reads the table words
    (``golden.activation.table_words`` order, FP32 container; word ``k`` is element ``k // np``
    of partition ``start + k % np``, ``np`` the AP's partitions, one word per cycle) through ``src``
    and writes them to every lane's table. The word count (elements times partitions) must
    be a table image's, whole segments within ``act_segments``: a static check, else
    ``E_FORMAT`` with nothing read and the loaded function kept. The image's function id
    (word 9) must equal ``func``, else ``E_FORMAT`` after the load and no function is loaded
    (ACTIVATION -> ``E_OPCODE`` until a good load).

    Parameters
    ----------
    cfg : CoreConfig
    sbuf_latency, psum_latency : int
        Read latencies of the SBUF / PSUM row ports (size the readers' buffers).
    use_instances : bool
        False (default): the lanes' function units are Amaranth submodules; True:
        ``Instance(fu_module_name(cfg))`` of one separately converted :class:`FunctionUnit`
        (``leaf_modules``; Verilator compiles it once as a ``hier_block``).

    Members
    -------
    instr : In(stream.Signature(instr_layout(cfg)))
    done : Out(stream.Signature(done_layout(cfg)))
    tw : In(stream.Signature(table_write_layout(cfg), always_ready=True))
        Table words from outside (testbench); only while the engine is idle.
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

    def __init__(self, cfg, *, sbuf_latency=1, psum_latency=1, use_instances=False):
        super().__init__(self.Signature(cfg, sbuf_latency=sbuf_latency,
                                        psum_latency=psum_latency))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P = cfg.partitions
        # --- memories' AP ports: a prefetching reader per memory, two writers per memory ------
        rs = APReader(cfg, SBUF, mem_latency=sig.sbuf_latency, prefetch=True)
        rp = APReader(cfg, PSUM, mem_latency=sig.psum_latency, prefetch=True)
        m.submodules.rd_sbuf, m.submodules.rd_psum = rs, rp
        wiring.connect(m, rs.port, wiring.flipped(self.sbuf_rd))
        wiring.connect(m, rp.port, wiring.flipped(self.psum_rd))
        writers = []                                 # index wid = 2 * (memory is PSUM) + k
        for mem, port in ((SBUF, self.sbuf_wr), (PSUM, self.psum_wr)):
            pair = [APWriter(cfg, mem) for _ in range(2)]
            for k, w in enumerate(pair):
                m.submodules[f"wr_{mem}{k}"] = w
            a, b = pair
            # Only the writer whose elements are at the FIFO head requests (the other's
            # element input is low), so the port is a plain OR/Mux of the two.
            m.d.comb += [port.req.valid.eq(a.port.req.valid | b.port.req.valid),
                         port.req.payload.eq(Mux(b.port.req.valid, b.port.req.payload,
                                                 a.port.req.payload)),
                         a.port.req.ready.eq(port.req.ready),
                         b.port.req.ready.eq(port.req.ready)]
            writers += pair

        ins = Signal(instr_layout(cfg))

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
        sc_ok, sc_32, sc_wi, _ = dtype_info(ins.scale_dtype, ins.scale_ap.esize)
        bi_ok, bi_32, bi_wi, _ = dtype_info(ins.bias_dtype, ins.bias_ap.esize)

        def count(ap):
            prod, act = Const(1, 64), Const(1, 1)
            for d in ap.dims:
                act = act & (d.num != 0)
                prod = prod * Mux(act, d.num, 1)
            return prod

        def same_parts(ap):
            return (ap.start == ins.src.start) & (ap.count == ins.src.count)
        shape_bad = (~same_parts(ins.dst) | (count(ins.src) != count(ins.dst))
                     | (ins.scale_src & (~same_parts(ins.scale_ap) | (count(ins.scale_ap) != 1)))
                     | (ins.bias_src & (~same_parts(ins.bias_ap) | (count(ins.bias_ap) != 1))))
        is_act = ins.opcode == OP_ACTIVATION
        is_tbl = ins.opcode == OP_ACT_TABLE_LOAD
        # a table image is 138 + 9 k words, 1 <= k <= act_segments: its word count (elements
        # of src times its partitions) is known from the fields, so a wrong size is a static
        # E_FORMAT (nothing read, the loaded function kept), not a long read of a bad stream
        t_head, t_seg = TABLE_HEADER_WORDS + 2 * ACT_BINADES, NCOEF + 2
        t_max = t_head + t_seg * cfg.act_segments
        t_elems = count(ins.src)
        t_words = Signal(range(t_max * (1 << AP_PART_BITS)))
        m.d.comb += t_words.eq(t_elems[:t_max.bit_length()] * ins.src.count)
        tbl_size_bad = ((t_elems > t_max) | (t_words > t_max) | (t_words < t_head + t_seg)
                        | (t_words % t_seg != t_head % t_seg))
        loaded = Signal(8, init=_NONE)               # the loaded table's function id
        static = Signal(ERROR_BITS)
        with m.If(~(is_act | is_tbl | (ins.opcode == OP_COPY))
                  | (is_act & ((ins.func >= len(FUNCTION_NAMES)) | (ins.func != loaded)))):
            m.d.comb += static.eq(E_OPCODE)
        with m.Elif(is_tbl):
            with m.If(~s_ok | ~s_32 | tbl_size_bad):
                m.d.comb += static.eq(E_FORMAT)
        with m.Elif(~s_ok | ~d_ok | (ins.scale_src & ~sc_ok) | (ins.bias_src & ~bi_ok)):
            m.d.comb += static.eq(E_FORMAT)
        with m.Elif(shape_bad):
            m.d.comb += static.eq(E_SHAPE)

        # --- instruction contexts (two: one streaming, the next one starting) ------------------
        ctx_lay = data.StructLayout({"d_ci": range(len(cfmts)), "d_32": 1, "act": 1, "sr": 1,
                                     "scale_src": 1, "bias_src": 1, "scale": 32, "bias": 32,
                                     "reset": 1, "reduce": 1, "wid": 2,
                                     # the destination's footprint (read-after-write hazard)
                                     "wmem": 2, "wstart": AP_PART_BITS, "wcount": AP_PART_BITS,
                                     "wlo": signed(_RW), "whi": signed(_RW)})
        ctxs = [Signal(ctx_lay, name=f"ctx{k}") for k in range(2)]
        sc_r = [[Signal(32, name=f"scale{k}_{p}") for p in range(P)] for k in range(2)]
        bi_r = [[Signal(32, name=f"bias{k}_{p}") for p in range(P)] for k in range(2)]
        inuse = Signal(2)
        fs = Signal()                                # the context the front end fills
        rel = Signal()                               # the oldest context in use

        def cf(s, name):
            return Mux(s, getattr(ctxs[1], name), getattr(ctxs[0], name))

        # --- reader-stream entries: one per accepted read descriptor, in order ---------------
        ent = data.StructLayout({"kind": 3, "rsel": 1, "slot": 1, "wi": range(len(wfmts)),
                                 "is32": 1})
        m.submodules.kq = kq = fifo.SyncFIFO(width=ent.size, depth=4)
        hd = data.View(ent, kq.r_data)
        push = Signal(ent)
        m.d.comb += kq.w_data.eq(push)

        # --- element pipeline -----------------------------------------------------------------
        D = sig.pipe_latency + 4
        m.submodules.outq = outq = fifo.SyncFIFO(width=P * LANE_BITS + 2, depth=D)
        in_flight = Signal(range(D + 1))
        el_valid = Mux(hd.rsel, rp.o.valid, rs.o.valid) & kq.r_rdy
        el = data.View(rs.o.payload.shape(), Mux(hd.rsel, rp.o.payload.as_value(),
                                                 rs.o.payload.as_value()))
        credit = (in_flight + outq.level) < D
        is_data = hd.kind == _DATA
        # a table beat holds the AP's partitions' words: one word per cycle, lanes in order
        is_tw = hd.kind == _TABLE
        tlane = Signal(AP_PART_BITS)
        t_next = (tlane + 1 == ins.src.count) | ~is_tw
        go = Signal()
        m.d.comb += [go.eq(el_valid & (~is_data | credit) & t_next),
                     rs.o.ready.eq(kq.r_rdy & ~hd.rsel & (~is_data | credit) & t_next),
                     rp.o.ready.eq(kq.r_rdy & hd.rsel & (~is_data | credit) & t_next),
                     kq.r_en.eq(go & el.last)]
        take = go & is_data
        cap = go & ((hd.kind == _SCALE) | (hd.kind == _BIAS))
        tword = el_valid & is_tw
        with m.If(tword):
            m.d.sync += tlane.eq(Mux(t_next, 0, tlane + 1))
        first = Signal(init=1)                       # the next element starts an entry
        with m.If(go):
            m.d.sync += first.eq(el.last)
        out_valid = delay(m, take, sig.pipe_latency, name="ov")
        m.d.sync += in_flight.eq(in_flight + take - out_valid)
        fu_lat = FunctionUnit.Signature(cfg).latency
        w_lat = WidenToFP32.Signature(cfg).latency
        fma_lat = FunctionUnit.Signature(cfg).fma.latency
        c_lat = ConvertFromFP32.Signature(cfg).latency
        t_acc = w_lat + fma_lat + fu_lat             # FP32 result of the element at the adder
        is32_w = delay(m, hd.is32, w_lat, name="is32w")
        cap_w = delay(m, cap, w_lat, name="capw")
        capb_w = delay(m, hd.kind == _BIAS, w_lat, name="capbw")
        slot_w = delay(m, hd.slot, w_lat, name="slotw")
        slot_a = delay(m, slot_w, t_acc - w_lat, name="slota")
        slot_o = delay(m, slot_a, c_lat, name="sloto")
        acc_v = delay(m, take, t_acc, name="accv")
        first_a = delay(m, first, t_acc, name="firsta")
        mask_a = delay(m, el.mask, t_acc, name="acc_mask")
        red = cf(slot_a, "reduce")
        rst = cf(slot_a, "reset") & first_a
        codes = []
        adder_cfg = cfg.replace(add_stages=0)
        tw_int = Signal.like(self.tw.payload)
        tw_v = Signal()
        twp = data.View(table_write_layout(cfg), Mux(self.tw.valid, self.tw.payload.as_value(),
                                                     tw_int.as_value()))
        m.d.comb += tw_v.eq(self.tw.valid | tword)
        for p in range(P):
            wd = WidenToFP32(cfg)
            m.submodules[f"widen{p}"] = wd
            m.d.comb += [wd.i.valid.eq(take | cap), wd.i.payload.code.eq(el.data[p]),
                         wd.i.payload.fmt.eq(hd.wi)]
            x = Mux(is32_w, delay(m, el.data[p], w_lat, name=f"x32_{p}"), wd.o.payload.x)
            for k in range(2):
                with m.If(cap_w & (slot_w == k)):
                    with m.If(capb_w):
                        m.d.sync += bi_r[k][p].eq(x)
                    with m.Else():
                        m.d.sync += sc_r[k][p].eq(x)
            pre = FMA(cfg, formats_a=(FP32,), formats_b=(FP32,))
            m.submodules[f"pre{p}"] = pre
            m.d.comb += [pre.i.valid.eq(1), pre.i.payload.a.eq(x),
                         pre.i.payload.b.eq(Mux(cf(slot_w, "scale_src"),
                                                Mux(slot_w, sc_r[1][p], sc_r[0][p]),
                                                cf(slot_w, "scale"))),
                         pre.i.payload.c.eq(Mux(cf(slot_w, "bias_src"),
                                                Mux(slot_w, bi_r[1][p], bi_r[0][p]),
                                                cf(slot_w, "bias")))]
            fu_y = Signal(32, name=f"fu_y{p}")
            fu = (Leaf(FunctionUnit.Signature(cfg), fu_module_name(cfg)) if self.use_instances
                  else FunctionUnit(cfg))
            m.submodules[f"fu{p}"] = fu
            m.d.comb += [fu.i.valid.eq(1), fu.i.payload.x.eq(pre.o.payload.result),
                         fu.tw.valid.eq(tw_v), fu.tw.payload.eq(twp), fu_y.eq(fu.o.payload.y)]
            y = Mux(cf(slot_a, "act"), fu_y,
                    delay(m, pre.o.payload.result, fu_lat, name=f"copy{p}"))
            add = FP32Adder(adder_cfg)
            m.submodules[f"acc_add{p}"] = add
            m.d.comb += [add.i.valid.eq(1), add.i.payload.a.eq(Mux(rst, 0, self.acc[p])),
                         add.i.payload.b.eq(y)]
            with m.If(acc_v & mask_a[p]):
                with m.If(red):
                    m.d.sync += self.acc[p].eq(add.o.payload.result)
                with m.Elif(rst):
                    m.d.sync += self.acc[p].eq(0)
            cv = ConvertFromFP32(cfg, lane=p)
            m.submodules[f"conv{p}"] = cv
            m.d.comb += [cv.i.valid.eq(acc_v), cv.i.payload.x.eq(y),
                         cv.i.payload.fmt.eq(cf(slot_a, "d_ci")),
                         # an fp32 destination bypasses the converter: no PRNG step
                         # (docs/number-formats.md: one step per element converted in SR)
                         cv.i.payload.sr.eq(cf(slot_a, "sr") & ~cf(slot_a, "d_32"))]
            codes.append(Mux(cf(slot_o, "d_32"), delay(m, y, c_lat, name=f"y32_{p}"),
                             cv.o.payload.code))
        m.d.comb += [outq.w_en.eq(out_valid), outq.w_data.eq(Cat(*codes, cf(slot_o, "wid")))]
        head_wid = outq.r_data[P * LANE_BITS:]
        for wid, w in enumerate(writers):
            m.d.comb += [w.el.valid.eq(outq.r_rdy & (head_wid == wid)),
                         w.el.payload.data.as_value().eq(outq.r_data[:P * LANE_BITS])]
        m.d.comb += outq.r_en.eq(Cat(*(w.el.ready for w in writers)).bit_select(head_wid, 1))
        wdone = Cat(*(w.done for w in writers)).any()

        # --- table load from the reader stream -----------------------------------------------
        taddr = Signal(range(ACT_SEG_BASE + cfg.act_segments * ACT_SEG_STRIDE + 1))
        tbad = Signal()
        lanes = Cat(*(el.data[p] for p in range(P)))
        m.d.comb += [tw_int.addr.eq(taddr),
                     tw_int.data.eq(lanes.word_select(
                         (ins.src.start + tlane)[:max(1, (P - 1).bit_length())], LANE_BITS))]
        with m.If(tword):
            with m.If(taddr == TABLE_HEADER_WORDS - 1):
                m.d.sync += taddr.eq(ACT_MAP_BASE)
            with m.Elif(taddr == ACT_MAP_BASE + 2 * ACT_BINADES - 1):
                m.d.sync += taddr.eq(ACT_SEG_BASE)
            with m.Elif((taddr >= ACT_SEG_BASE) & (taddr[:4] == ACT_SEG_STRIDE // 2)):
                m.d.sync += taddr.eq(taddr + ACT_SEG_STRIDE // 2)
            with m.Else():
                m.d.sync += taddr.eq(taddr + 1)
            with m.If(taddr == 9):
                with m.If((tw_int.data != ins.func) | (ins.func >= len(FUNCTION_NAMES))):
                    m.d.sync += tbad.eq(1)
        with m.If(self.tw.valid & (self.tw.payload.addr == 9)):
            m.d.sync += loaded.eq(self.tw.payload.data[:8])

        # --- completion records, in instruction order ----------------------------------------
        dq_lay = data.StructLayout({"status": ERROR_BITS, "opcode": 8, "wait": 1})
        m.submodules.dq = dq = fifo.SyncFIFO(width=dq_lay.size, depth=2)
        dqh = data.View(dq_lay, dq.r_data)
        dpush = Signal(dq_lay)
        m.d.comb += dq.w_data.eq(dpush)
        wdcnt = Signal(2)                            # writes finished, records not yet sent
        fin = Signal()
        m.d.comb += [self.done.valid.eq(dq.r_rdy & (~dqh.wait | (wdcnt != 0))),
                     self.done.payload.status.eq(dqh.status),
                     self.done.payload.opcode.eq(dqh.opcode),
                     dq.r_en.eq(self.done.valid & self.done.ready),
                     fin.eq(dq.r_en & dqh.wait)]
        m.d.sync += wdcnt.eq(wdcnt + wdone - fin)
        with m.If(wdone):
            m.d.sync += [inuse.bit_select(rel, 1).eq(0), rel.eq(~rel)]

        # --- front end ------------------------------------------------------------------------
        rdesc = Signal.like(ins.src)
        # A read descriptor waits while the other context's destination (still being written)
        # overlaps it: same memory, a common partition, intersecting byte ranges; so a read
        # sees every earlier instruction's writes (in-order semantics with overlap).
        r_lo, r_hi = _byte_range(m, rdesc, "rd")
        d_lo, d_hi = _byte_range(m, ins.dst, "dst")
        other = data.View(ctx_lay, Mux(fs, ctxs[0].as_value(), ctxs[1].as_value()))
        haz = (inuse.bit_select(~fs, 1) & (other.wmem == rdesc.mem)
               & (rdesc.start < other.wstart + other.wcount)
               & (other.wstart < rdesc.start + rdesc.count)
               & (r_lo <= other.whi) & (other.wlo <= r_hi))
        m.d.comb += [rs.i.payload.eq(rdesc), rp.i.payload.eq(rdesc)]
        for w in writers:
            m.d.comb += w.i.payload.eq(ins.dst)
        rsel = rdesc.mem == _MEM_PSUM
        r_err = Mux(rsel, rp.err, rs.err)
        r_ok = Mux(rsel, rp.ok, rs.ok)
        r_code = Mux(rsel, rp.err_code, rs.err_code)
        r_rdy = Mux(rsel, rp.i.ready, rs.i.ready)
        wsel = ins.dst.mem == _MEM_PSUM
        wnxt = Signal(2)                             # per memory: the writer to use next
        wid = Cat(wnxt.bit_select(wsel, 1), wsel)
        w_rdy = Cat(*(w.i.ready for w in writers)).bit_select(wid, 1)
        w_err = Cat(*(w.err for w in writers)).any()
        w_code = Mux(writers[0].err, writers[0].err_code,
                     Mux(writers[1].err, writers[1].err_code,
                         Mux(writers[2].err, writers[2].err_code, writers[3].err_code)))
        wcnt = Signal(range(writers[0].signature.latency + 3))
        pipe_idle = (~inuse.any() & ~kq.r_rdy & (in_flight == 0) & ~outq.r_rdy
                     & (wdcnt == 0))

        def finish(status, wait=0):
            m.d.comb += [dq.w_en.eq(1), dpush.status.eq(status), dpush.opcode.eq(ins.opcode),
                         dpush.wait.eq(wait)]
            m.next = "IDLE"

        def give(desc, state):
            m.d.comb += rdesc.eq(desc)
            with m.If(kq.w_rdy & ~haz):
                m.d.comb += [rs.i.valid.eq(~rsel), rp.i.valid.eq(rsel)]
                with m.If(r_rdy):
                    m.next = state

        def entry(kind, wi=0, is32=0):
            m.d.comb += [kq.w_en.eq(1), push.kind.eq(kind), push.rsel.eq(rsel),
                         push.slot.eq(fs), push.wi.eq(wi), push.is32.eq(is32)]

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.instr.ready.eq(~inuse.bit_select(fs, 1) & dq.w_rdy)
                with m.If(self.instr.valid & self.instr.ready):
                    m.d.sync += ins.eq(self.instr.payload)
                    m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(static != E_OK):
                    finish(static)
                with m.Elif(is_tbl):
                    m.next = "TBL_DRAIN"
                with m.Elif(ins.scale_src):
                    m.next = "SCALE"
                with m.Elif(ins.bias_src):
                    m.next = "BIAS"
                with m.Else():
                    m.next = "SRC"
            for name, desc, nxt, kind, wi, is32 in (
                    ("SCALE", ins.scale_ap, "BIAS_OR_SRC", _SCALE, sc_wi, sc_32),
                    ("BIAS", ins.bias_ap, "SRC", _BIAS, bi_wi, bi_32)):
                with m.State(name):
                    give(desc, name + "_W")
                with m.State(name + "_W"):
                    m.d.comb += rdesc.eq(desc)
                    with m.If(r_err):
                        finish(r_code)
                    with m.Elif(r_ok):
                        entry(kind, wi, is32)
                        m.next = nxt
            with m.State("BIAS_OR_SRC"):
                with m.If(ins.bias_src):
                    m.next = "BIAS"
                with m.Else():
                    m.next = "SRC"
            with m.State("SRC"):
                give(ins.src, "SRC_W")
            with m.State("SRC_W"):
                m.d.comb += rdesc.eq(ins.src)
                with m.If(r_err):
                    finish(r_code)
                with m.Elif(r_ok):
                    m.next = "DST"
            with m.State("DST"):
                m.d.comb += rdesc.eq(ins.src)
                with m.If(kq.w_rdy):
                    for k, w in enumerate(writers):
                        m.d.comb += w.i.valid.eq(wid == k)
                    with m.If(w_rdy):
                        m.d.sync += wcnt.eq(0)
                        m.next = "DST_W"
            with m.State("DST_W"):
                m.d.comb += rdesc.eq(ins.src)
                m.d.sync += wcnt.eq(wcnt + 1)
                with m.If(w_err):
                    entry(_DROP)
                    finish(w_code)
                with m.Elif(wcnt == writers[0].signature.latency + 1):
                    entry(_DATA, s_wi, s_32)
                    finish(E_OK, wait=1)
                    fields = {
                        "d_ci": d_ci, "d_32": d_32, "act": is_act, "sr": ins.sr,
                        "scale_src": ins.scale_src, "bias_src": ins.bias_src,
                        "scale": ins.scale, "bias": ins.bias,
                        "reset": (ins.reduce_cmd == REDUCE_RESET)
                        | (ins.reduce_cmd == REDUCE_RESET_REDUCE),
                        "reduce": (ins.reduce_cmd == REDUCE_REDUCE)
                        | (ins.reduce_cmd == REDUCE_RESET_REDUCE),
                        "wid": wid, "wmem": ins.dst.mem, "wstart": ins.dst.start,
                        "wcount": ins.dst.count, "wlo": d_lo, "whi": d_hi}
                    for k in range(2):
                        with m.If(fs == k):
                            m.d.sync += [getattr(ctxs[k], f).eq(v) for f, v in fields.items()]
                    m.d.sync += [inuse.bit_select(fs, 1).eq(1), fs.eq(~fs),
                                 wnxt.bit_select(wsel, 1).eq(~wnxt.bit_select(wsel, 1))]
            with m.State("TBL_DRAIN"):
                with m.If(pipe_idle):
                    m.next = "TBL_SRC"
            with m.State("TBL_SRC"):
                give(ins.src, "TBL_SRC_W")
            with m.State("TBL_SRC_W"):
                m.d.comb += rdesc.eq(ins.src)
                with m.If(r_err):
                    finish(r_code)
                with m.Elif(r_ok):
                    entry(_TABLE)
                    m.d.sync += [taddr.eq(0), tbad.eq(0), loaded.eq(_NONE)]
                    m.next = "TBL_RUN"
            with m.State("TBL_RUN"):
                with m.If(~kq.r_rdy):
                    # the size was checked statically: only the function id can be bad
                    finish(Mux(tbad, E_FORMAT, E_OK))
                    with m.If(~tbad):
                        m.d.sync += loaded.eq(ins.func)
        m.d.comb += self.busy.eq(~self.instr.ready | ~pipe_idle | rs.busy | rp.busy
                                 | dq.r_rdy)
        return m
