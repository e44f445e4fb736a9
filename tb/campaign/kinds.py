# SPDX-License-Identifier: Apache-2.0
"""The campaign kinds of ``tb`` (:class:`tb.campaign.core.Kind`): what one task does, how many
tasks there are, what the summary adds; :data:`KINDS` names them for ``python -m tb.campaign``.

* ``fuzz``: random all-engine programs (clean and corrupted) on the whole core against the
  golden ISA simulator (``tb/core/tb_core_fuzz.py``); a task is one simulator run of
  ``programs`` programs (default 100) of ``n_ops`` operations (default 96), the testbench's
  seed drawn from the task's SeedSequence (program ``j`` has seed ``tb_seed * 1000 + j``).
* ``mutate`` is not here: it is :data:`synth.mutate_campaign.MUTATE` (``synth`` imports ``tb``,
  never the reverse), run by ``python -m synth.mutate campaign``.
* ``full``: the ``make test-full`` tier, one test (pytest node id) per task, ``CONFIG``
  default, ``--seed`` from the task's SeedSequence.
* ``activation``: :mod:`tb.campaign.activation`.
* ``selftest``: the engine's own check (no hardware): draws from the task's SeedSequence;
  parameters make chosen tasks fail (``fail``: indices), sleep (``sleep``: seconds) or kill
  their worker once (``die_once``: a marker directory).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tb.campaign import activation
from tb.campaign.build import node_lock
from tb.campaign.core import OUT, ROOT, Kind, seed_int, tree_id

__all__ = ["KINDS", "get_kind", "count_n"]


def count_n(params):
    """The task count of a kind with one task per index: ``n``."""
    return int(params["n"])


def no_summary(results):
    return {}


# ------------------------------------------------------------------------------------------------
# fuzz
# ------------------------------------------------------------------------------------------------

_FAIL_RE = re.compile(r"program seed (\d+) \(program (\d+)")


def fuzz_run(params, index, ss):
    """One cocotb run of ``tb.core.tb_core_fuzz`` on the node's core model."""
    from rtl.config import get_preset
    from tb.campaign.build import core_model
    cfg = get_preset(params.get("preset") or os.environ.get("CONFIG", "small"))
    programs = int(params.get("programs", 100))
    if not 1 <= programs <= 1000:
        raise ValueError(f"fuzz programs must be in [1, 1000], not {programs!r}")
    tb_seed = seed_int(ss, 21)      # program seeds tb_seed * 1000 + j stay below 2**31
    sim = core_model(cfg)
    with tempfile.TemporaryDirectory() as td:
        metrics = Path(td) / "fuzz.jsonl"
        detail = None
        try:
            sim.run("tb.core.tb_core_fuzz", params={
                "seed": tb_seed, "programs": programs, "n_ops": int(params.get("n_ops", 96)),
                "metrics": str(metrics)}, tag=f"campaign{os.getpid()}")
        except AssertionError as e:
            detail = str(e)
        recs = ([json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
                if metrics.exists() else [])
    progs = [r for r in recs if "program" in r]
    out = {"tb_seed": tb_seed, "programs": len(progs),
           "instructions": sum(r.get("instructions", 0) for r in progs),
           "clean": sum(r.get("golden_error") is None for r in progs),
           "mismatches": 0, "failing_seeds": []}
    if detail is not None:
        m = _FAIL_RE.search(detail)
        out.update(mismatches=1, status="fail", detail=detail[-4000:],
                   failing_seeds=[int(m.group(1))] if m else [])
    return out


def fuzz_summarize(results):
    return {"programs": sum(r.get("programs", 0) for r in results),
            "clean_programs": sum(r.get("clean", 0) for r in results)}


# ------------------------------------------------------------------------------------------------
# full
# ------------------------------------------------------------------------------------------------

def full_tests():
    """The node ids of the ``full`` tier (``pytest --collect-only -m full``), collected once per
    node and source tree."""
    path = OUT / "plans" / f"full-{tree_id()}.json"
    with node_lock(path):
        if path.exists():
            return json.loads(path.read_text())
        r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                            "-p", "no:cacheprovider", "-m", "full", "tests"],
                           cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, CONFIG="default"))
        ids = sorted(x for x in r.stdout.splitlines() if "::" in x)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ids) + "\n")
        return ids


def full_run(params, index, ss):
    tests = full_tests()
    node = tests[index]
    seed = seed_int(ss)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"--seed={seed}", node], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, CONFIG=params.get("preset") or "default"))
    out = {"test": node, "test_seed": seed, "returncode": r.returncode}
    if r.returncode:
        out.update(status="fail", failing_seeds=[seed], detail=r.stdout[-4000:])
    return out


def full_count(params):
    return len(full_tests())


def full_summarize(results):
    return {"tests_passed": sum(r.get("returncode") == 0 for r in results)}


# ------------------------------------------------------------------------------------------------
# selftest
# ------------------------------------------------------------------------------------------------

def selftest_run(params, index, ss):
    import time
    if params.get("sleep"):
        time.sleep(float(params["sleep"]))
    marker = params.get("die_once")
    if marker and index in params.get("die_at", ()):
        flag = Path(marker) / f"died-{index}"
        if not flag.exists():
            flag.parent.mkdir(parents=True, exist_ok=True)
            flag.write_text("1")
            os._exit(3)         # the worker process dies mid-task
    draws = [int(x) for x in ss.generate_state(4)]
    out = {"draws": draws, "instructions": 10}
    if index in params.get("fail", ()):
        out.update(status="fail", mismatches=1, failing_seeds=[draws[0]])
    return out


KINDS = {
    "fuzz": Kind("fuzz", fuzz_run, count_n, fuzz_summarize, default_n=10),
    "full": Kind("full", full_run, full_count, full_summarize, default_n=0),
    "activation": Kind("activation", activation.run, count_n, activation.summarize,
                       default_n=4096),
    "selftest": Kind("selftest", selftest_run, count_n, no_summary, default_n=8),
}


def get_kind(name):
    """The :class:`~tb.campaign.core.Kind` named ``name`` (a :class:`Kind` is returned as is)."""
    if isinstance(name, Kind):
        return name
    if name not in KINDS:
        raise ValueError(f"campaign kind must be one of {sorted(KINDS)}, not {name!r}")
    return KINDS[name]
