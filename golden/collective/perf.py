# SPDX-License-Identifier: Apache-2.0
"""Cycle estimates of the ring collectives from the link model, and NCCL's bandwidths
(docs/collectives.md §11).

An analytic estimate, not a simulation: one flit of ``link_bits`` payload per cycle per link,
at most :func:`golden.collective.link.link_rate` flits per cycle on one VC (credits), a hop of
:func:`golden.collective.link.hop_latency` cycles, and ``core_cycles`` more in each core that
takes a chunk in and sends the next (the reduce path's latency; 0 = a forwarding core).

Bandwidths follow nccl-tests (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
``algbw = S / t`` with ``S`` the per-rank buffer in the user's dtype (all-reduce: the buffer;
reduce-scatter: its input, ``n`` chunks; all-gather: its output, ``n`` chunks; all-to-all: the
``n`` blocks; permute: the message) and ``busbw = algbw * factor``, ``factor`` =
``2(n - 1)/n`` (all-reduce), ``(n - 1)/n`` (reduce-scatter, all-gather, all-to-all), 1
(send/recv). Bandwidths here are in bytes per cycle; the link peak is ``link_bits / 8`` bytes
per cycle (one TX link per core on a unidirectional ring).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from golden.collective.algos import MOVE_DTYPES, REDUCE_DTYPES, check_dtype
from golden.collective.link import credit_round_trip, hop_latency
from golden.collective.schedule import (all_to_all_schedule, check_perm, check_ranks,
                                        chunk_bounds, link_loads, permute_schedule)
from rtl.config import FORMATS, FP32, CoreConfig

__all__ = ["OPS", "bus_factor", "Estimate", "estimate", "ring_cycles", "all_to_all_loads",
           "SIZES", "RANKS", "ROWS", "message_estimate", "busbw_table"]

#: Collectives :func:`estimate` knows.
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "permute")


def bus_factor(op, n):
    """NCCL's busbw / algbw factor of ``op`` on ``n`` ranks."""
    check_ranks(n)
    f = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n,
         "all_gather": (n - 1) / n, "all_to_all": (n - 1) / n, "permute": 1.0}
    if op not in f:
        raise ValueError(f"op must be one of {list(OPS)}, not {op!r}")
    return f[op]


class Estimate(NamedTuple):
    """Cycles and bandwidths (bytes per cycle) of one collective.

    ``size`` is NCCL's ``S`` in bytes; ``fraction`` is ``busbw / peak``. With one rank (or
    nothing to move) ``cycles`` is 0 and the bandwidths are reported as 0.
    """

    cycles: int
    size: int
    algbw: float
    busbw: float
    peak: float
    fraction: float


def _flits(nbytes, cfg):
    return math.ceil(nbytes * 8 / cfg.link_bits)


def _stream(flits, cfg):
    """Cycles one VC takes to send ``flits`` at :func:`~golden.collective.link.link_rate`
    (``link_credits`` flits per credit round trip when that is below one a cycle), exact."""
    rt = credit_round_trip(cfg)
    return flits if cfg.link_credits >= rt else -(-flits * rt // cfg.link_credits)


def ring_cycles(step_flits, cfg, core_cycles=0):
    """Cycles of a pipelined ring of steps carrying ``step_flits[s]`` flits per link.

    Each link streams a step in ``D_s = ceil(F_s / rate)`` cycles; a core starts step ``s + 1``
    once the first flit of step ``s`` has arrived (``L = hop_latency + core_cycles``) and its
    link has finished step ``s``: ``start_{s+1} = start_s + max(D_s, L)``; the last flit
    arrives at ``start_last + D_last + L``.
    """
    if not step_flits:
        return 0
    lat = hop_latency(cfg) + core_cycles
    d = [_stream(f, cfg) for f in step_flits]
    start = 0
    for s in range(len(d) - 1):
        start += max(d[s], lat)
    return start + d[-1] + lat


def all_to_all_loads(n, block_flits, directions=1):
    """``(flits of the busiest directed link, longest route in hops)`` of an all-to-all of
    ``block_flits`` a block. ``directions=1``: every block downstream (``+1`` links),
    ``(f - o) mod n`` hops. ``directions=2``: each block the shorter way round (``d`` hops
    downstream if ``d < n - d``, ``n - d`` upstream if ``d > n - d``); a block half way round
    (``d = n/2``) is split, ``ceil`` of its flits downstream and ``floor`` upstream."""
    check_ranks(n)
    if directions not in (1, 2):
        raise ValueError(f"directions must be 1 or 2, not {directions!r}")
    if directions == 1:
        load = max(link_loads(all_to_all_schedule(n), n, lambda c: block_flits), default=0)
        return load, (n - 1 if n > 1 else 0)
    down, up = [0] * n, [0] * n
    hops = 0
    for o in range(n):
        for f in range(n):
            d = (f - o) % n
            if d == 0:
                continue
            parts = []
            if d < n - d:
                parts = [(down, 1, d, block_flits)]
            elif d > n - d:
                parts = [(up, -1, n - d, block_flits)]
            else:
                parts = [(down, 1, d, -(-block_flits // 2)), (up, -1, d, block_flits // 2)]
            for loads, step, h, fl in parts:
                if not fl:
                    continue
                hops = max(hops, h)
                for k in range(h):
                    loads[(o + step * k) % n] += fl
    return max(down + up), hops


def estimate(op, n, elems, dtype, cfg: CoreConfig, *, out_dtype=None, perm=None,
             core_cycles=0, directions=1):
    """:class:`Estimate` of ``op`` (one of :data:`OPS`) on ``n`` ranks for a per-rank buffer of
    ``elems`` elements of ``dtype`` (NCCL's ``S`` is ``elems`` times the element size; for
    permute ``perm`` defaults to the ring neighbour, ``r -> r + 1``).

    Reduce-scatter steps carry FP32 partial sums (4 bytes an element); all-gather steps carry
    ``out_dtype`` (all-reduce) or ``dtype``; routed blocks ``dtype``.

    ``directions=2`` (all-to-all only): blocks take the shorter way round a bidirectional ring
    (:func:`all_to_all_loads`) and the peak is two TX links, ``2 link_bits / 8`` bytes a cycle.
    """
    if directions not in (1, 2):
        raise ValueError(f"directions must be 1 or 2, not {directions!r}")
    if directions == 2 and op != "all_to_all":
        raise ValueError(f"directions=2 is modelled for all_to_all only, not {op!r} (the "
                         f"ring steps run on the +1 links, docs/collectives.md §9)")
    check_ranks(n)
    if isinstance(elems, bool) or not isinstance(elems, int) or elems < 0:
        raise ValueError(f"elems must be an int >= 0, not {elems!r}")
    if isinstance(core_cycles, bool) or not isinstance(core_cycles, int) or core_cycles < 0:
        raise ValueError(f"core_cycles must be an int >= 0, not {core_cycles!r}")
    reduce = op in ("all_reduce", "reduce_scatter")
    factor = bus_factor(op, n)
    fmt = FORMATS[check_dtype(dtype, REDUCE_DTYPES if reduce else MOVE_DTYPES)]
    ofmt = FORMATS[check_dtype(dtype if out_dtype is None else out_dtype, REDUCE_DTYPES,
                               "out_dtype")] if reduce else fmt
    esize = fmt.width // 8
    chunk = max((hi - lo for lo, hi in chunk_bounds(elems, n)), default=0)
    if op == "all_gather":
        chunk, size = elems, elems * n * esize         # elems: each rank's block
    else:
        size = elems * esize
    rs = [_flits(chunk * FP32.width // 8, cfg)] * (n - 1)
    ag = [_flits(chunk * ofmt.width // 8, cfg)] * (n - 1)
    if op == "all_reduce":
        cycles = ring_cycles(rs + ag, cfg, core_cycles)
    elif op == "reduce_scatter":
        cycles = ring_cycles(rs, cfg, core_cycles)
    elif op == "all_gather":
        cycles = ring_cycles(ag, cfg, core_cycles)
    else:
        if op == "all_to_all":
            if elems % n:
                raise ValueError(f"elems must be a multiple of n = {n} for all_to_all, "
                                 f"not {elems}")
            load, hops = all_to_all_loads(n, _flits(elems // n * esize, cfg), directions)
        else:
            p = check_perm([(r + 1) % n for r in range(n)] if perm is None else perm, n)
            sched = permute_schedule(p)
            bflits = _flits(elems * esize, cfg)
            load = max(link_loads(sched, n, lambda c: bflits), default=0)
            hops = max((t.step + 1 for t in sched), default=0)
        cycles = _stream(load, cfg) + hops * hop_latency(cfg) if load else 0
    peak = directions * cfg.link_bits / 8
    if cycles == 0:
        return Estimate(0, size, 0.0, 0.0, peak, 0.0)
    algbw = size / cycles
    busbw = algbw * factor
    return Estimate(cycles, size, algbw, busbw, peak, busbw / peak)


#: Per-core message sizes of the table (NCCL's S), 4 KiB .. 1 MiB in x4 steps.
SIZES = (4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20)
RANKS = (2, 4, 8)
#: Table rows: (row name, perf op, dtype, directions).
ROWS = (("all_reduce", "all_reduce", "fp32", 1), ("all_gather", "all_gather", "fp32", 1),
        ("reduce_scatter", "reduce_scatter", "fp32", 1),
        ("all_to_all", "all_to_all", "fp32", 1),
        ("all_to_all_bidir", "all_to_all", "fp32", 2),
        ("all_reduce_bf16", "all_reduce", "bf16", 1))


def message_estimate(op, n, size, dtype, cfg, directions=1):
    """:func:`estimate` of a message of ``size`` bytes per core (NCCL's S: all-gather's S is the
    gathered output)."""
    es = 4 if dtype == "fp32" else 2
    elems = size // es
    if op == "all_gather":
        elems //= n                     # S is the gathered output: n blocks of elems
    return estimate(op, n, elems, dtype, cfg, directions=directions)


def busbw_table(cfg):
    """``{row: {n: {size: fraction}}}`` (keys as strings for JSON) from the golden model."""
    return {row: {str(n): {str(s): round(message_estimate(op, n, s, dt, cfg, d).fraction, 4)
                           for s in SIZES} for n in RANKS}
            for row, op, dt, d in ROWS}
