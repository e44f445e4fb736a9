# SPDX-License-Identifier: Apache-2.0
"""Fault injectors for the ring link's wires (:func:`tb.collective.rig.run_link`).

A forward injector is called once per cycle as ``f(t, valid, flit) -> (valid, flit)`` with what
the TX port puts on the wire; a reverse one as ``f(t, credits) -> credits``. Each counts the
valid flits (credits) it has seen and acts on the ``k``-th (0-based); ``hit`` records the
cycle it acted and, for flits, the VC and sequence number of the flit it acted on.
"""

from __future__ import annotations

from collections import deque

from golden.collective.link import unpack_flit

__all__ = ["FlipBit", "DropFlit", "DuplicateFlit", "ReorderFlits", "Silence", "LoseCredit",
           "DuplicateCredit"]


class _Forward:
    """Valid flits pass through a queue; one goes out per cycle (a duplicate makes a backlog
    of one that drains in the next idle cycle)."""

    def __init__(self, cfg, k):
        self.cfg, self.k = cfg, k
        self.n = 0
        self.q = deque()
        self.hit = None

    def _mark(self, t, flit):
        f = unpack_flit(self.cfg, flit)
        self.hit = {"cycle": t, "vc": f["vc"], "seq": f["seq"], "index": self.n}

    def push(self, t, flit):
        self.q.append(flit)

    def __call__(self, t, valid, flit):
        if valid:
            self.push(t, flit)
            self.n += 1
        return (1, self.q.popleft()) if self.q else (0, 0)


class FlipBit(_Forward):
    """The ``k``-th flit with bit ``bit`` of the whole flit inverted."""

    def __init__(self, cfg, k, bit):
        super().__init__(cfg, k)
        self.bit = bit

    def push(self, t, flit):
        if self.n == self.k:
            self._mark(t, flit)
            flit ^= 1 << self.bit
        self.q.append(flit)


class DropFlit(_Forward):
    """The ``k``-th flit never arrives."""

    def push(self, t, flit):
        if self.n == self.k:
            self._mark(t, flit)
            return
        self.q.append(flit)


class DuplicateFlit(_Forward):
    """The ``k``-th flit arrives twice in a row."""

    def push(self, t, flit):
        self.q.append(flit)
        if self.n == self.k:
            self._mark(t, flit)
            self.q.append(flit)


class ReorderFlits(_Forward):
    """The ``k``-th flit arrives after the next flit of its VC."""

    def __init__(self, cfg, k):
        super().__init__(cfg, k)
        self.held = None

    def push(self, t, flit):
        vc = unpack_flit(self.cfg, flit)["vc"]
        if self.n == self.k:
            self._mark(t, flit)
            self.held = (vc, flit)
            return
        self.q.append(flit)
        if self.held is not None and self.held[0] == vc:
            self.q.append(self.held[1])
            self.held = None


class Silence:
    """From cycle ``t0`` nothing crosses the wire (use one for each direction)."""

    def __init__(self, t0):
        self.t0 = t0

    def __call__(self, t, *wire):
        if t < self.t0:
            return wire if len(wire) > 1 else wire[0]
        return (0, 0) if len(wire) > 1 else 0


class LoseCredit:
    """The ``k``-th returned credit (of either VC) never arrives."""

    def __init__(self, k):
        self.k, self.n, self.hit = k, 0, None

    def __call__(self, t, credits):
        out = credits
        for v in range(2):
            if credits >> v & 1:
                if self.n == self.k:
                    out &= ~(1 << v)
                    self.hit = {"cycle": t, "vc": v}
                self.n += 1
        return out


class DuplicateCredit:
    """The ``k``-th returned credit arrives twice (again the next cycle, or as soon as that VC's
    bit is free)."""

    def __init__(self, k):
        self.k, self.n, self.hit = k, 0, None
        self.extra = 0

    def __call__(self, t, credits):
        out = credits
        for v in range(2):
            if self.extra >> v & 1 and not credits >> v & 1:
                out |= 1 << v
                self.extra &= ~(1 << v)
        for v in range(2):
            if credits >> v & 1:
                if self.n == self.k:
                    self.extra |= 1 << v
                    self.hit = {"cycle": t, "vc": v}
                self.n += 1
        return out
