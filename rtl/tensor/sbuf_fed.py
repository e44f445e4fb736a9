# SPDX-License-Identifier: Apache-2.0
"""The tensor engine fed from SBUF: commands carry access patterns, two AP readers fetch the
stationary and moving operands over SBUF row ports, results land in the engine's PSUM
(docs/memory.md §8)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.isa import E_FLAGS, E_SHAPE, ERROR_BITS
from rtl.mem.ap import APGenerator
from rtl.mem.apport import APReader
from rtl.mem.port import PSUM as MEM_PSUM, SBUF as MEM_SBUF, RowPort
from rtl.tensor.engine import TensorEngine
from rtl.tensor.layouts import OP_LOAD, OP_MATMUL
from rtl.tensor.psum import ENGINE_ROW_PORTS

__all__ = ["SbufTensorEngine", "E_SHAPE", "E_FLAGS"]

# Feed-level error codes (rtl.isa, docs/architecture.md §11.2): E_SHAPE, E_FLAGS, besides the
# readers' E_AP_* codes.
#: Commands between the intake and the engine (AP checks in flight).
QUEUE = 4
#: SBUF read latency the readers are built for (rtl.mem.sbuf.SBUF.Signature(...).latency).
SBUF_LATENCY = 1


class SbufTensorEngine(wiring.Component):
    """A :class:`~rtl.tensor.engine.TensorEngine` whose operands come from SBUF.

    A command (``cmd``) is the engine's command word (``cmd.cmd``, the
    :class:`~rtl.tensor.layouts.TensorLayouts` ``cmd`` layout) plus one access pattern
    (``cmd.ap``, the :class:`~rtl.mem.ap.APGenerator` descriptor):

    * ``OP_LOAD``: the AP walks the stationary operand, one element per column j (``m``
      elements); element j of partition k is S[k, j] (lane k = partition k).
    * ``OP_MATMUL``: the AP walks the moving operand, one element per moving column n
      (``n`` elements); element n of partition k is X[k, n].
    * A sparse ``OP_LOAD`` (``sp != 0``): each element is a (value, tag) pair of twice the
      weight format's size (the decoder sets the AP's element size): the code in the low 8
      (8-bit format) or 16 bits, the tag in the next ``tl.tag_bits`` bits. A 3-bit flag per
      command (feed, sparse, 16-bit half) steers the split; no extra reader or port. A sparse
      ``OP_MATMUL`` element is a 32-bit lane of packed moving elements, taken whole.
    * ``OP_TRANSPOSE``, ``OP_READ``: the AP is ignored.

    Each element arrives right-aligned in its partition's 32-bit lane (``APReader``) and the
    low ``code_width`` bits become the engine's lane code (a narrower format's code is its low
    bits; a format of width w reads w-bit elements: the AP's element size is the format's).
    Lanes outside the AP's partitions are undefined, so an AP should cover the rows the
    operation uses (``k`` rows of a matmul; every row a later matmul uses for a load).

    Flow: the command is queued (``QUEUE`` deep) and its AP handed to the stationary or the
    moving reader at once, so a reader checks and walks the next AP while the engine still
    consumes the current one; the command enters the engine after its AP was accepted, in
    order. The readers prefetch (two AP generators each, ``APReader(prefetch=True)``): the
    next AP is checked while the current one is walked, so back-to-back matmuls stream one
    moving column per cycle across AP and command boundaries.

    Errors, none of which hangs or leaves data behind:

    * an AP whose element count differs from ``m`` / ``n``: ``E_SHAPE`` (0x05); a MATMUL with
      ``mx`` (MX scales are not fed from SBUF yet): ``E_FLAGS`` (0x06). The command is dropped
      at the intake: nothing read, nothing sent to the engine.
    * an AP the reader rejects (E_AP_FORM / E_AP_PART / E_AP_ALIGN / E_AP_RANGE, also for an AP
      naming PSUM): the command is dropped, nothing is read.
    * a command the engine rejects (``err``/``err_code``, its own codes): the elements its AP
      fetched are discarded.

    ``ap_err`` / ``ap_err_code`` keep the first feed-level error since reset.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        Passed to :class:`TensorEngine`.

    Members
    -------
    cmd : In(stream.Signature(cmd_layout))
    st_port, mv_port : Out(RowPort.Signature(cfg, "sbuf"))
        The stationary and moving readers' SBUF row ports (connect them to SBUF row ports
        with priority: ``SBUF(..., priority=("tensor_st", "tensor_mv"))``).
    res : Out(stream.Signature(ArrayLayout(32, pe_cols)))
        ``OP_READ`` result beats (the engine's).
    psum_vector, psum_scalar : In(RowPort.Signature(cfg, "psum"))
        The engine's PSUM row ports.
    err : Out(1)
    err_code : Out(3)
        The engine's error status.
    ap_err : Out(1)
    ap_err_code : Out(ERROR_BITS)
        The first feed-level error.
    busy, mv_fire, psum_we : Out(1)
        As the engine's (``busy`` also covers queued commands and readers).
    disp : Out(1)
        Pulses once per command taken by ``cmd`` (in order) when it leaves the command queue:
        it entered the engine, or its AP was rejected (``disp_code``, the reader's E_AP_*
        code, else 0), or the engine rejected it (``disp_reject``; the engine's ``err_code``
        holds the reason from the next cycle). A command dropped at the intake (``E_SHAPE``,
        ``E_FLAGS``) has no ``disp``. The core's decoder completes instructions on it.
    disp_code : Out(ERROR_BITS)
    disp_reject : Out(1)
    op_issue, op_done : Out(1)
        The engine's (:class:`~rtl.tensor.engine.TensorEngine`): a matmul or transpose entered
        it (in the cycle of its ``disp``), and the oldest such operation's PSUM writes have
        all landed.
    """

    class Signature(wiring.Signature):
        """Members of an :class:`SbufTensorEngine`; attributes ``tl`` (the engine's layouts),
        ``engine`` (its signature), ``cmd_layout``, ``reader`` (the readers' signature)."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "SbufTensorEngine")
            self.engine = TensorEngine.Signature(cfg)
            self.tl = tl = self.engine.tl
            gs = APGenerator.Signature(cfg)
            # prefetching readers: the next AP is checked while the current one is walked
            self.reader = APReader.Signature(cfg, MEM_SBUF, mem_latency=SBUF_LATENCY,
                                             prefetch=True)
            self.cmd_layout = data.StructLayout({"cmd": tl.cmd, "ap": gs.in_layout})
            super().__init__({
                "cmd": In(stream.Signature(self.cmd_layout)),
                "st_port": Out(RowPort.Signature(cfg, MEM_SBUF)),
                "mv_port": Out(RowPort.Signature(cfg, MEM_SBUF)),
                "res": Out(stream.Signature(tl.lanes_out)),
                **{f"psum_{n}": In(RowPort.Signature(cfg, MEM_PSUM)) for n in ENGINE_ROW_PORTS},
                "err": Out(1), "err_code": Out(3), "ap_err": Out(1), "ap_err_code": Out(ERROR_BITS),
                "busy": Out(1), "mv_fire": Out(1), "psum_we": Out(1),
                "disp": Out(1), "disp_code": Out(ERROR_BITS), "disp_reject": Out(1),
                "op_issue": Out(1), "op_done": Out(1),
            })

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.tl = self.signature.tl
        self.use_instances = use_instances
        #: The engine (a submodule; testbenches may watch its members).
        self.engine = TensorEngine(cfg, use_instances=use_instances)
        sig = self.signature
        #: The stationary and moving AP readers.
        self.readers = {n: APReader(cfg, MEM_SBUF, mem_latency=SBUF_LATENCY,
                                    depth=sig.reader.depth, prefetch=True)
                        for n in ("st", "mv")}

    def elaborate(self, platform):
        m = Module()
        cfg, tl = self.cfg, self.tl
        m.submodules.engine = eng = self.engine
        for n in ENGINE_ROW_PORTS:
            wiring.connect(m, wiring.flipped(getattr(self, f"psum_{n}")),
                           getattr(eng, f"psum_{n}"))
        m.d.comb += [
            self.res.valid.eq(eng.res.valid), self.res.payload.eq(eng.res.payload),
            eng.res.ready.eq(self.res.ready),
            self.err.eq(eng.err), self.err_code.eq(eng.err_code),
            self.mv_fire.eq(eng.mv_fire), self.psum_we.eq(eng.psum_we),
            self.op_issue.eq(eng.op_issue), self.op_done.eq(eng.op_done),
        ]

        # --- intake: shape check, command queue, APs to the readers -------------------------
        c = self.cmd.payload
        is_ld, is_mm = c.cmd.op == OP_LOAD, c.cmd.op == OP_MATMUL
        want = Mux(is_ld, c.cmd.m, c.cmd.n)
        lim = max(cfg.psum_bank_fp32, cfg.pe_cols) + 1
        wb = lim.bit_length()

        def sat(x):
            return Mux(x > lim, lim, x)[:wb]
        count = 1
        for k in range(cfg.ap_dims):
            nk = c.ap.dims[k].num
            count = sat(count * sat(Mux(nk == 0, 1, nk)))
        bad_count = (is_ld | is_mm) & (count != want)
        bad_mx = is_mm & c.cmd.mx
        bad = bad_count | bad_mx

        src_layout = data.StructLayout({"cmd": tl.cmd, "src": 2})   # src: 0 none, 1 st, 2 mv
        m.submodules.cq = cq = fifo.SyncFIFOBuffered(width=src_layout.size, depth=QUEUE)
        readers, apqs, vers, flags = {}, {}, {}, {}
        ver_layout = data.StructLayout({"ok": 1, "code": ERROR_BITS})
        for name, port, dst in (("st", self.st_port, eng.st), ("mv", self.mv_port, eng.mv)):
            rd = self.readers[name]
            m.submodules[f"{name}_reader"] = readers[name] = rd
            wiring.connect(m, rd.port, wiring.flipped(port))
            m.submodules[f"{name}_apq"] = apq = fifo.SyncFIFOBuffered(
                width=len(c.ap.as_value()), depth=2)
            m.submodules[f"{name}_ver"] = ver = fifo.SyncFIFO(width=ver_layout.size,
                                                               depth=QUEUE)
            # per command: feed (1) or discard (0); a sparse load also its pair half (below)
            fw = 3 if (name == "st" and tl.sparse) else 1
            m.submodules[f"{name}_flag"] = flag = fifo.SyncFIFO(width=fw, depth=QUEUE)
            apqs[name], vers[name], flags[name] = apq, ver, flag
            m.d.comb += [
                rd.i.payload.eq(apq.r_data), rd.i.valid.eq(apq.r_rdy),
                apq.r_en.eq(rd.i.ready),
                ver.w_en.eq(rd.ok | rd.err),
                ver.w_data.eq(Cat(rd.ok, rd.err_code)),
            ]
            # element adapter: feed the engine (flag 1) or discard (flag 0, command rejected)
            feed = flag.r_data[0]
            o = rd.o
            m.d.comb += [
                dst.valid.eq(flag.r_rdy & feed & o.valid),
                o.ready.eq(flag.r_rdy & Mux(feed, dst.ready, 1)),
                flag.r_en.eq(o.valid & o.ready & o.payload.last),
            ]
            # the whole lane: a dense element is zero-extended by the reader, and a sparse
            # moving beat is CR elements packed in the partition's 32-bit lane (layouts.py).
            # A sparse load's element is a (value, tag) pair twice the format's size: the
            # value's code in the low half, its tag in the low tag_bits of the high half
            # (``half`` = 8 for an 8-bit format, 16 for a 16-bit one; docs/isa.md §6).
            sp_ld = flag.r_data[1] if fw > 1 else None
            h16 = flag.r_data[2] if fw > 1 else None
            for k in range(cfg.pe_rows):
                d = o.payload.data[k]
                code = d[:tl.lane_width]
                if sp_ld is not None:
                    code = Mux(sp_ld, Mux(h16, d[:16], d[:8]), code)
                    m.d.comb += dst.payload.tags[k].eq(
                        Mux(h16, d[16:16 + tl.tag_bits], d[8:8 + tl.tag_bits]))
                m.d.comb += dst.payload.codes[k].eq(code)

        need_st, need_mv = is_ld, is_mm
        room = cq.w_rdy & ~(need_st & ~apqs["st"].w_rdy) & ~(need_mv & ~apqs["mv"].w_rdy)
        m.d.comb += self.cmd.ready.eq(bad | room)
        take = self.cmd.valid & ~bad & room
        m.d.comb += [
            cq.w_en.eq(take),
            cq.w_data.eq(Cat(c.cmd, Mux(is_ld, 1, Mux(is_mm, 2, 0)))),
            apqs["st"].w_en.eq(take & need_st), apqs["st"].w_data.eq(c.ap),
            apqs["mv"].w_en.eq(take & need_mv), apqs["mv"].w_data.eq(c.ap),
        ]

        # --- dispatch: the queue head enters the engine once its AP was accepted -------------
        head = data.View(src_layout, cq.r_data)
        # a sparse load's pair half: 16 for a format wider than 8 bits (the decoder admits
        # only 8- and 16-bit formats to a sparse load)
        wide_half = [i for i, f in enumerate(tl.pe_formats) if f.width > 8]

        def pair_of(name):
            if name != "st" or not tl.sparse:
                return ()
            return (head.cmd.sp != 0, Cat(*[head.cmd.fmt == i for i in wide_half]).any())
        m.d.comb += eng.cmd.payload.eq(head.cmd)
        new_err = Signal()
        new_code = Signal(ERROR_BITS)
        with m.If(self.cmd.valid & bad):
            m.d.comb += [new_err.eq(1), new_code.eq(Mux(bad_count, E_SHAPE, E_FLAGS))]
        with m.If(cq.r_rdy):
            with m.Switch(head.src):
                with m.Case(0):
                    m.d.comb += [eng.cmd.valid.eq(1), cq.r_en.eq(eng.cmd.ready),
                                 self.disp.eq(eng.cmd.ready)]
                for code, name in ((1, "st"), (2, "mv")):
                    ver, flag = vers[name], flags[name]
                    v = data.View(ver_layout, ver.r_data)
                    with m.Case(code):
                        with m.If(ver.r_rdy & v.ok):
                            m.d.comb += [
                                eng.cmd.valid.eq(flag.w_rdy),
                                cq.r_en.eq(flag.w_rdy & eng.cmd.ready),
                                ver.r_en.eq(flag.w_rdy & eng.cmd.ready),
                                flag.w_en.eq(flag.w_rdy & eng.cmd.ready),
                                flag.w_data.eq(Cat(~eng.cmd_reject, *pair_of(name))),
                                self.disp.eq(flag.w_rdy & eng.cmd.ready),
                            ]
                        with m.Elif(ver.r_rdy):            # AP rejected: drop the command
                            m.d.comb += [cq.r_en.eq(1), ver.r_en.eq(1), self.disp.eq(1),
                                         self.disp_code.eq(v.code)]
                            with m.If(~(self.cmd.valid & bad)):
                                m.d.comb += [new_err.eq(1), new_code.eq(v.code)]
        m.d.comb += self.disp_reject.eq(eng.cmd_reject)
        with m.If(new_err & ~self.ap_err):
            m.d.sync += [self.ap_err.eq(1), self.ap_err_code.eq(new_code)]

        m.d.comb += self.busy.eq(eng.busy | cq.r_rdy | readers["st"].busy
                                 | readers["mv"].busy | apqs["st"].r_rdy | apqs["mv"].r_rdy
                                 | flags["st"].r_rdy | flags["mv"].r_rdy | self.cmd.valid)
        return m
