# SPDX-License-Identifier: Apache-2.0
"""The stochastic-rounding PRNG: XORWOW with fmix32 lane seeding (``docs/number-formats.md`` §4).

:class:`XorWow` is one lane's generator. ``next_n`` is fast for long streams: the xorshift part
of XORWOW is linear over GF(2), so ``next_n`` jumps ahead with a 160x160 bit matrix to split the
stream into ~sqrt(n) chunks that numpy steps in parallel (the Weyl counter ``d`` has a closed
form). :class:`XorWowLanes` steps many lanes at once (one element per lane per step), like the
RTL's per-lane generators.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "WEYL", "XORWOW_INIT", "fmix32", "xorwow_lane_state", "xorwow_lane_states", "XorWow",
    "XorWowLanes", "convert_sr_stream",
]

_MASK = 0xFFFFFFFF
#: Weyl increment of the counter ``d``.
WEYL = 362437
#: Fixed initial words ``y, z, w, v, d`` (``x`` is ``fmix32(...) ^ 123456789``).
XORWOW_INIT = (123456789, 362436069, 521288629, 88675123, 5783321, 6615241)
_GOLDEN = 0x9E3779B9


def _check_u32(name, value, lo=0):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not lo <= int(value) <= _MASK:
        raise ValueError(f"{name} must be in [{lo}, {_MASK}], not {value!r}")
    return int(value)


def fmix32(h):
    """MurmurHash3's 32-bit finalizer (Python int or uint32 array)."""
    if isinstance(h, (int, np.integer)):
        h = int(h) & _MASK
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & _MASK
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & _MASK
        h ^= h >> 16
        return h
    h = np.asarray(h).astype(np.uint64) & np.uint64(_MASK)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(_MASK)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(_MASK)
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


def xorwow_lane_state(seed, lane=0):
    """Initial state ``(x, y, z, w, v, d)`` (Python ints) of lane ``lane`` for ``seed`` (§4):
    ``x = fmix32((seed + lane * 0x9E3779B9) mod 2**32) ^ 123456789``, the rest fixed."""
    seed = _check_u32("seed", seed)
    if isinstance(lane, bool) or not isinstance(lane, (int, np.integer)) or lane < 0:
        raise ValueError(f"lane must be a non-negative integer, not {lane!r}")
    s = fmix32((seed + int(lane) * _GOLDEN) & _MASK)
    return (s ^ XORWOW_INIT[0],) + XORWOW_INIT[1:]


def xorwow_lane_states(seed, lanes):
    """Initial states of many lanes at once: ``np.uint32`` array of shape ``(len(lanes), 6)``
    (columns ``x, y, z, w, v, d``). ``lanes`` is an int (meaning ``range(lanes)``) or a
    sequence of lane indices."""
    seed = _check_u32("seed", seed)
    if isinstance(lanes, (int, np.integer)) and not isinstance(lanes, bool):
        if lanes < 1:
            raise ValueError(f"lanes must be >= 1, not {lanes!r}")
        lanes = np.arange(int(lanes), dtype=np.uint64)
    lanes = np.asarray(lanes)
    if lanes.dtype.kind not in "ui" or (lanes.size and lanes.min() < 0):
        raise ValueError(f"lanes must be non-negative integers, not {lanes!r}")
    k = lanes.astype(np.uint64).reshape(-1)
    s = fmix32((np.uint64(seed) + k * np.uint64(_GOLDEN)) & np.uint64(_MASK))
    out = np.empty((k.size, 6), dtype=np.uint32)
    out[:, 0] = s ^ np.uint32(XORWOW_INIT[0])
    out[:, 1:] = np.array(XORWOW_INIT[1:], dtype=np.uint32)
    return out


# --- the linear (xorshift) part as a GF(2) matrix, for jump-ahead -------------------------------

def _step_words(x, y, z, w, v):
    """One xorshift step on uint32 arrays (no Weyl counter)."""
    t = x ^ (x >> np.uint32(2))
    nv = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
    return y, z, w, v, nv


def _to_bits(words):
    """(..., 5) uint32 -> (..., 160) float64 bit vectors (bit j of word k at k*32 + j)."""
    w = np.asarray(words, dtype=np.uint32)
    b = (w[..., :, None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
    return b.reshape(w.shape[:-1] + (160,)).astype(np.float64)


def _from_bits(bits):
    b = (np.asarray(bits).astype(np.uint64) & np.uint64(1)).reshape(bits.shape[:-1] + (5, 32))
    return (b << np.arange(32, dtype=np.uint64)).sum(axis=-1).astype(np.uint32)


@functools.lru_cache(maxsize=1)
def _step_matrix():
    eye = np.eye(160, dtype=np.float64)
    words = _from_bits(eye)                               # (160, 5): unit states
    nxt = np.stack(_step_words(*(words[:, k] for k in range(5))), axis=-1)
    return _to_bits(nxt).T.copy()                         # column i = step(e_i)


@functools.lru_cache(maxsize=32)
def _jump_matrix(n):
    """The 160x160 GF(2) matrix of ``n`` xorshift steps."""
    result = np.eye(160)
    base = _step_matrix()
    while n:
        if n & 1:
            result = (base @ result) % 2
        base = (base @ base) % 2
        n >>= 1
    return result


class XorWow:
    """One lane's XORWOW generator (§4), initialised from ``(seed, lane)``.

    Parameters
    ----------
    seed : int
        ``CoreConfig.sr_seed`` (0..2**32-1).
    lane : int
        Lane index (>= 0).

    Members
    -------
    state : tuple of int
        Current ``(x, y, z, w, v, d)``.
    """

    _SCALAR_MAX = 4096

    def __init__(self, seed, lane=0):
        self.seed, self.lane = seed, lane
        self.state = xorwow_lane_state(seed, lane)

    def reset(self):
        """Restore the initial state (what the RTL reset does)."""
        self.state = xorwow_lane_state(self.seed, self.lane)

    def next(self):
        """The next 32-bit output ``R`` (Python int)."""
        x, y, z, w, v, d = self.state
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = (v ^ (v << 4) ^ t ^ (t << 1)) & _MASK
        d = (d + WEYL) & _MASK
        self.state = (x, y, z, w, v, d)
        return (v + d) & _MASK

    def jump(self, n):
        """Advance by ``n`` outputs without producing them."""
        n = int(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n!r}")
        bits = _to_bits(np.array(self.state[:5], dtype=np.uint32))
        words = _from_bits((_jump_matrix(n) @ bits) % 2)
        self.state = tuple(int(w) for w in words) + ((self.state[5] + n * WEYL) & _MASK,)

    def next_n(self, n):
        """The next ``n`` outputs as a ``np.uint32`` array (in order)."""
        n = int(n)
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n!r}")
        if n <= self._SCALAR_MAX:
            return np.array([self.next() for _ in range(n)], dtype=np.uint32)
        d0 = self.state[5]
        streams = max(1, int(np.sqrt(n)))
        length = n // streams
        jm = _jump_matrix(length)
        starts = np.empty((streams, 160))
        starts[0] = _to_bits(np.array(self.state[:5], dtype=np.uint32))
        for j in range(1, streams):
            starts[j] = (jm @ starts[j - 1]) % 2
        words = _from_bits(starts)                        # (streams, 5)
        x, y, z, w, v = (words[:, k].copy() for k in range(5))
        vs = np.empty((length, streams), dtype=np.uint32)
        for i in range(length):
            x, y, z, w, v = _step_words(x, y, z, w, v)
            vs[i] = v
        out = np.empty(n, dtype=np.uint32)
        out[:streams * length] = vs.T.reshape(-1)
        done = streams * length
        self.state = (int(x[-1]), int(y[-1]), int(z[-1]), int(w[-1]), int(v[-1]),
                      (d0 + done * WEYL) & _MASK)
        # the Weyl part of the first `done` outputs, then the remainder one by one
        k = np.arange(1, done + 1, dtype=np.uint64)
        dd = (np.uint64(d0) + k * np.uint64(WEYL)) & np.uint64(_MASK)
        out[:done] = ((out[:done].astype(np.uint64) + dd) & np.uint64(_MASK)).astype(np.uint32)
        for i in range(done, n):
            out[i] = self.next()
        return out


class XorWowLanes:
    """``lanes`` XORWOW generators stepped together (lane ``k`` seeded as in §4).

    ``next()`` returns one output per lane (``np.uint32``, shape ``(lanes,)``); ``next_n(n)``
    returns shape ``(n, lanes)``.
    """

    def __init__(self, seed, lanes):
        self.seed = seed
        self._init = xorwow_lane_states(seed, lanes)
        self.lanes = self._init.shape[0]
        self.reset()

    def reset(self):
        """Restore every lane's initial state."""
        self._x, self._y, self._z, self._w, self._v, self._d = (
            self._init[:, k].copy() for k in range(6))

    @property
    def state(self):
        """Current states, ``np.uint32`` array ``(lanes, 6)``."""
        return np.stack([self._x, self._y, self._z, self._w, self._v, self._d], axis=-1)

    def next(self):
        self._x, self._y, self._z, self._w, self._v = _step_words(
            self._x, self._y, self._z, self._w, self._v)
        self._d = self._d + np.uint32(WEYL)               # wraps mod 2**32
        return self._v + self._d

    def next_n(self, n):
        out = np.empty((int(n), self.lanes), dtype=np.uint32)
        for i in range(int(n)):
            out[i] = self.next()
        return out


def convert_sr_stream(x, fmt, seed, lane=0):
    """Stochastic-round ``x`` (``np.float32`` array) to ``fmt`` drawing one PRNG output per
    element in C order (§3), from a fresh lane generator ``XorWow(seed, lane)``, or from the
    given :class:`XorWow` instance ``seed`` (which then advances by ``x.size``)."""
    from golden.formats import convert_sr
    rng = seed if isinstance(seed, XorWow) else XorWow(seed, lane)
    x = np.asarray(x)
    rand = rng.next_n(x.size).reshape(x.shape)
    return convert_sr(x, fmt, rand)
