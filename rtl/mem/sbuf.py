# SPDX-License-Identifier: Apache-2.0
"""SBUF: ``partitions`` x ``sbuf_bytes_per_partition`` bytes in ``sbuf_banks`` single-ported
banks, reached through named requester ports with per-bank arbitration (docs/memory.md §5)."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, ResetSignal, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In

from rtl.config import CoreConfig, check_config
from rtl.mem.arbiter import BankArbiter
from rtl.mem.port import LANE_BITS, PartPort, RowPort, SBUF as MEM_SBUF

__all__ = ["SBUF"]

#: Cycles from a read request granted (``req.valid & req.ready``) to its data on ``rsp``.
_LATENCY = 1
#: Default of ``yield_after``: cycles a non-priority request may wait before the priority ports
#: yield one cycle to it.
YIELD_AFTER = 16


def _log2(x):
    return x.bit_length() - 1


class SBUF(wiring.Component):
    """The state buffer: P partitions, ``sbuf_banks`` banks selected by the top address bits.

    Storage: one :class:`amaranth.lib.memory.Memory` per bank, ``sbuf_bank_bytes /
    sbuf_word_bytes`` words deep, each word ``partitions x sbuf_word_bytes`` bytes wide (the P
    partitions' SRAM macros of that bank side by side, sharing the address: one read *or* one
    write per bank per cycle, byte-enabled: a 1RW single-ported bank).

    Ports (members named by the constructor):

    * a **row port** (:class:`~rtl.mem.port.RowPort`, ``"sbuf"``) reads or writes the 32-bit
      lane ``addr[2:log2(word)]`` of word ``addr // sbuf_word_bytes`` in every partition of
      ``mask`` (byte enables ``be`` for writes);
    * a **partition port** (:class:`~rtl.mem.port.PartPort`) reads or writes the whole word at
      ``addr`` of partition ``part`` (byte enables ``be``).

    Arbitration, per bank and per cycle (:class:`~rtl.mem.arbiter.BankArbiter`): the ports named
    in ``priority`` (the tensor engine's) first, round-robin among themselves; the others
    round-robin; after ``yield_after`` cycles in which a non-priority request to the bank waited,
    the priority ports yield the bank for one cycle. Requests to different banks proceed in the
    same cycle. A request that loses sees ``req.ready = 0`` and is served later in order; it is
    never dropped or reordered. Wait bounds: :meth:`wait_bound`.

    Timing: ``req.ready`` is combinational from the requests (``valid``, bank bits) of every port
    and the arbiters' registers; it is low during reset (no access is taken then). Read data of a request granted in cycle *t* is on ``rsp``
    (``rsp.valid`` high) in cycle *t* + ``latency`` (1). Writes land at the end of the grant cycle;
    a read granted in a later cycle sees them.

    Parameters
    ----------
    cfg : CoreConfig
        ``partitions``, ``sbuf_bytes_per_partition``, ``sbuf_banks``, ``sbuf_word_bytes``.
    row_ports, part_ports : tuple of str
        Names of the row ports and partition ports (each becomes a member).
    priority : tuple of str
        Row or partition ports served first (the tensor engine's stationary and moving ports).
    yield_after : int
        Cycles (>= 1) a non-priority request may wait before the priority ports yield.

    Members
    -------
    <name> : In(RowPort.Signature(cfg, "sbuf")) or In(PartPort.Signature(cfg))
        One per name, the memory's side (the requester drives ``req``).
    """

    class Signature(wiring.Signature):
        """Members of an :class:`SBUF` with attributes ``latency`` (grant -> read data),
        ``row_ports``, ``part_ports``, ``priority``, ``yield_after``, ``bank_bits``,
        ``word_bits`` and ``depth`` (words per bank)."""

        def __init__(self, cfg: CoreConfig, *, row_ports=(), part_ports=(), priority=(),
                     yield_after=YIELD_AFTER):
            check_config(cfg, "SBUF")
            names = tuple(row_ports) + tuple(part_ports)
            if not names:
                raise ValueError("SBUF needs at least one port in row_ports or part_ports")
            for n in names:
                if not isinstance(n, str) or not n.isidentifier():
                    raise TypeError(f"SBUF port names must be identifiers, not {n!r}")
            if len(set(names)) != len(names):
                raise ValueError(f"SBUF port names must be unique, not {names!r}")
            for n in priority:
                if n not in names:
                    raise ValueError(f"SBUF priority port must be one of {names!r}, not {n!r}")
            if isinstance(yield_after, bool) or not isinstance(yield_after, int) \
                    or not 1 <= yield_after <= 1024:
                raise ValueError(f"SBUF yield_after must be an integer in [1, 1024], "
                                 f"not {yield_after!r}")
            self.latency = _LATENCY
            self.row_ports, self.part_ports = tuple(row_ports), tuple(part_ports)
            self.priority = tuple(n for n in names if n in priority)
            self.yield_after = yield_after
            self.bank_bits = _log2(cfg.sbuf_banks)
            self.word_bits = 8 * cfg.sbuf_word_bytes
            self.depth = cfg.sbuf_bank_bytes // cfg.sbuf_word_bytes
            ms = {n: In(RowPort.Signature(cfg, MEM_SBUF)) for n in row_ports}
            ms.update({n: In(PartPort.Signature(cfg)) for n in part_ports})
            super().__init__(ms)

        def wait_bound(self, name):
            """Longest wait of port ``name`` (cycles from its request raised to its grant, both
            included) when every port requests the same bank all the time."""
            n_hi = len(self.priority)
            n_lo = len(self.row_ports) + len(self.part_ports) - n_hi
            return BankArbiter.wait_bound(n_hi, n_lo, self.yield_after,
                                          priority=name in self.priority)

    def __init__(self, cfg: CoreConfig, *, row_ports=(), part_ports=(), priority=(),
                 yield_after=YIELD_AFTER):
        super().__init__(self.Signature(cfg, row_ports=row_ports, part_ports=part_ports,
                                        priority=priority, yield_after=yield_after))
        self.cfg = cfg
        sig = self.signature
        #: The bank memories (``P * sbuf_word_bytes`` bytes wide; partition p's word in bytes
        #: ``[p * word_bytes, (p + 1) * word_bytes)``): testbenches preload and inspect them.
        self.banks = [memory.Memory(shape=cfg.partitions * sig.word_bits, depth=sig.depth,
                                    init=[]) for _ in range(cfg.sbuf_banks)]

    @property
    def latency(self):
        """Cycles from a read request granted to its data on ``rsp``."""
        return self.signature.latency

    def elaborate(self, platform):
        m = Module()
        cfg, sig = self.cfg, self.signature
        P, NB, WB = cfg.partitions, cfg.sbuf_banks, cfg.sbuf_word_bytes
        AB = _log2(cfg.sbuf_bytes_per_partition)
        lanes = WB * 8 // LANE_BITS
        wsh, bsh = _log2(WB), _log2(cfg.sbuf_bank_bytes)
        names = sig.row_ports + sig.part_ports
        ports = {n: getattr(self, n) for n in names}
        is_row = {n: n in sig.row_ports for n in names}

        def bank_of(n):
            return ports[n].req.payload.addr[bsh:AB] if NB > 1 else 0

        # --- per-bank arbitration -----------------------------------------------------------
        hi = [n for n in names if n in sig.priority]
        lo = [n for n in names if n not in sig.priority]
        arb = BankArbiter(len(hi), len(lo), sig.yield_after)
        grant = {n: [] for n in names}            # grant[n][b]
        for b in range(NB):
            hreq = [ports[n].req.valid & (bank_of(n) == b) for n in hi]
            lreq = [ports[n].req.valid & (bank_of(n) == b) for n in lo]
            hg, lg = arb.build(m, hreq, lreq, name=f"bank{b}")
            for n, g in zip(hi + lo, hg + lg):
                grant[n].append(g & ~ResetSignal())    # nothing is taken during reset
        for n in names:
            m.d.comb += ports[n].req.ready.eq(Cat(*grant[n]).any())

        # --- the banks ----------------------------------------------------------------------
        rdata = []
        for b in range(NB):
            mem = self.banks[b]
            m.submodules[f"bank{b}"] = mem
            wp = mem.write_port(granularity=8)
            rp = mem.read_port(domain="sync")
            rdata.append(rp.data)
            # the granted request's word address, data and byte enables (one-hot select)
            w_addr = 0
            w_en = 0
            w_data = 0
            r_en = 0
            for n in names:
                g, req = grant[n][b], ports[n].req.payload
                w_addr = w_addr | Mux(g, req.addr[wsh:bsh], 0)
                if is_row[n]:
                    lane = req.addr[2:wsh] if lanes > 1 else 0
                    be = Cat(*[Mux(req.mask[p] & (lane == j), req.be, 0)
                               for p in range(P) for j in range(lanes)])
                    data = Cat(*[req.wdata[p] for p in range(P) for _j in range(lanes)])
                else:
                    be = Cat(*[Mux(req.part == p, req.be, 0) for p in range(P)])
                    data = Cat(*[req.wdata for _p in range(P)])
                w_en = w_en | Mux(g & req.we, be, 0)
                w_data = w_data | Mux(g, data, 0)
                r_en = r_en | (g & ~req.we)
            m.d.comb += [wp.addr.eq(w_addr), rp.addr.eq(w_addr), wp.en.eq(w_en),
                         wp.data.eq(w_data), rp.en.eq(r_en)]

        # --- read responses: latency 1, in grant order per port -------------------------------
        rbank = Array(rdata)
        for n in names:
            req, rsp = ports[n].req, ports[n].rsp
            rv = Signal(name=f"{n}_rv")
            rb = Signal(range(max(2, NB)), name=f"{n}_rbank")
            m.d.sync += [rv.eq(req.valid & req.ready & ~req.payload.we),
                         rb.eq(bank_of(n))]
            word = rbank[rb] if NB > 1 else rdata[0]
            m.d.comb += rsp.valid.eq(rv)
            if is_row[n]:
                rl = Signal(range(max(2, lanes)), name=f"{n}_rlane")
                m.d.sync += rl.eq(req.payload.addr[2:wsh] if lanes > 1 else 0)
                for p in range(P):
                    pw = word[p * WB * 8:(p + 1) * WB * 8]
                    ln = Array([pw[j * LANE_BITS:(j + 1) * LANE_BITS] for j in range(lanes)])
                    m.d.comb += rsp.payload[p].eq(ln[rl] if lanes > 1 else pw)
            else:
                rpart = Signal(range(max(2, P)), name=f"{n}_rpart")
                m.d.sync += rpart.eq(req.payload.part)
                words = Array([word[p * WB * 8:(p + 1) * WB * 8] for p in range(P)])
                m.d.comb += rsp.payload.eq(words[rpart])
        return m
