# SPDX-License-Identifier: Apache-2.0
"""Engine-activity timeline of a golden ISA simulator run (``docs/kernels.md`` §9): one row per
stream (the engines of :data:`rtl.isa.ENGINES` that ran something, then the DMA queues), one bar
per instruction or descriptor over ``[start, done)``, coloured by opcode, and each stream's busy
fraction (the union of its bars over the run's cycles, :meth:`golden.isasim.IsaSim.stats`).

``busy(events)`` and ``rows(events)`` are plain Python; :func:`write_png` imports matplotlib
(a project dependency) only when called, with the non-interactive ``Agg`` backend.

``python -m tb.core.timeline --preset small [--only mlp ...] [--seed N]`` runs the
:mod:`golden.kernels` cases on the golden ISA simulator (:func:`golden.kernels.run_golden`),
prints each one's cycles, check and busy fractions, and writes its timeline under
``build/sim/golden/`` (exit status 1 on a wrong bit or a bound exceeded)."""

from __future__ import annotations

import os

from rtl.isa import ENGINES

__all__ = ["rows", "busy", "write_png", "main", "rtl_timeline", "golden_timeline", "fractions",
           "write_kernel_timeline"]


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


def main(argv=None):
    """The command line (see the module docstring); returns the exit status."""
    import argparse
    from golden.kernels import KERNELS, random_inputs, run_golden
    from rtl.config import get_preset
    ap = argparse.ArgumentParser(prog="python -m tb.core.timeline",
                                 description="Run the make-sim kernels on the golden ISA "
                                             "simulator: cycles, busy fractions, bit check, "
                                             "timeline PNGs.")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--only", nargs="*", default=sorted(KERNELS), choices=sorted(KERNELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png-dir", default="build/sim/golden")
    a = ap.parse_args(argv)
    cfg = get_preset(a.preset)
    bad = 0
    for name in a.only:
        case = KERNELS[name](cfg, *random_inputs(cfg, name, a.seed))
        r = run_golden(case)
        write_png(r["sim"].timeline, f"{a.png_dir}/{name}_{cfg.name}.png",
                  title=f"{name} ({cfg.name}), golden estimate")
        fracs = " ".join(f"{k} {v:.2f}" for k, v in r["busy"].items())
        print(f"{name:15s} {r['cycles']:8d} cycles  {r['error'] or r['check']}  busy: {fracs}")
        bad += bool(r["error"]) or any(b or q > 1 for b, q in r["check"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())


# ---- the timeline of one kernel on the RTL core (tb/core/run_kernel.py) ---------------------

def _spans(bits):
    """``[(a, b), ...]``: the runs of a list of ``(cycle, 0/1)`` changes where the bit is 1."""
    out, on = [], None
    for c, v in bits:
        if v and on is None:
            on = c
        elif not v and on is not None:
            if c > on:
                out.append((on, c))
            on = None
    return out, on


def rtl_timeline(trace, cycles, layout, engines, dma_engines, dma_queues):
    """Per-instruction bars of a run traced on the core's ``activity`` port.

    Parameters
    ----------
    trace : list of (cycle, int)
        The port's value at each change, cycles from the doorbell.
    cycles : int
        The run's length (the end of the last bar).
    layout : dict
        :func:`rtl.core.neuroncore.activity_layout`.
    engines : sequence of str
        The engines traced (``ENGINES_BUILT``).

    Returns
    -------
    dict
        ``{"engines": {engine: {"exec": [(issue, retire, index)], "wait": [(a, b, index)]}},
        "dma": {"dma<e>.q<q>": [(start, done, n)]}, "dma_busy": {"dma<e>": [(a, b)]}}``: an
        instruction executes from its issue to its retire (the ``issued`` / ``retired``
        toggles, in order), waits while the ``waiting`` bit is high before its issue; a
        descriptor moves data from its DMA engine's ``dma_busy`` rise (or its engine's previous
        completion) to its queue's ``dma_done`` toggle.
    """
    from rtl.isa import ENGINES as ALL

    def bit(field, i):
        return layout[field][0] + i

    def changes(b):
        out, prev = [], 0
        for c, v in trace:
            x = v >> b & 1
            if x != prev:
                out.append((c, x))
                prev = x
        return out

    def toggles(b):
        return [c for c, _ in changes(b)]

    res = {"engines": {}, "dma": {}, "dma_busy": {}}
    for e in engines:
        x = ALL.index(e)
        iss, ret = toggles(bit("issued", x)), toggles(bit("retired", x))
        waits, open_ = _spans(changes(bit("waiting", x)))
        if open_ is not None:
            waits.append((open_, cycles))
        ex = [(a, ret[k] if k < len(ret) else cycles, k) for k, a in enumerate(iss)]
        # a wait belongs to the instruction issued next: the number of issues before its end
        wt, k = [], 0
        for a, b in waits:
            while k < len(iss) and iss[k] < b:
                k += 1
            wt.append((a, b, k))
        res["engines"][e] = {"exec": ex, "wait": wt}
    for d in range(dma_engines):
        busy, open_ = _spans(changes(bit("dma_busy", d)))
        if open_ is not None:
            busy.append((open_, cycles))
        res["dma_busy"][f"dma{d}"] = busy
        done = sorted((c, q) for q in range(dma_queues)
                      for c in toggles(bit("dma_done", d * dma_queues + q)))
        prev, n = 0, {}
        for c, q in done:
            rise = max((a for a, _b in busy if a <= c), default=prev)
            n[q] = n.get(q, 0) + 1
            res["dma"].setdefault(f"dma{d}.q{q}", []).append((max(rise, prev), c, n[q] - 1))
            prev = c
    return res


def golden_timeline(events):
    """The same shape as :func:`rtl_timeline` from a golden run (``IsaSim.timeline``): an
    instruction executes over ``[issue, retire)``; one with a semaphore wait waits from its
    predecessor's issue to its own when that gap is longer than a cycle (the golden model
    books no wait start of its own); descriptors over ``[start, done)``."""
    res = {"engines": {}, "dma": {}, "dma_busy": {}}
    prev = {}
    for ev in events:
        if ev.stream.startswith("dma"):
            res["dma"].setdefault(ev.stream, []).append((ev.start, ev.done, ev.index))
            continue
        r = res["engines"].setdefault(ev.stream, {"exec": [], "wait": []})
        r["exec"].append((ev.issue, max(ev.retire, ev.issue + 1), ev.index))
        p = prev.get(ev.stream, 0)
        if ev.waits is not None and ev.issue > p + 1:
            r["wait"].append((p + 1, ev.issue, ev.index))
        prev[ev.stream] = ev.issue
    return res


def fractions(tl, cycles):
    """``{engine: {"executing": f, "waiting": f}}`` of a :func:`rtl_timeline` (or
    :func:`golden_timeline`) over ``cycles``: executing, the union of its instructions'
    ``[issue, retire)``; waiting, the cycles its next instruction waits on a semaphore while
    none of it executes; plus ``{"dma<e>.q<q>": {"executing": f}}`` for the DMA queues."""
    out = {}
    cyc = max(cycles, 1)
    for e, r in tl["engines"].items():
        ex = [(a, b) for a, b, _ in r["exec"]]
        both = _union(ex + [(a, b) for a, b, _ in r["wait"]])
        out[e] = {"executing": _union(ex) / cyc, "waiting": (both - _union(ex)) / cyc}
    for q, bars in tl["dma"].items():
        out[q] = {"executing": _union((a, b) for a, b, _ in bars) / cyc}
    return out


#: Colours of the kernel timeline (PNG and SVG): executing bars by engine, waits grey.
WAIT_COLOUR = "#c8c8c8"
EXEC_COLOURS = {"pe": "#1f77b4", "dve": "#2ca02c", "act": "#d62728", "pool": "#9467bd",
                "sp": "#8c564b", "cc": "#e377c2", "dma": "#ff7f0e"}


def _bars(tl, describe):
    """``[(row, a, b, colour, title)]`` of a timeline: per engine its waits and executions,
    then per DMA queue its transfers; ``describe(stream, index)`` names an instruction."""
    rows, out = [], []
    for e in sorted(tl["engines"], key=_order):
        r = tl["engines"][e]
        if not r["exec"] and not r["wait"]:
            continue
        rows.append(e)
        for a, b, k in r["wait"]:
            out.append((e, a, b, WAIT_COLOUR, f"{e} [{k}] {describe(e, k)}: waits on a "
                                              f"semaphore, cycles {a}-{b}"))
        for a, b, k in r["exec"]:
            out.append((e, a, b, EXEC_COLOURS.get(e, "#555555"),
                        f"{e} [{k}] {describe(e, k)}: executes, cycles {a}-{b}"))
    for q in sorted(tl["dma"], key=_order):
        rows.append(q)
        for a, b, k in tl["dma"][q]:
            out.append((q, a, b, EXEC_COLOURS["dma"],
                        f"{q} descriptor {k} {describe(q, k)}: transfer, cycles {a}-{b}"))
    return rows, out


def write_kernel_timeline(base, panels, *, title):
    """Write ``<base>.png``, ``<base>.svg`` and ``<base>.html`` (the SVG inline): one panel per
    ``(name, timeline, cycles, describe)`` of ``panels`` (the RTL run, the golden estimate),
    one row per engine and DMA queue, grey bars while an instruction waits on a semaphore,
    coloured bars while it executes; every SVG bar has a title (engine, index, opcode and
    operation, cycles) shown on hover. Returns the three paths."""
    import html
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    base = str(base)
    os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
    drawn = [(name, *_bars(tl, describe), cycles) for name, tl, cycles, describe in panels]
    span = max((c for *_x, c in drawn), default=1) or 1
    heights = [max(len(rows), 1) for _n, rows, _b, _c in drawn]
    fig, axes = plt.subplots(len(drawn), 1, figsize=(12, 1.2 + 0.4 * sum(heights) + 0.6 * len(drawn)),
                             sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, (name, rows, bars, cycles) in zip(axes[:, 0], drawn):
        y = {r: i for i, r in enumerate(rows)}
        for r, a, b, col, _t in bars:
            ax.broken_barh([(a, max(b - a, 0.5))], (y[r] - 0.38, 0.76), facecolors=col,
                           linewidth=0)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
        ax.set_title(f"{name}: {cycles} cycles", fontsize=9, loc="left")
    axes[-1, 0].set_xlim(0, span)
    axes[-1, 0].set_xlabel("cycle from the doorbell")
    fig.suptitle(f"{title}  (grey: waits on a semaphore; coloured: executes / DMA transfer)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(base + ".png", dpi=100)
    plt.close(fig)
    # SVG by hand: one <rect> with a <title> per bar
    W, left, rowh = 1100, 90, 18
    scale = (W - left - 10) / span
    parts, top = [], 24
    for name, rows, bars, cycles in drawn:
        parts.append(f'<text x="4" y="{top + 12}" font-size="12" font-weight="bold">'
                     f'{html.escape(name)}: {cycles} cycles</text>')
        top += 18
        y = {r: top + i * rowh for i, r in enumerate(rows)}
        for r in rows:
            parts.append(f'<text x="4" y="{y[r] + 13}" font-size="11">{html.escape(r)}</text>')
        for r, a, b, col, t in bars:
            parts.append(f'<rect x="{left + a * scale:.2f}" y="{y[r] + 2}" '
                         f'width="{max((b - a) * scale, 0.6):.2f}" height="{rowh - 4}" '
                         f'fill="{col}"><title>{html.escape(t)}</title></rect>')
        top += rowh * len(rows) + 10
    ticks = "".join(f'<text x="{left + c * scale:.1f}" y="{top + 12}" font-size="10">{c}</text>'
                    for c in range(0, span + 1, max(1, -(-span // 10))))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{top + 20}" '
           f'font-family="sans-serif"><text x="4" y="14" font-size="12">'
           f'{html.escape(title)} (grey: waits on a semaphore; coloured: executes / DMA '
           f'transfer; hover a bar for its instruction)</text>{"".join(parts)}{ticks}</svg>')
    with open(base + ".svg", "w") as f:
        f.write(svg)
    with open(base + ".html", "w") as f:
        f.write(f"<!doctype html><html><head><meta charset='utf-8'><title>"
                f"{html.escape(title)}</title></head><body>{svg}</body></html>\n")
    return base + ".png", base + ".svg", base + ".html"
