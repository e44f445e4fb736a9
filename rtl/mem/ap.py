# SPDX-License-Identifier: Apache-2.0
"""The access-pattern (AP) address generator: one descriptor in, one byte address per cycle out.

Every engine (tensor, vector, scalar, DMA) walks SBUF and PSUM through this block; none walks
addresses by hand. The descriptor, its closed-form check and the address order are specified in
``docs/memory.md`` (the golden model is ``golden/ap.py``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data
from amaranth.lib.wiring import Out

from rtl.config import (AP_NUM_BITS, AP_OFFSET_BITS, AP_PART_BITS, AP_STEP_BITS, CoreConfig,
                        check_config)
from rtl.isa import (E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_OK, ERROR_BITS, MEM_PSUM,
                     MEM_SBUF)
from rtl.pipeline import Pipeline, PipelineSignature

__all__ = ["APGenerator", "esize_of", "MEM_SBUF", "MEM_PSUM", "E_OK", "E_AP_PART", "E_AP_RANGE",
           "E_AP_ALIGN", "E_AP_FORM"]

# ``mem`` codes of the descriptor (rtl.isa, docs/architecture.md §8.3; 0 and 3 are illegal).

#: Cycles from a descriptor taken on ``i`` to its first address on ``o`` (or to ``err``):
#: 1 register the descriptor, 2 the spans ``step * (num - 1)`` and the form/partition/alignment
#: flags, 3 the closed-form range, the error code and the walk's increments.
_LATENCY = 3


def esize_of(fmt):
    """The AP ``esize`` (log2 of the element bytes) of a format with ``fmt.width`` bits: one
    byte up to 8 bits, two up to 16, four above (a TF32 code sits in a 4-byte element)."""
    w = fmt.width
    return 0 if w <= 8 else 1 if w <= 16 else 2


class APGenerator(Pipeline):
    """Access-pattern address generator with a closed-form range check before the first address.

    A descriptor taken on ``i`` (a cycle with ``i.valid & i.ready``; ``i.ready`` is high only
    while the unit is idle) is checked in closed form (docs/memory.md): form (memory code,
    element size, the ``num == 0`` list end), partitions (count, ``start + count <= P``, start
    alignment), offset alignment, and the byte range ``[lo, hi]`` against the SBUF partition or
    the PSUM bank of ``offset``. ``latency`` (3) cycles after it was taken, either

    * the walk starts: ``o`` carries one beat per element, the innermost dimension (``dims[0]``)
      fastest; a beat is held on ``o`` until taken (``o.valid & o.ready``), one beat per cycle
      while ``o.ready`` stays high; the last beat has ``last`` set; ``i.ready`` rises the cycle
      after the last beat was taken; or
    * the descriptor is rejected: no beat at all, ``err`` is high for that one cycle,
      ``err_code`` holds the code, and ``i.ready`` is high in that same cycle.

    With ``o.ready`` always high a descriptor of ``n`` elements occupies the unit for
    ``n + latency`` cycles (``overhead`` = 3 cycles per descriptor), a rejected one for
    ``latency`` cycles. No state waits on anything but ``o.ready``: the unit cannot hang, and
    every address it issues lies inside ``[lo, hi]`` of its descriptor and inside the memory.

    Parameters
    ----------
    cfg : CoreConfig
        ``partitions`` (mask width, partition rules), ``ap_dims`` (dimension slots),
        ``sbuf_bytes_per_partition``, ``psum_banks``, ``psum_bank_fp32`` (ranges),
        ``ap_addr_bits`` (address width).

    Members
    -------
    i : In(stream.Signature(in_layout))
        Descriptors: ``mem`` (2 bits: 1 SBUF, 2 PSUM), ``start``, ``count`` (u8 partitions),
        ``esize`` (2 bits: log2 of the element bytes, 3 illegal), ``offset`` (u32 bytes),
        ``dims`` (``ap_dims`` x {``step`` int16 elements, ``num`` u16}).
    o : Out(stream.Signature(out_layout)), with back-pressure
        Beats: ``addr`` (``ap_addr_bits``: byte address inside the partition, PSUM
        ``bank * psum_bank_bytes + byte``), ``mask`` (``partitions`` bits: partition ``p`` is
        addressed iff bit ``p``), ``last`` (the descriptor's last element).
    err : Out(1)
        One-cycle strobe: the descriptor just checked was rejected.
    ok : Out(1)
        One-cycle strobe: the descriptor just checked was accepted (the cycle of its first
        beat; exactly one of ``err`` and ``ok`` per descriptor taken).
    err_code : Out(ERROR_BITS)
        Code of the last descriptor checked (0 = accepted), held until the next one is checked.
    busy : Out(1)
        A descriptor is being checked or walked.
    """

    class Signature(PipelineSignature):
        """Layouts and timing of an :class:`APGenerator`: ``dim_layout``, ``in_layout``
        (the descriptor), ``out_layout`` (a beat), ``latency`` (descriptor taken -> first beat
        or ``err``) and ``overhead`` (cycles per descriptor beyond one per element)."""

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "APGenerator")
            self.dim_layout = data.StructLayout({"step": signed(AP_STEP_BITS),
                                                 "num": AP_NUM_BITS})
            in_layout = data.StructLayout({
                "mem": 2, "start": AP_PART_BITS, "count": AP_PART_BITS, "esize": 2,
                "offset": AP_OFFSET_BITS,
                "dims": data.ArrayLayout(self.dim_layout, cfg.ap_dims)})
            out_layout = data.StructLayout({"addr": cfg.ap_addr_bits, "mask": cfg.partitions,
                                            "last": 1})
            self.overhead = _LATENCY
            super().__init__(in_layout, out_layout, latency=_LATENCY, ready=True,
                             out_ready=True,
                             members={"err": Out(1), "ok": Out(1), "err_code": Out(ERROR_BITS),
                                      "busy": Out(1)})

    def __init__(self, cfg: CoreConfig):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P, D, AW = cfg.partitions, cfg.ap_dims, cfg.ap_addr_bits
        d = Signal(self.in_layout, name="desc")

        # --- stage 2 registers: spans and the flags that need no arithmetic on spans -------------
        spans = [Signal(signed(AP_STEP_BITS + AP_NUM_BITS + 1), name=f"span{k}") for k in range(D)]
        nz = [d.dims[k].num != 0 for k in range(D)]
        form_bad, part_bad, align_bad = Signal(), Signal(), Signal()
        start, count = d.start, d.count
        q = max(1, P // 4)
        granule_bad = Mux(count > P // 2, start != 0,
                          Mux(count > P // 4, start[:(P // 2).bit_length() - 1] != 0,
                              start[:q.bit_length() - 1] != 0 if q > 1 else 0))
        form = (((d.mem != MEM_SBUF) & (d.mem != MEM_PSUM)) | (d.esize == 3) | ~nz[0]
                | Cat(*[nz[k] & ~nz[k - 1] for k in range(1, D)], Const(0, 1)).any())
        part = (count == 0) | (count > P) | (start + count > P) | granule_bad
        align = (d.offset & Mux(d.esize == 0, 0, Mux(d.esize == 1, 1, 3))) != 0

        # --- stage 3: the closed-form range, the code, the walk's increments -----------------------
        SW = AP_STEP_BITS + AP_NUM_BITS + 4           # sum of D <= 4 spans
        pos = Signal(signed(SW))
        neg = Signal(signed(SW))
        m.d.comb += [pos.eq(sum(Mux(s > 0, s, 0) for s in spans)),
                     neg.eq(sum(Mux(s < 0, s, 0) for s in spans))]
        RW = SW + 2 + AP_OFFSET_BITS + 2              # x4 bytes, plus the u32 offset
        w = Signal(4)
        m.d.comb += w.eq(Const(1, 4) << d.esize)
        lo, hi = Signal(signed(RW)), Signal(signed(RW))
        m.d.comb += [lo.eq(d.offset + (neg << d.esize)),
                     hi.eq(d.offset + (pos << d.esize) + w - 1)]
        sbuf_bad = (lo < 0) | (hi >= cfg.sbuf_bytes_per_partition)
        lb = cfg.psum_bank_bytes.bit_length() - 1
        bank = d.offset >> lb
        psum_bad = (bank >= cfg.psum_banks) | ((lo >> lb) != bank) | ((hi >> lb) != bank)
        range_bad = Mux(d.mem == MEM_PSUM, psum_bad, sbuf_bad)
        code = Signal(ERROR_BITS)
        m.d.comb += code.eq(Mux(form_bad, E_AP_FORM, Mux(part_bad, E_AP_PART,
                            Mux(align_bad, E_AP_ALIGN, Mux(range_bad, E_AP_RANGE, E_OK)))))

        # Walk: idx[k] counts 0..lim[k]; when dimension k steps, every lower one wraps to 0,
        # so the address moves by w * (step_k - sum_{e<k} span_e) (mod 2**AW: the true address
        # is in range, so AW bits hold it exactly).
        lim = [Signal(AP_NUM_BITS, name=f"lim{k}") for k in range(D)]
        idx = [Signal(AP_NUM_BITS, name=f"idx{k}") for k in range(D)]
        delta = [Signal(AW, name=f"delta{k}") for k in range(D)]
        addr = Signal(AW)
        mask = Signal(P)
        err = Signal()
        ok = Signal()
        err_code = Signal(ERROR_BITS)

        at_end = [idx[k] == lim[k] for k in range(D)]
        last = Cat(*at_end).all()
        m.d.comb += [self.o.payload.addr.eq(addr), self.o.payload.mask.eq(mask),
                     self.o.payload.last.eq(last), self.err.eq(err), self.ok.eq(ok),
                     self.err_code.eq(err_code)]
        m.d.sync += [err.eq(0), ok.eq(0)]

        with m.FSM(name="ap"):
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += d.eq(self.i.payload)
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                for k in range(D):
                    nm1 = Signal(signed(AP_NUM_BITS + 1), name=f"nm1_{k}")
                    m.d.comb += nm1.eq(Mux(nz[k], d.dims[k].num - 1, 0))
                    m.d.sync += spans[k].eq(d.dims[k].step * nm1)
                m.d.sync += [form_bad.eq(form), part_bad.eq(part), align_bad.eq(align)]
                m.next = "RANGE"
            with m.State("RANGE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [err_code.eq(code), err.eq(code != E_OK), ok.eq(code == E_OK),
                             addr.eq(d.offset[:AW])]
                below = 0
                for k in range(D):
                    m.d.sync += [
                        lim[k].eq(Mux(nz[k], d.dims[k].num - 1, 0)), idx[k].eq(0),
                        delta[k].eq((d.dims[k].step - below) << d.esize),
                    ]
                    below = below + spans[k]
                m.d.sync += mask.eq(Cat(*[(p >= start) & (p < start + count)
                                          for p in range(P)]))
                with m.If(code == E_OK):
                    m.next = "RUN"
                with m.Else():
                    m.next = "IDLE"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), self.o.valid.eq(1)]
                with m.If(self.o.ready):
                    with m.If(last):
                        m.next = "IDLE"
                    with m.Else():
                        self._step(m, at_end, idx, delta, addr)
        return m

    @staticmethod
    def _step(m, at_end, idx, delta, addr):
        """On a taken beat that is not the last: step the lowest dimension not at its end,
        wrap every lower one."""
        for k in range(len(idx)):
            below_done = Cat(*at_end[:k], Const(1, 1)).all()
            with m.If(below_done & ~at_end[k]):
                m.d.sync += [idx[k].eq(idx[k] + 1), addr.eq(addr + delta[k])]
                for e in range(k):
                    m.d.sync += idx[e].eq(0)
