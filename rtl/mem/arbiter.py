# SPDX-License-Identifier: Apache-2.0
"""The bank arbiter of SBUF (and of PSUM's row ports): priority group first, the rest round-robin,
with a yield counter that bounds every requester's wait (docs/memory.md §5).

Pure combinational helpers plus one small per-bank state (two round-robin pointers and the
yield counter), written as functions that add logic to a caller's :class:`Module`, so SBUF and
the formal harness build exactly the same arbiter.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["first_one", "round_robin", "rr_pick", "BankArbiter", "ArbiterUnit"]


def first_one(bits):
    """One-hot of the lowest set bit of the list ``bits`` (all zero if none)."""
    out, seen = [], Const(0, 1)
    for b in bits:
        out.append(b & ~seen)
        seen = seen | b
    return out


def round_robin(bits, ptr):
    """One-hot grant of the first set bit strictly after index ``ptr`` (cyclically) of ``bits``:
    the requester after the last one granted goes first."""
    n = len(bits)
    if n == 1:
        return list(bits)
    after = first_one([b & (ptr < j) for j, b in enumerate(bits)])
    wrap = first_one(bits)
    any_after = Cat(*[b & (ptr < j) for j, b in enumerate(bits)]).any()
    return [Mux(any_after, a, w) for a, w in zip(after, wrap)]


def rr_pick(m, valids, last, n, name):
    """Round-robin choice among the ``n`` bits of ``valids``, starting after index ``last``
    (cyclically): ``(found, index)``, two combinational signals driven in ``m`` (the row-port
    mux and the AXI mux; the bank arbiter's :func:`round_robin` is its one-hot form)."""
    pick = Signal(range(max(2, n)), name=f"{name}_pick")
    found = Signal(name=f"{name}_found")
    for k in reversed(range(n)):        # the first valid after ``last`` wins (assigned last)
        idx = Signal(range(max(2, n)), name=f"{name}_order{k}")
        m.d.comb += idx.eq(Mux(last + 1 + k >= n, last + 1 + k - n, last + 1 + k))
        with m.If(valids.bit_select(idx, 1)):
            m.d.comb += [pick.eq(idx), found.eq(1)]
    return found, pick


class BankArbiter:
    """One bank's arbiter, built into module ``m`` by :meth:`build`.

    Requesters are split into a *priority* group (``hi``, e.g. the tensor engine's ports) and the
    others (``lo``); each group is served round-robin. The priority group wins, except that once
    some ``lo`` request has waited ``yield_after`` cycles in a row without the ``lo`` group being
    served, the ``lo`` group goes first for one cycle (the tensor engine *yields*).

    Guarantee (``yield_after`` = Y >= 1, ``n_hi``/``n_lo`` requesters on the bank): a ``lo``
    request is granted within ``n_lo * (Y + 1)`` cycles of being raised, a ``hi`` request within
    ``n_hi + ceil(n_hi / Y)`` cycles (:meth:`wait_bound`). Requests are never dropped: a
    requester keeps its request until granted (stream rule) and the grant is exactly one-hot
    among the requesting ports, or zero when none requests.
    """

    def __init__(self, n_hi, n_lo, yield_after):
        if n_hi + n_lo < 1:
            raise ValueError("BankArbiter needs at least one requester")
        if isinstance(yield_after, bool) or not isinstance(yield_after, int) or yield_after < 1:
            raise ValueError(f"yield_after must be an integer >= 1, not {yield_after!r}")
        self.n_hi, self.n_lo, self.Y = n_hi, n_lo, yield_after

    @staticmethod
    def wait_bound(n_hi, n_lo, yield_after, *, priority):
        """Longest wait (cycles from request raised to granted, the grant cycle included) of a
        priority (``priority=True``) or other requester on one bank."""
        if priority:
            return n_hi + -(-n_hi // yield_after) if n_lo else n_hi
        return n_lo * (yield_after + 1) if n_hi else n_lo

    def build(self, m, hi_req, lo_req, name="arb", hold=None):
        """Add the arbiter to ``m``; returns ``(hi_grant, lo_grant)`` lists of 1-bit values.
        ``hold`` (a 1-bit value, optional) withholds the bank from the ``lo`` group in that
        cycle (PSUM: the tensor engine is using the bank); it voids the ``lo`` bound."""
        n_hi, n_lo, Y = self.n_hi, self.n_lo, self.Y
        hi_ptr = Signal(range(max(2, n_hi)), name=f"{name}_hi_ptr", init=max(0, n_hi - 1))
        lo_ptr = Signal(range(max(2, n_lo)), name=f"{name}_lo_ptr", init=max(0, n_lo - 1))
        wait = Signal(range(Y + 1), name=f"{name}_wait")
        hi_any = Cat(*hi_req).any() if n_hi else Const(0, 1)
        lo_any = Cat(*lo_req).any() if n_lo else Const(0, 1)
        hi_rr = round_robin(hi_req, hi_ptr) if n_hi else []
        lo_rr = round_robin(lo_req, lo_ptr) if n_lo else []
        lo_first = Signal(name=f"{name}_yield")
        m.d.comb += lo_first.eq(lo_any & ((wait == Y) | ~hi_any)
                                & (~hold if hold is not None else 1))
        hi_g = [Signal(name=f"{name}_hg{j}") for j in range(n_hi)]
        lo_g = [Signal(name=f"{name}_lg{j}") for j in range(n_lo)]
        m.d.comb += [g.eq(r & ~lo_first) for g, r in zip(hi_g, hi_rr)]
        m.d.comb += [g.eq(r & lo_first) for g, r in zip(lo_g, lo_rr)]
        for j, g in enumerate(hi_g):
            with m.If(g):
                m.d.sync += hi_ptr.eq(j)
        for j, g in enumerate(lo_g):
            with m.If(g):
                m.d.sync += lo_ptr.eq(j)
        with m.If(lo_any & ~lo_first):
            m.d.sync += wait.eq(wait + 1)
        with m.Else():
            m.d.sync += wait.eq(0)
        return hi_g, lo_g


class ArbiterUnit(wiring.Component):
    """:class:`BankArbiter` as a component of its own: the one-bank arbiter that ``make synth``
    measures apart from the SBUF's data multiplexers.

    Parameters
    ----------
    n_hi, n_lo, yield_after : int
        As :class:`BankArbiter`.

    Members
    -------
    hi_req : In(n_hi); lo_req : In(n_lo)
        One request bit per requester.
    hi_grant : Out(n_hi); lo_grant : Out(n_lo)
        The grants of this cycle (combinational, latency 0).
    """

    def __init__(self, n_hi, n_lo, yield_after):
        self.arbiter = BankArbiter(n_hi, n_lo, yield_after)
        super().__init__({"hi_req": In(max(1, n_hi)), "lo_req": In(max(1, n_lo)),
                          "hi_grant": Out(max(1, n_hi)), "lo_grant": Out(max(1, n_lo))})

    def elaborate(self, platform):
        m = Module()
        a = self.arbiter
        hi, lo = a.build(m, [self.hi_req[j] for j in range(a.n_hi)],
                         [self.lo_req[j] for j in range(a.n_lo)])
        m.d.comb += [self.hi_grant[j].eq(g) for j, g in enumerate(hi)]
        m.d.comb += [self.lo_grant[j].eq(g) for j, g in enumerate(lo)]
        return m
