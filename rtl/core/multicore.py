# SPDX-License-Identifier: Apache-2.0
"""The multi-core top (docs/collectives.md §15): ``cfg.ring_size`` NeuronCores on a
unidirectional ring, each with its own AXI4 master and AXI4-Lite slave.

Core ``i``'s TX link goes through a :class:`rtl.collective.delay.DelayLine` of
``link_latency`` cycles to core ``i + 1``'s RX link, and that RX port's credit returns come
back through a second delay line; core ``n - 1``'s link to core 0 is the dateline. Each core
gets its rank and its dateline bit as constants on its ``rank`` / ``dateline`` inputs, so one
converted core module serves every rank.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl.collective.delay import DelayLine
from rtl.config import LINK_VCS, CoreConfig, check_config
from rtl.core.csr import AXI4LiteSignature
from rtl.core.neuroncore import NeuronCore
from rtl.leaf import Leaf

__all__ = ["MultiCore", "core_module_name"]


def core_module_name(cfg: CoreConfig):
    """Verilog module name of the core a :class:`MultiCore` instantiates."""
    return f"neuroncore_{cfg.name}"


class MultiCore(wiring.Component):
    """``n = cfg.ring_size`` (2, 4 or 8) cores on a ring.

    Parameters
    ----------
    cfg : CoreConfig
    use_instances : bool
        Each core an ``Instance`` of one converted module (:func:`core_module_name`; the
        Verilator build adds it, :mod:`tb.multicore.build`) or a submodule (amaranth.sim).

    Members
    -------
    c<i>_axi : Out(NeuronCore axi)
        Core i's AXI4 master (ports ``c<i>_axi__*``).
    c<i>_host : In(AXI4LiteSignature())
        Core i's host registers (ports ``c<i>_host__*``).
    c<i>_irq : Out(1); c<i>_activity : Out(NeuronCore activity)
    link_down : In(ring_size)
        Bit i high: link i -> i + 1 carries nothing in either direction (no flit, no credit): a
        link that went down, for fault tests and bring-up.
    """

    class Signature(wiring.Signature):
        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "MultiCore")
            if cfg.ring_size < 2:
                raise ValueError(f"MultiCore cfg.ring_size must be in [2, 8], not "
                                 f"{cfg.ring_size!r}")
            core = NeuronCore.Signature(cfg)
            self.core = core
            ms = {}
            for i in range(cfg.ring_size):
                ms[f"c{i}_axi"] = Out(core.mux.out_sig)
                ms[f"c{i}_host"] = In(AXI4LiteSignature())
                ms[f"c{i}_irq"] = Out(1)
                ms[f"c{i}_activity"] = Out(core.members["activity"].shape)
            ms["link_down"] = In(cfg.ring_size)
            super().__init__(ms)

    def __init__(self, cfg: CoreConfig, *, use_instances=True):
        super().__init__(self.Signature(cfg))
        self.cfg = cfg
        self.use_instances = use_instances

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        n = cfg.ring_size
        cores = []
        for i in range(n):
            if self.use_instances:
                c = Leaf(NeuronCore.Signature(cfg), core_module_name(cfg))
            else:
                c = NeuronCore(cfg, use_instances=False)
            m.submodules[f"core{i}"] = c
            cores.append(c)
            wiring.connect(m, wiring.flipped(getattr(self, f"c{i}_axi")), c.axi)
            wiring.connect(m, wiring.flipped(getattr(self, f"c{i}_host")), c.host)
            m.d.comb += [getattr(self, f"c{i}_irq").eq(c.irq),
                         getattr(self, f"c{i}_activity").eq(c.activity),
                         c.rank.eq(i), c.dateline.eq(i == n - 1)]
        for i in range(n):
            a, b = cores[i], cores[(i + 1) % n]
            fwd = m.submodules[f"wire{i}"] = DelayLine(cfg.link_flit_bits, cfg.link_latency)
            rev = m.submodules[f"credit{i}"] = DelayLine(LINK_VCS, cfg.link_latency,
                                                         in_memory=False)
            up = ~self.link_down[i]
            m.d.comb += [fwd.i.eq(a.ring_tx_flit), fwd.i_valid.eq(a.ring_tx_valid & up),
                         b.ring_rx_valid.eq(fwd.o_valid), b.ring_rx_flit.eq(fwd.o),
                         rev.i.eq(b.ring_rx_credit), rev.i_valid.eq(up),
                         a.ring_tx_credit.eq(Mux(rev.o_valid, rev.o, 0))]
        return m
