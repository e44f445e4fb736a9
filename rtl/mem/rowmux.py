# SPDX-License-Identifier: Apache-2.0
"""Several requesters on one row port (docs/memory.md §5): e.g. the vector engine's two PSUM
sources and its PSUM destination on the tensor engine's one ``psum_vector`` port."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import CoreConfig, check_config
from rtl.mem.arbiter import rr_pick
from rtl.mem.port import RowPort

__all__ = ["RowPortMux"]


class RowPortMux(wiring.Component):
    """``n`` row ports (``up[k]``, the memory's side) onto one (``down``, the requester's side).

    One request per cycle is forwarded, round-robin among the valid ones (a requester waits at
    most ``n - 1`` grants of the others); a request that loses sees ``ready = 0`` and stays. The
    requester of every forwarded read enters a FIFO of ``depth`` entries (a read is forwarded
    only while it has room), and read data go back to the FIFO's head: responses keep the
    memory's order, which is request order. Adds no latency.

    Parameters
    ----------
    cfg : CoreConfig
    memory : str
        ``"sbuf"`` or ``"psum"``.
    n : int
        Requesters, 2..8.
    depth : int
        Reads in flight (at least the memory's read latency + 1).

    Members
    -------
    up : In(RowPort.Signature(cfg, memory)).array(n)
    down : Out(RowPort.Signature(cfg, memory))
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig, memory: str, n: int):
            check_config(cfg, "RowPortMux")
            if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= 8:
                raise ValueError(f"RowPortMux n must be in [2, 8], not {n!r}")
            port = RowPort.Signature(cfg, memory)
            super().__init__({"up": In(port).array(n), "down": Out(port)})

    def __init__(self, cfg: CoreConfig, memory: str, n: int, *, depth=4):
        super().__init__(self.Signature(cfg, memory, n))
        self.cfg, self.n, self.depth = cfg, n, depth

    def elaborate(self, platform):
        m = Module()
        n = self.n
        last = Signal(range(n), init=n - 1)
        found, pick = rr_pick(m, Cat(u.req.valid for u in self.up), last, n, "rr")
        q = m.submodules.q = fifo.SyncFIFO(width=max(1, (n - 1).bit_length()), depth=self.depth)
        down = self.down
        for k, u in enumerate(self.up):
            with m.If(found & (pick == k)):
                room = u.req.payload.we | q.w_rdy
                m.d.comb += [down.req.valid.eq(room), down.req.payload.eq(u.req.payload),
                             u.req.ready.eq(down.req.ready & room)]
        fire = down.req.valid & down.req.ready
        with m.If(fire):
            m.d.sync += last.eq(pick)
        m.d.comb += [q.w_en.eq(fire & ~down.req.payload.we), q.w_data.eq(pick)]
        for k, u in enumerate(self.up):
            m.d.comb += [u.rsp.payload.eq(down.rsp.payload),
                         u.rsp.valid.eq(down.rsp.valid & q.r_rdy & (q.r_data == k))]
        m.d.comb += q.r_en.eq(down.rsp.valid)
        return m
