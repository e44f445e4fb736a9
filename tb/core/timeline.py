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

__all__ = ["rows", "busy", "write_png", "main"]


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
