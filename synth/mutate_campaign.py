# SPDX-License-Identifier: Apache-2.0
"""The ``mutate`` campaign kind (:data:`MUTATE`; ``make mutate``, ``python -m synth.mutate
campaign``): the mutants of every registered block as campaign tasks.

Each block with tests in ``synth/blocks.py`` gets ``N`` + (its claimed mutants) task slots
(``N`` = ``--n``, default 20): slot ``j`` of a block is the ``j``-th mutant of its plan
(:func:`synth.mutants.plan_block`: the claimed mutants, then the sample of seed ``--seed`` in
order until ``N`` have changed Verilog). The plan is computed once per node and block (under a
file lock) and kept in ``build/campaign/plans/``, keyed by the source tree; a task applies its
mutant in a worker copy of the tree (``build/mutate/work/<k>``, one per worker process, its
Verilator builds kept), runs the block's tests and returns the status. The first task of a
block in a process runs the original's tests first (warm builds, the time limit). At the end
the usual ``build/mutate/<block>.json``/``.md`` and ``summary.json`` are written.

Parameters: ``blocks`` (comma-separated, default every block with tests), ``preset``
(default ``$CONFIG`` or ``small``).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from synth import mutants as mu
from synth.blocks import BLOCKS, get_block
from tb.campaign.build import node_lock
from tb.campaign.core import OUT, Kind, tree_id

__all__ = ["MUTATE", "run", "count", "summarize", "finish"]

_STATE: dict = {}      # per process: the worker, warm-up times, plans


def preset(params):
    return params.get("preset") or os.environ.get("CONFIG", "small")


def block_names(params):
    b = params.get("blocks")
    names = ([x.strip() for x in b.split(",") if x.strip()] if isinstance(b, str)
             else list(b) if b else [x.name for x in BLOCKS if x.tests])
    for name in names:
        blk = get_block(name)
        if not blk.tests or not blk.sources:
            raise ValueError(f"mutate: block {name!r} has no sources/tests in synth/blocks.py")
    return names


def layout(params):
    """``[(block, slots)]``: ``n`` + the block's claimed mutants."""
    claims = mu.load_claims()
    out = []
    for name in block_names(params):
        ids = {m.id for m in mu.block_mutants(get_block(name))}
        out.append((name, int(params["n"]) + len(ids & set(claims))))
    return out


def count(params):
    return sum(s for _, s in layout(params))


def locate(params, index):
    """``(block, slot)`` of task ``index``."""
    for name, slots in layout(params):
        if index < slots:
            return name, index
        index -= slots
    raise ValueError(f"mutate task index must be in [0, {count(params)}), not {index!r}")


def _worker():
    """This process's worker tree: the first ``build/mutate/work/<k>`` no other process holds
    (the slot lock is kept for the life of the process)."""
    if "worker" in _STATE:
        return _STATE["worker"]
    for k in range(256):
        path = mu.OUT / "work" / f"{k}.slot"
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "w")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        _STATE["slot_fh"] = fh
        _STATE["worker"] = mu.Worker(k, mu.tracked_files())
        return _STATE["worker"]
    raise RuntimeError("mutate: no free worker slot in build/mutate/work")


def plan_path(params, block, seed):
    tree = params.get("campaign_tree") or tree_id()
    return OUT / "plans" / (f"mutate-{tree}-{preset(params)}-{seed}-{params['n']}-"
                            f"{block}.json")


def get_plan(params, block, seed):
    """The block's plan (:func:`synth.mutants.plan_block`), computed once per node."""
    key = (block, seed, params["n"])
    if key in _STATE.get("plans", {}):
        return _STATE["plans"][key]
    path = plan_path(params, block, seed)
    with node_lock(path):
        if path.exists():
            plan = json.loads(path.read_text())
        else:
            plan = mu.plan_block(get_block(block), [_worker()], n=int(params["n"]), seed=seed,
                                 preset=preset(params), claims=mu.load_claims())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(plan) + "\n")
    _STATE.setdefault("plans", {})[key] = plan
    return plan


def run(params, index, ss):
    """Task ``index``: test the mutant in its block's slot (``not_run`` past the plan)."""
    seed = int(params["campaign_seed"])
    name, j = locate(params, index)
    plan = get_plan(params, name, seed)
    if j >= len(plan["chosen"]):
        return {"block": name, "slot": j, "mutation": "not_run"}
    block = get_block(name)
    claims = mu.load_claims()
    by_id = {m.id: m for m in mu.block_mutants(block)}
    m = by_id[plan["chosen"][j]]
    w = _worker()
    warm = _STATE.setdefault("warm", {})
    if name not in warm:
        warm[name] = mu.warm_up(w, block, preset(params), seed)
    base, timeout = warm[name]
    st, secs = mu.test_mutant(w, block, m, preset=preset(params), seed=seed, timeout=timeout,
                              claims=claims)
    return {"block": name, "slot": j, "mutant": m.id, "key": m.key, "mutation": st,
            "seconds": round(secs, 1), "original_seconds": round(base, 1),
            "timeout_seconds": round(timeout, 1),
            "status": "fail" if st == "survived" else "ok"}


def summarize(results):
    """Kill fraction per block over the tested, non-equivalent mutants."""
    per = {}
    for r in results:
        st = r.get("mutation")
        if st is None:
            continue
        p = per.setdefault(r["block"], {"killed": 0, "timed_out": 0, "survived": 0,
                                        "equivalent_claimed": 0, "claim_broken": 0,
                                        "not_run": 0})
        p[st] += 1
    out = {}
    for b, p in per.items():
        det = p["killed"] + p["timed_out"] + p["claim_broken"]
        den = det + p["survived"]
        out[b] = {**p, "tested": den, "kill_fraction": round(det / den, 4) if den else None}
    return {"kill_fraction": out}


def finish(params, seed, results, wall):
    """Write ``build/mutate/<block>.json``/``.md`` and ``summary.json`` from the results."""
    claims = mu.load_claims()
    out = []
    for name, _ in layout(params):
        rs = [r for r in results if r.get("block") == name]
        plan_file = plan_path(params, name, seed)
        if not rs or not Path(plan_file).exists():
            continue
        plan = json.loads(Path(plan_file).read_text())
        tested = {r["mutant"]: (r["mutation"], r["seconds"]) for r in rs if r.get("mutant")}
        base = max((r.get("original_seconds", 0.0) for r in rs), default=0.0)
        timeout = max((r.get("timeout_seconds", 0.0) for r in rs), default=0.0)
        out.append(mu.block_report(get_block(name), plan, tested, n=int(params["n"]),
                                   seed=seed, preset=preset(params), claims=claims,
                                   base=base, timeout=timeout,
                                   wall=wall))
    names = block_names(params) if params.get("blocks") else []
    return mu.write_outputs(out, names, n=int(params["n"]), seed=seed, preset=preset(params),
                            stale=mu.stale_claims(claims), wall=wall)


#: The ``mutate`` kind: ``n`` (default 20) mutants per block; ``python -m synth.mutate campaign``
#: runs it and re-runs one of its tasks alone.
MUTATE = Kind("mutate", run, count, summarize, default_n=20, finish=finish,
              command="python -m synth.mutate campaign")
