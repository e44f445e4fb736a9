# SPDX-License-Identifier: Apache-2.0
"""The Verilator top of the collective-engine ring: :class:`EngineRingHarness`, the rig of
:class:`tb.multicore.rig.EngineRing` (``n`` :class:`rtl.collective.engine.CollectiveEngine`, or with
``engine="permute"`` :class:`rtl.collective.permute.PermuteEngine`, with their SBUFs, link ports
and delay lines) with one instruction port per rank, a start strobe and
per-rank completion registers, so that a testbench preloads the SBUFs (backdoor, the
``bank<b>`` memories of ``ring.sbuf<r>``), pulses ``start`` once and awaits ``all_done``: no
per-cycle Python. Its build: :func:`tb.multicore.build.engine_ring_sim`.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.collective.engine import CollectiveEngine, instr_layout
from rtl.collective.permute import PermuteEngine
from rtl.isa import ERROR_BITS
from rtl.leaf import Leaf
from rtl.mem.sbuf import SBUF
from tb.multicore.rig import RING_SBUF_PORTS, EngineRing, ring_sbuf

__all__ = ["EngineRingHarness", "ENGINES", "ENGINE_MODULE", "SBUF_MODULE", "leaf_modules"]

#: Verilog module names of the (collective) engine and of a rank's SBUF, each converted once.
ENGINE_MODULE, SBUF_MODULE = "ring_engine", "ring_sbuf"
#: The engines the ring can be built of: ``{name: (class, Verilog module name)}``.
ENGINES = {"collective": (CollectiveEngine, ENGINE_MODULE),
           "permute": (PermuteEngine, "ring_permute")}


def _engine(engine):
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {tuple(ENGINES)}, not {engine!r}")
    return ENGINES[engine]


def leaf_modules(cfg, engine="collective"):
    """``{module name: component}`` the harness instantiates by name (for
    :class:`rtl.emit.Design`): the engine (``engine``, a key of :data:`ENGINES`) and the SBUF
    of ``cfg``."""
    cls, name = _engine(engine)
    return {name: cls(cfg), SBUF_MODULE: ring_sbuf(cfg)}


class EngineRingHarness(wiring.Component):
    """:class:`EngineRing` of ``cfg`` (``cfg.ring_size`` ranks) behind per-rank registers.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        Every engine and SBUF an ``Instance`` of one converted module (:func:`leaf_modules`;
        Verilator); False: the components themselves (amaranth.sim).
    engine : str
        The ranks' engine, a key of :data:`ENGINES` (``"permute"``: all-to-all and send/recv).

    Members
    -------
    start : In(1)
        High for one cycle: every engine's ``instr.valid`` (payload ``instr<r>``); the
        cycle counter restarts.
    instr<r> : In(instr_layout(cfg))
        Rank r's decoded instruction (:func:`tb.multicore.rig.instr_fields`).
    watchdog : In(32)
        The link ports' watchdog (0: off).
    cut : In(range(n + 1))
        The link ``cut -> cut + 1`` carries nothing (``n``: none cut).
    taken : Out(n)
        Rank r's engine took the instruction at ``start`` (``instr.ready`` was high).
    done_at<r> : Out(32)
        Rank r's ``done`` cycle, counted from the start cycle (1) as
        :func:`tb.multicore.rig.run_engines` counts; ``status<r>``, ``info<r>`` its payload.
    all_done : Out(1)
        Every rank has reported ``done`` since the last ``start``.
    """

    def __init__(self, cfg, *, use_instances=True, engine="collective"):
        cls, name = _engine(engine)
        n = cfg.ring_size
        ms = {"start": In(1), "watchdog": In(32), "cut": In(range(n + 1)), "taken": Out(n),
              "all_done": Out(1)}
        for r in range(n):
            ms[f"instr{r}"] = In(instr_layout(cfg))
            ms[f"done_at{r}"] = Out(32)
            ms[f"status{r}"] = Out(ERROR_BITS)
            ms[f"info{r}"] = Out(32)
        super().__init__(ms)
        self.cfg, self.n = cfg, n
        if use_instances:
            self.ring = EngineRing(
                cfg, lambda c: Leaf(cls.Signature(c), name),
                sbuf=lambda c: Leaf(SBUF.Signature(c, row_ports=RING_SBUF_PORTS), SBUF_MODULE))
        else:
            self.ring = EngineRing(cfg, cls)

    def elaborate(self, platform):
        m = Module()
        n, ring = self.n, self.ring
        m.submodules.ring = ring
        m.d.comb += [ring.watchdog.eq(self.watchdog), ring.cut.eq(self.cut)]
        cnt = Signal(32)
        got = Signal(n)
        with m.If(self.start):
            m.d.sync += [cnt.eq(1), got.eq(0)]
        with m.Elif(cnt != 0):
            m.d.sync += cnt.eq(cnt + 1)
        m.d.comb += self.all_done.eq(got.all())
        for r, e in enumerate(ring.eng):
            m.d.comb += [e.instr.valid.eq(self.start),
                         e.instr.payload.eq(getattr(self, f"instr{r}")), e.done.ready.eq(1)]
            with m.If(self.start):
                m.d.sync += self.taken[r].eq(e.instr.ready)
            with m.Elif(e.done.valid & ~got[r]):
                m.d.sync += [got[r].eq(1), getattr(self, f"done_at{r}").eq(cnt),
                             getattr(self, f"status{r}").eq(e.done.payload.status),
                             getattr(self, f"info{r}").eq(e.done.payload.info)]
        return m
