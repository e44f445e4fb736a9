# SPDX-License-Identifier: Apache-2.0
"""The campaign command line: ``python -m tb.campaign KIND [--n N] [--seed S] [--backend local|ray] [--workers W]
[--task I | --tasks A:B] [--param k=v ...] [--timeout SECONDS] [--out DIR]``

``--task I`` re-runs task ``I`` alone, always (by default in
``build/campaign/<kind>-<seed>[-<hash>]/rerun-<I>/``); otherwise a run resumes its
directory. ``python -m synth.mutate campaign [...]`` is the same command for the ``mutate``
kind (:func:`main` with ``kind=``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tb.campaign.core import default_dir
from tb.campaign.kinds import KINDS
from tb.campaign.run import run_campaign

__all__ = ["main"]


def _param(text):
    k, sep, v = text.partition("=")
    if not sep or not k:
        raise argparse.ArgumentTypeError(f"--param must be key=value, not {text!r}")
    try:
        return k, json.loads(v)
    except ValueError:
        return k, v


def _range(text):
    a, sep, b = text.partition(":")
    if not sep or not a.isdigit() or not b.isdigit() or int(b) <= int(a):
        raise argparse.ArgumentTypeError(f"--tasks must be A:B with A < B, not {text!r}")
    return range(int(a), int(b))


def main(argv=None, kind=None):
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status (1 if a
    task failed). With ``kind`` (a :class:`~tb.campaign.core.Kind`) the command runs that kind
    and takes no ``KIND`` argument (``python -m synth.mutate campaign``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog=kind.cli if kind else "python -m tb.campaign",
                                 description=__doc__.split("\n")[0])
    if kind is None:
        ap.add_argument("kind", choices=sorted(KINDS))
    kinds = {kind.name: kind} if kind else KINDS
    ap.add_argument("--n", type=int, default=None, help="tasks (mutate: mutants per block); "
                    "default: " + ", ".join(f"{k} {v.default_n}" for k, v in kinds.items()))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", choices=("local", "ray", "serial"), default="local")
    ap.add_argument("--workers", type=int, default=None, help="local processes / Ray CPUs "
                    "(default: every core; local with 1 runs in this process)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--task", type=int, default=None, help="run this one task alone")
    g.add_argument("--tasks", type=_range, default=None, help="run tasks A..B-1 only")
    ap.add_argument("--param", type=_param, action="append", default=[],
                    help="kind parameter key=value (JSON or text), repeatable")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per task")
    ap.add_argument("--out", default=None, help="results directory "
                    "(default build/campaign/<kind>-<seed>)")
    ap.add_argument("--quiet", action="store_true", help="no progress line")
    a = ap.parse_args(argv)
    k = kind or KINDS[a.kind]
    params = dict(a.param)
    tasks = range(a.task, a.task + 1) if a.task is not None else a.tasks
    out = a.out
    if a.task is not None:
        # a re-run runs: its own directory, emptied, beside the campaign's results
        n = a.n if a.n is not None else k.default_n
        out = Path(out) if out else default_dir(k, a.seed, n, params) / f"rerun-{a.task}"
        for f in ("tasks.jsonl", "meta.json", "summary.json"):
            (out / f).unlink(missing_ok=True)
    cmd = " ".join([kind.cli if kind else "python -m tb.campaign", *argv])
    summary, _ = run_campaign(k, n=a.n, seed=a.seed, params=params, backend=a.backend,
                              workers=a.workers, tasks=tasks, out=out, timeout=a.timeout,
                              progress=not a.quiet, finish=a.task is None, cmd=cmd)
    print(f"campaign {k.name}: {summary['done']}/{summary['tasks']} tasks, "
          f"{summary['instructions']} instructions, {summary['mismatches']} mismatches, "
          f"{len(summary['failing'])} failing, wall {summary['wall_seconds']} s, "
          f"CPU {summary['cpu_seconds']} s")
    return 1 if summary["failing"] else 0
