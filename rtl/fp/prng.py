# SPDX-License-Identifier: Apache-2.0
"""XORWOW pseudo-random generator for stochastic rounding (``docs/number-formats.md`` §4)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["XorWow", "xorwow_reset_state", "xorwow_step"]

_MASK = 0xFFFFFFFF
_WEYL = 362437
_GOLDEN = 0x9E3779B9
_INIT = (123456789, 362436069, 521288629, 88675123, 5783321, 6615241)


def _fmix32(h):
    h &= _MASK
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def xorwow_reset_state(seed, lane):
    """The §4 initial state ``(x, y, z, w, v, d)`` of ``lane`` for ``seed`` (elaboration time)."""
    s = _fmix32((seed + lane * _GOLDEN) & _MASK)
    return (s ^ _INIT[0],) + _INIT[1:]


def xorwow_step(state):
    """One §4 step on a Python state tuple: ``(new_state, output)``."""
    x, y, z, w, v, d = state
    t = x ^ (x >> 2)
    x, y, z, w = y, z, w, v
    v = (v ^ (v << 4) ^ t ^ (t << 1)) & _MASK
    d = (d + _WEYL) & _MASK
    return (x, y, z, w, v, d), (v + d) & _MASK


class XorWow(wiring.Component):
    """One lane's XORWOW generator, seeded at elaboration from ``(seed, lane)`` as in §4.

    The registers always hold the state *one step ahead*, so the output of the next step is
    ready in a flip-flop: ``value`` is the 32-bit output ``R`` of the step that is taken in a
    cycle where ``next`` is high. After reset ``value`` is the first output of the golden
    ``golden.prng.XorWow(seed, lane).next()``; after ``n`` cycles with ``next`` high it is
    output ``n + 1``. With ``next`` low nothing changes. Synchronous reset restores the seed
    state.

    Parameters
    ----------
    seed : int
        ``CoreConfig.sr_seed`` (1..2**32-1).
    lane : int
        Lane index (>= 0); lanes get decorrelated seeds.

    Members
    -------
    next : In(1)
        Consume ``value`` this cycle and advance one step.
    value : Out(32)
        The random word for the element consuming it this cycle (registered output).
    """

    next: In(1)
    value: Out(32)

    def __init__(self, seed, lane=0):
        for name, v, lo in (("seed", seed, 1), ("lane", lane, 0)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"XorWow {name} must be an integer, not {v!r}")
            if v < lo or (name == "seed" and v > _MASK):
                rng = f"[{lo}, {_MASK}]" if name == "seed" else f">= {lo}"
                raise ValueError(f"XorWow {name} must be in {rng}, not {v!r}")
        self.seed, self.lane = seed, lane
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        ahead, first = xorwow_step(xorwow_reset_state(self.seed, self.lane))
        x, y, z, w, v, d = (Signal(32, init=ahead[k], name=n) for k, n in enumerate("xyzwvd"))
        value = Signal(32, init=first)
        t = x ^ (x >> 2)
        nv = Signal(32)
        nd = Signal(32)
        m.d.comb += [nv.eq(v ^ (v << 4)[:32] ^ t ^ (t << 1)[:32]), nd.eq(d + _WEYL)]
        with m.If(self.next):
            m.d.sync += [x.eq(y), y.eq(z), z.eq(w), w.eq(v), v.eq(nv), d.eq(nd),
                         value.eq(nv + nd)]
        m.d.comb += self.value.eq(value)
        return m
