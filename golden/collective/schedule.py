# SPDX-License-Identifier: Apache-2.0
"""The ring schedules of the collectives as data (docs/collectives.md §9).

One unidirectional ring: rank ``i`` sends to rank ``(i + 1) mod n`` only. A schedule is a list
of :class:`Transfer` rows, one per chunk crossing one link, sorted by ``(step, src, chunk)``:

* **reduce-scatter** (``n - 1`` steps): at step ``s`` rank ``i`` sends chunk
  ``(i - s - 1) mod n`` (its own contribution at step 0, then the partial sum it received and
  reduced at step ``s - 1``). Chunk ``c``'s sum starts at rank ``(c + 1) mod n``, goes around
  the ring and ends at rank ``c``, which owns the result.
* **all-gather** (``n - 1`` steps): at step ``s`` rank ``i`` sends chunk ``(i - s) mod n``
  (its own at step 0, then the one it received at step ``s - 1``).
* **all-reduce**: reduce-scatter, then all-gather with steps ``n - 1 ... 2n - 3``.
* **all-to-all** and **send/recv (permute)**: each block is routed from its rank to its
  destination through the link layer, forwarded by the ranks between (``d`` hops for a
  destination ``d`` ranks downstream); ``step`` is the hop index.

Every hop of reduce-scatter and all-gather is taken by the receiving core (reduced or written
to its buffer) and re-sent from it, so its virtual channel is the one the link gives a flit
the core injects: VC1 on the dateline link ``n - 1 -> 0``, VC0 elsewhere. Routed blocks keep
the VC of :func:`golden.collective.link.vc_path`.
"""

from __future__ import annotations

from typing import NamedTuple

from golden.collective.link import is_dateline, tx_vc, vc_path

__all__ = ["Transfer", "check_ranks", "chunk_bounds", "reduce_scatter_schedule",
           "all_gather_schedule", "all_reduce_schedule", "all_to_all_schedule",
           "permute_schedule", "check_perm", "sum_order", "owner", "link_loads"]


class Transfer(NamedTuple):
    """One chunk crossing one link.

    Attributes
    ----------
    step : int
        Ring step (reduce-scatter, all-gather, all-reduce) or hop index (routed blocks).
    src, dst : int
        Sending and receiving rank of this link, ``dst = (src + 1) mod n``.
    chunk : int
        Chunk index: ``[0, n)`` for reduce-scatter and all-gather; ``origin * n + final`` for
        all-to-all (the block rank ``origin`` sends to rank ``final``); the origin rank for
        permute.
    vc : int
        Virtual channel of this hop (0 or 1).
    """

    step: int
    src: int
    dst: int
    chunk: int
    vc: int


def check_ranks(n, name="n"):
    """``n`` as an int, ``ValueError``/``TypeError`` unless it is an int >= 1."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name} must be an int >= 1, not {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be >= 1, not {n!r}")
    return n


def chunk_bounds(elems, n):
    """Element ranges ``[(lo, hi), ...]`` of the ``n`` chunks of a message of ``elems``
    elements: chunk ``c`` has ``elems // n + (c < elems % n)`` elements, in order."""
    check_ranks(n)
    if isinstance(elems, bool) or not isinstance(elems, int) or elems < 0:
        raise ValueError(f"elems must be an int >= 0, not {elems!r}")
    q, r = divmod(elems, n)
    out, lo = [], 0
    for c in range(n):
        hi = lo + q + (c < r)
        out.append((lo, hi))
        lo = hi
    return out


def _hop_vc(src, n):
    return tx_vc(0, is_dateline(src, n))


def reduce_scatter_schedule(n):
    """Transfers of a ring reduce-scatter on ``n`` ranks (``n - 1`` steps, ``n`` per step)."""
    check_ranks(n)
    return [Transfer(s, i, (i + 1) % n, (i - s - 1) % n, _hop_vc(i, n))
            for s in range(n - 1) for i in range(n)]


def all_gather_schedule(n, first_step=0):
    """Transfers of a ring all-gather on ``n`` ranks, rank ``i`` starting with chunk ``i``;
    steps numbered from ``first_step``."""
    check_ranks(n)
    return [Transfer(first_step + s, i, (i + 1) % n, (i - s) % n, _hop_vc(i, n))
            for s in range(n - 1) for i in range(n)]


def all_reduce_schedule(n):
    """Reduce-scatter then all-gather: ``2(n - 1)`` steps."""
    return reduce_scatter_schedule(n) + all_gather_schedule(n, first_step=n - 1)


def owner(c, n):
    """Rank that holds chunk ``c``'s finished reduction after reduce-scatter: rank ``c``."""
    check_ranks(n)
    return c % n


def sum_order(c, n):
    """Ranks whose contributions to chunk ``c`` are combined, in order:
    ``(c + 1) mod n, (c + 2) mod n, ..., c``; the result is
    ``op(...op(op(x[c+1], x[c+2]), x[c+3])..., x[c])`` (a left fold)."""
    check_ranks(n)
    return [(c + 1 + k) % n for k in range(n)]


def _routed(n, routes):
    """Hop rows of blocks ``(origin, hops, chunk)`` routed downstream, sorted."""
    rows = []
    for origin, hops, chunk in routes:
        for h, vc in enumerate(vc_path(origin, hops, n)):
            src = (origin + h) % n
            rows.append(Transfer(h, src, (src + 1) % n, chunk, vc))
    rows.sort(key=lambda t: (t.step, t.src, t.chunk))
    return rows


def all_to_all_schedule(n):
    """Transfers of an all-to-all on ``n`` ranks: block ``origin -> final`` (chunk
    ``origin * n + final``) crosses ``(final - origin) mod n`` links; a rank's own block
    stays local."""
    check_ranks(n)
    return _routed(n, [(o, (f - o) % n, o * n + f) for o in range(n) for f in range(n)
                       if f != o])


def check_perm(perm, n):
    """``perm`` as a list of ints, ``ValueError`` unless it is a permutation of ``range(n)``
    (``perm[r]`` is the rank that receives rank ``r``'s message)."""
    check_ranks(n)
    p = list(perm)
    if len(p) != n:
        raise ValueError(f"perm must have one destination per rank ({n}), not {len(p)}")
    for r, d in enumerate(p):
        if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < n:
            raise ValueError(f"perm[{r}] must be in [0, {n - 1}], not {d!r}")
    if sorted(p) != list(range(n)):
        raise ValueError(f"perm must be a permutation of range({n}) (every rank receives "
                         f"exactly one message), not {p!r}")
    return p


def permute_schedule(perm):
    """Transfers of send/recv: rank ``r``'s message (chunk ``r``) goes to ``perm[r]``, routed
    downstream over ``(perm[r] - r) mod n`` links (0: a local copy)."""
    n = check_ranks(len(perm), "len(perm)")
    p = check_perm(perm, n)
    return _routed(n, [(r, (p[r] - r) % n, r) for r in range(n) if p[r] != r])


def link_loads(schedule, n, sizes):
    """Units each link ``i -> i + 1`` carries: ``sizes(chunk)`` summed over its transfers."""
    loads = [0] * n
    for t in schedule:
        loads[t.src] += sizes(t.chunk)
    return loads
