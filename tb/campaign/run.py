# SPDX-License-Identifier: Apache-2.0
"""Run a campaign: the tasks not yet in the results directory, on a backend, then the summary."""

from __future__ import annotations

import time

from tb.campaign.backends import make_backend
from tb.campaign.core import CampaignDir, Progress, repro_command, strip_timing
from tb.campaign.kinds import get_kind

__all__ = ["run_campaign", "summarize"]


def summarize(kind, seed, n, params, results, wall, cmd=None):
    """``summary.json`` of a campaign of ``kind`` (a :class:`~tb.campaign.core.Kind` or a name
    of :data:`tb.campaign.kinds.KINDS`): ``tasks`` (in the campaign), ``done``, ``instructions``,
    ``mismatches`` (a count), ``failing`` (per failing task: its seeds, status and the command
    that re-runs it alone), the kind's fields (``kill_fraction`` per block for ``mutate``), and
    ``wall_seconds`` (of this run) / ``cpu_seconds`` (of every task)."""
    k = get_kind(kind)
    total = k.count({**params, "n": n})
    failing = [{"task": r["task"], "status": r.get("status"),
                "seeds": r.get("failing_seeds", []),
                "repro": repro_command(k, seed, r["task"], n, params)}
               for r in sorted(results, key=lambda r: r["task"])
               if r.get("status") not in ("ok", None)]
    return {"kind": k.name, "seed": seed, "n": n, "params": params, "tasks": total,
            "done": len(results),
            "instructions": sum(r.get("instructions", 0) for r in results),
            "mismatches": sum(r.get("mismatches", 0) for r in results),
            "failing_seeds": sorted({s for f in failing for s in f["seeds"]}),
            "failing": failing,
            **k.summarize(results),
            "wall_seconds": round(wall, 1),
            "cpu_seconds": round(sum(r.get("cpu_seconds", 0.0) for r in results), 1),
            "command": cmd}


def run_campaign(kind, *, n=None, seed=1, params=None, backend="local", workers=None,
                 tasks=None, out=None, timeout=None, progress=True, log=print, cmd=None,
                 finish=True):
    """Run (or resume) the campaign of ``kind`` (a :class:`~tb.campaign.core.Kind`, or a name of
    :data:`tb.campaign.kinds.KINDS`); returns ``(summary, {index: result})``.

    ``tasks``: a ``range`` of task indices to run (default all); ``out``: the results directory
    (default :func:`tb.campaign.core.default_dir`); ``timeout``: seconds per task; ``finish``: run
    the kind's closing step (mutate: the reports in ``build/mutate/``; not for a re-run)."""
    k = get_kind(kind)
    params = dict(params or {})
    n = k.default_n if n is None else n
    full = {**params, "n": n}
    total = k.count(full)
    want = range(total) if tasks is None else tasks
    if want and (want[0] < 0 or want[-1] >= total):
        raise ValueError(f"tasks must lie in [0, {total}), not {want!r}")
    cdir = CampaignDir(k, seed, n, params, path=out)
    full["campaign_tree"] = cdir.meta["tree"]
    done = cdir.done()
    todo = [i for i in want if i not in done]
    log(f"campaign {k.name} seed {seed}: {total} tasks, {len(want)} selected, "
        f"{len(want) - len(todo)} already done in {cdir.path}, {len(todo)} to run")
    t0 = time.monotonic()
    bar = Progress(len(want), len(want) - len(todo), enabled=progress)
    be = make_backend(backend, workers) if todo else None
    failed = sum(1 for i in want if i in done and done[i].get("status") != "ok")
    try:
        for index, res in (be.map([(k, seed, i, full, timeout) for i in todo])
                           if be else ()):
            if index in done:           # a retried task that finished twice: counted once
                continue
            done[index] = res
            cdir.append(res)
            if res.get("status") != "ok":
                failed += 1
                log(f"campaign: task {index} {res.get('status')}"
                    f"{' seeds ' + str(res.get('failing_seeds')) if res.get('failing_seeds') else ''}"
                    f"; rerun alone: {repro_command(k, seed, index, n, params)}")
            bar.step(failed)
    finally:
        bar.close()
        if be:
            be.close()
    wall = time.monotonic() - t0
    results = [done[i] for i in sorted(done)]
    summary = summarize(k, seed, n, params, results, wall, cmd)
    if finish and k.finish and results:
        extra = k.finish(full, seed, results, wall)
        if extra:
            summary["report"] = extra
    cdir.write_summary(summary)
    return summary, {i: done[i] for i in want if i in done}


def identical(a, b):
    """Whether two ``{index: result}`` maps agree on everything but the timing fields."""
    return ({i: strip_timing(r) for i, r in a.items()}
            == {i: strip_timing(r) for i, r in b.items()})
