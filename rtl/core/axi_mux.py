# SPDX-License-Identifier: Apache-2.0
"""An AXI4 interconnect of ``n`` managers onto one port (the core's one AXI4 master: the
sequencers' instruction fetches, the sync engine's descriptor reads and the DMA engines)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.dma.axi import AXI4Signature

__all__ = ["AXI4Mux"]

_AR = ("araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot")
_AW = ("awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot")


def _rr_pick(m, valids, last, n, name):
    """Round-robin choice after ``last`` among ``valids`` (n bits): ``(found, index)``."""
    pick = Signal(range(max(2, n)), name=f"{name}_pick")
    found = Signal(name=f"{name}_found")
    for k in reversed(range(n)):
        idx = Signal(range(max(2, n)), name=f"{name}_order{k}")
        m.d.comb += idx.eq(Mux(last + 1 + k >= n, last + 1 + k - n, last + 1 + k))
        with m.If(valids.bit_select(idx, 1)):
            m.d.comb += [pick.eq(idx), found.eq(1)]
    return found, pick


class AXI4Mux(wiring.Component):
    """``n`` AXI4 managers (``AXI4Signature(cfg)``) onto one port whose ID carries the
    manager index above the manager's ID (``id_bits = manager id_bits + ceil(log2 n)``).

    * AR and AW are arbitrated round-robin, each independently; a granted address beat is held
      until the subordinate takes it (AXI's stable-valid rule), so a manager waits at most
      ``n - 1`` other address beats.
    * W beats follow the AW order (AXI4 has no WID): the granted AW's manager index enters a
      FIFO of ``w_depth`` entries and the W channel serves the FIFO's head until ``wlast``. An
      AW is granted only while the FIFO has room.
    * R and B beats are routed by the top ID bits; the manager's own ID bits pass through.
      Responses of different managers may interleave (different IDs).

    Parameters
    ----------
    cfg : CoreConfig
    n : int
        Managers, 1..16.
    w_depth : int
        AW grants whose W beats are not all through.

    Members
    -------
    m : In(AXI4Signature(cfg)).array(n)
    s : Out(AXI4Signature(cfg, id_bits=...))
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig, n: int):
            check_config(cfg, "AXI4Mux")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
                raise ValueError(f"AXI4Mux n must be in [1, 16], not {n!r}")
            self.sel_bits = max(1, (n - 1).bit_length())
            self.in_sig = AXI4Signature(cfg)
            self.out_sig = AXI4Signature(cfg, id_bits=self.in_sig.id_bits + self.sel_bits)
            super().__init__({"m": In(self.in_sig).array(n), "s": Out(self.out_sig)})

    def __init__(self, cfg: CoreConfig, n: int, *, w_depth=4):
        super().__init__(self.Signature(cfg, n))
        self.cfg, self.n, self.w_depth = cfg, n, w_depth

    def elaborate(self, platform):
        m = Module()
        n, sig, s = self.n, self.signature, self.s
        ib = sig.in_sig.id_bits

        # ---- address channels --------------------------------------------------------------
        def address(prefix, fields, extra_ok=1):
            held = Signal(name=f"{prefix}_held")
            cur = Signal(range(max(2, n)), name=f"{prefix}_cur")
            last = Signal(range(max(2, n)), name=f"{prefix}_last", init=n - 1)
            valids = Cat(getattr(mm, f"{prefix}valid") for mm in self.m)
            found, pick = _rr_pick(m, valids, last, n, prefix)
            with m.If(~held & found & extra_ok):
                m.d.sync += [held.eq(1), cur.eq(pick)]
            fire = held & getattr(s, f"{prefix}ready")
            with m.If(fire):
                m.d.sync += [held.eq(0), last.eq(cur)]
            m.d.comb += getattr(s, f"{prefix}valid").eq(held)
            for k, mm in enumerate(self.m):
                with m.If(held & (cur == k)):
                    m.d.comb += [getattr(s, f).eq(getattr(mm, f)) for f in fields]
                    m.d.comb += [getattr(s, f"{prefix}id").eq(Cat(getattr(mm, f"{prefix}id"),
                                                                   Signal(sig.sel_bits, init=k))),
                                 getattr(mm, f"{prefix}ready").eq(getattr(s, f"{prefix}ready"))]
            return fire, cur

        address("ar", _AR)
        wq = m.submodules.wq = fifo.SyncFIFOBuffered(width=sig.sel_bits, depth=self.w_depth)
        aw_fire, aw_cur = address("aw", _AW, extra_ok=wq.w_rdy)
        m.d.comb += [wq.w_data.eq(aw_cur), wq.w_en.eq(aw_fire)]

        # ---- W: the FIFO's head manager until wlast ----------------------------------------
        for k, mm in enumerate(self.m):
            with m.If(wq.r_rdy & (wq.r_data == k)):
                m.d.comb += [s.wdata.eq(mm.wdata), s.wstrb.eq(mm.wstrb), s.wlast.eq(mm.wlast),
                             s.wvalid.eq(mm.wvalid), mm.wready.eq(s.wready)]
        m.d.comb += wq.r_en.eq(s.wvalid & s.wready & s.wlast)

        # ---- R, B: routed by the top ID bits ----------------------------------------------
        for k, mm in enumerate(self.m):
            m.d.comb += [mm.rid.eq(s.rid[:ib]), mm.rdata.eq(s.rdata), mm.rresp.eq(s.rresp),
                         mm.rlast.eq(s.rlast), mm.bid.eq(s.bid[:ib]), mm.bresp.eq(s.bresp)]
            with m.If(s.rid[ib:] == k):
                m.d.comb += [mm.rvalid.eq(s.rvalid), s.rready.eq(mm.rready)]
            with m.If(s.bid[ib:] == k):
                m.d.comb += [mm.bvalid.eq(s.bvalid), s.bready.eq(mm.bready)]
        return m
