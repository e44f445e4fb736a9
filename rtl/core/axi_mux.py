# SPDX-License-Identifier: Apache-2.0
"""An AXI4 interconnect of ``n`` managers onto one port (the core's one AXI4 master: the
sequencers' instruction fetches, the sync engine's descriptor reads and the DMA engines)."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.dma.axi import AXI4Signature
from rtl.mem.arbiter import rr_pick

__all__ = ["AXI4Mux"]

_AR = ("araddr", "arlen", "arsize", "arburst", "arlock", "arcache", "arprot")
_AW = ("awaddr", "awlen", "awsize", "awburst", "awlock", "awcache", "awprot")


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
    * ``flush`` (the core's soft reset, docs/core.md §5): no new address beat is granted, a
      granted one still goes out (it is held in the mux, not by the manager), the W burst of
      every granted AW is completed by the mux with ``wstrb`` = 0 beats, and every R and B
      beat is accepted and dropped. ``busy`` is high while an address beat is held, a W burst
      is open or a read or write has not had its last response; once it is low under
      ``flush`` the port is quiet and the managers may leave reset.
    * Latency: an address beat is taken from the manager the cycle it is granted and leaves
      the next cycle at the earliest.

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
    flush : In(1)
    busy : Out(1)
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig, n: int):
            check_config(cfg, "AXI4Mux")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16:
                raise ValueError(f"AXI4Mux n must be in [1, 16], not {n!r}")
            self.sel_bits = max(1, (n - 1).bit_length())
            self.in_sig = AXI4Signature(cfg)
            self.out_sig = AXI4Signature(cfg, id_bits=self.in_sig.id_bits + self.sel_bits)
            super().__init__({"m": In(self.in_sig).array(n), "s": Out(self.out_sig),
                              "flush": In(1), "busy": Out(1)})

    def __init__(self, cfg: CoreConfig, n: int, *, w_depth=4):
        super().__init__(self.Signature(cfg, n))
        self.cfg, self.n, self.w_depth = cfg, n, w_depth

    def elaborate(self, platform):
        m = Module()
        n, sig, s = self.n, self.signature, self.s
        ib = sig.in_sig.id_bits

        # ---- address channels --------------------------------------------------------------
        # the granted beat is taken from the manager into a register and held there until the
        # subordinate takes it, so a manager reset while its beat waits breaks no AXI rule
        def address(prefix, fields, extra_ok=1):
            held = Signal(name=f"{prefix}_held")
            cur = Signal(range(max(2, n)), name=f"{prefix}_cur")
            last = Signal(range(max(2, n)), name=f"{prefix}_last", init=n - 1)
            valids = Cat(getattr(mm, f"{prefix}valid") for mm in self.m)
            found, pick = rr_pick(m, valids, last, n, prefix)
            grant = ~held & found & extra_ok & ~self.flush
            with m.If(grant):
                m.d.sync += [held.eq(1), cur.eq(pick)]
            for k, mm in enumerate(self.m):
                with m.If(grant & (pick == k)):
                    m.d.comb += getattr(mm, f"{prefix}ready").eq(1)
                    m.d.sync += [getattr(s, f).eq(getattr(mm, f)) for f in fields]
                    m.d.sync += getattr(s, f"{prefix}id").eq(
                        Cat(getattr(mm, f"{prefix}id"), Signal(sig.sel_bits, init=k)))
            fire = held & getattr(s, f"{prefix}ready")
            with m.If(fire):
                m.d.sync += [held.eq(0), last.eq(cur)]
            m.d.comb += getattr(s, f"{prefix}valid").eq(held)
            return fire, cur, held

        ar_fire, _, ar_held = address("ar", _AR)
        wl = data.StructLayout({"sel": sig.sel_bits, "len": 8})
        wq = m.submodules.wq = fifo.SyncFIFOBuffered(width=wl.size, depth=self.w_depth)
        aw_fire, aw_cur, aw_held = address("aw", _AW, extra_ok=wq.w_rdy)
        m.d.comb += [wq.w_data.eq(Cat(aw_cur, s.awlen)), wq.w_en.eq(aw_fire)]

        # ---- W: the FIFO's head manager until wlast ----------------------------------------
        # while flushing, the mux ends the head burst itself with strobe-less beats
        head = data.View(wl, wq.r_data)
        wbeat = Signal(8)
        flush_last = wbeat == head.len
        with m.If(wq.r_rdy & self.flush):
            m.d.comb += [s.wvalid.eq(1), s.wstrb.eq(0), s.wlast.eq(flush_last)]
        with m.Elif(wq.r_rdy):
            for k, mm in enumerate(self.m):
                with m.If(head.sel == k):
                    m.d.comb += [s.wdata.eq(mm.wdata), s.wstrb.eq(mm.wstrb),
                                 s.wlast.eq(mm.wlast), s.wvalid.eq(mm.wvalid),
                                 mm.wready.eq(s.wready)]
        w_fire = s.wvalid & s.wready
        m.d.comb += wq.r_en.eq(w_fire & s.wlast)
        with m.If(w_fire):
            m.d.sync += wbeat.eq(Mux(s.wlast, 0, wbeat + 1))

        # ---- R, B: routed by the top ID bits; sunk while flushing --------------------------
        for k, mm in enumerate(self.m):
            m.d.comb += [mm.rid.eq(s.rid[:ib]), mm.rdata.eq(s.rdata), mm.rresp.eq(s.rresp),
                         mm.rlast.eq(s.rlast), mm.bid.eq(s.bid[:ib]), mm.bresp.eq(s.bresp)]
            with m.If(~self.flush & (s.rid[ib:] == k)):
                m.d.comb += [mm.rvalid.eq(s.rvalid), s.rready.eq(mm.rready)]
            with m.If(~self.flush & (s.bid[ib:] == k)):
                m.d.comb += [mm.bvalid.eq(s.bvalid), s.bready.eq(mm.bready)]
        with m.If(self.flush):
            m.d.comb += [s.rready.eq(1), s.bready.eq(1)]

        # ---- transactions in flight --------------------------------------------------------
        lim = 1 << 12
        reads, writes = Signal(range(lim)), Signal(range(lim))
        r_done = s.rvalid & s.rready & s.rlast
        b_done = s.bvalid & s.bready
        m.d.sync += [reads.eq(reads + ar_fire - r_done), writes.eq(writes + aw_fire - b_done)]
        m.d.comb += self.busy.eq(ar_held | aw_held | wq.r_rdy | (reads != 0) | (writes != 0))
        return m
