# SPDX-License-Identifier: Apache-2.0
"""Engine-activity timeline of a golden ISA simulator run (``docs/kernels.md`` §9): one row per
stream (the engines of :data:`rtl.isa.ENGINES` that ran something, then the DMA queues), one bar
per instruction or descriptor over ``[start, done)``, coloured by opcode, and each stream's busy
fraction (the union of its bars over the run's cycles, :meth:`golden.isasim.IsaSim.stats`).

``busy(events)`` and ``rows(events)`` are plain Python; :func:`write_png` imports matplotlib
(a project dependency) only when called, with the non-interactive ``Agg`` backend."""

from __future__ import annotations

import os

from rtl.isa import ENGINES

__all__ = ["rows", "busy", "write_png"]


def _order(name):
    if name in ENGINES:
        return (0, ENGINES.index(name), 0)
    if name.startswith("dma") and ".q" in name:
        e, q = name[3:].split(".q")
        return (1, int(e), int(q))
    return (2, 0, name)


def rows(events):
    """``{stream: [(start, done, op), ...]}`` in display order (engines, then DMA queues),
    every stream that ran at least one event."""
    out = {}
    for e in events:
        out.setdefault(e.stream, []).append((e.start, e.done, e.op))
    return {k: out[k] for k in sorted(out, key=_order)}


def _union(iv):
    tot, cur = 0, None
    for a, b in sorted(iv):
        if cur is None or a > cur[1]:
            tot += 0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return tot + (0 if cur is None else cur[1] - cur[0])


def busy(events, cycles=None):
    """``(cycles, {stream: busy fraction})``: ``cycles`` the last ``done`` (or the given
    span), a stream's fraction the union of its ``[start, done)`` over it."""
    r = rows(events)
    if cycles is None:
        cycles = max((d for lst in r.values() for _s, d, _o in lst), default=0)
    return cycles, {k: (_union((s, d) for s, d, _o in v) / cycles if cycles else 0.0)
                    for k, v in r.items()}


def write_png(events, path, *, title=None, cycles=None):
    """Write the timeline of ``events`` (``IsaSim.timeline``) as a PNG at ``path`` (its folder
    is created). Returns ``(cycles, busy)`` as :func:`busy`."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    cyc, frac = busy(events, cycles)
    r = rows(events)
    ops = sorted({o for v in r.values() for _s, _d, o in v})
    cmap = plt.get_cmap("tab20")
    colour = {o: cmap(i % 20) for i, o in enumerate(ops)}
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(r) + 1.6))
    names = list(r)
    for y, name in enumerate(names):
        for op in ops:
            bars = [(s, max(d - s, 0.5)) for s, d, o in r[name] if o == op]
            if bars:
                ax.broken_barh(bars, (y - 0.38, 0.76), facecolors=colour[op])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels([f"{n} ({100 * frac[n]:.0f}%)" for n in names])
    ax.invert_yaxis()
    ax.set_xlim(0, max(cyc, 1))
    ax.set_xlabel("cycle (golden cycle estimate)")
    ax.set_title(title or f"engine activity, {cyc} cycles")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[o]) for o in ops]
    ax.legend(handles, ops, loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(len(r), 1) - 0.12),
              ncol=min(len(ops), 6), fontsize="small", frameon=False)
    fig.tight_layout()
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return cyc, frac
