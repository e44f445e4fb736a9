# SPDX-License-Identifier: Apache-2.0
"""The campaign engine: seeds, one task, the results directory, resume and the summary.

A campaign of kind ``K`` (a :class:`Kind`) with seed ``S`` and ``n`` tasks runs
``run_task(K, S, i, params)`` for every index ``i``; task ``i`` draws its randomness from ``task_seed(S, i)``, the ``i``-th child of
``numpy.random.SeedSequence(S).spawn(n)``, so it is a pure function of ``(S, i)`` (and the
source tree): it can be re-run alone, on any machine, in any order. Its result is one JSON
object; the timing fields (:data:`TIMING`) are the only ones that may differ between runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
OUT = ROOT / "build" / "campaign"

#: Result fields that describe the run, not the result: left out when two runs are compared.
TIMING = ("wall_seconds", "cpu_seconds", "host", "pid")

#: Directories whose ``*.py`` files make the source-tree identity of a campaign (the tests too:
#: they decide what a mutant is).
TREE_DIRS = ("rtl", "golden", "tb", "synth", "tests")


@dataclass(frozen=True)
class Kind:
    """A campaign kind: ``run(params, index, seedseq) -> dict``, ``count(params) -> int`` tasks,
    ``summarize(results) -> dict`` of extra summary fields, ``finish(params, seed, results,
    wall)`` after the run (or None), ``default_n`` for ``--n``, and ``command``: the command
    line that runs a campaign of this kind (default ``python -m tb.campaign <name>``), which
    the repro command of a failing task starts with.

    Every function is a module-level function: a task is pickled to other processes (the
    process pool, Ray) by reference, and the worker imports its module."""
    name: str
    run: Callable
    count: Callable
    summarize: Callable
    default_n: int
    finish: Callable | None = None
    command: str | None = None

    @property
    def cli(self):
        """The command line that runs a campaign of this kind (before its options)."""
        return self.command or f"python -m tb.campaign {self.name}"


def task_seed(seed, index):
    """The :class:`numpy.random.SeedSequence` of task ``index`` of a campaign seeded ``seed``:
    ``SeedSequence(seed).spawn(n)[index]`` for any ``n > index``, computed directly."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"task index must be a non-negative integer, not {index!r}")
    return np.random.SeedSequence(seed, spawn_key=(int(index),))


def seed_int(ss, bits=31):
    """A ``bits``-bit integer drawn from the SeedSequence ``ss`` (for APIs that take an int)."""
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(64 - bits))


def tree_id(root=ROOT):
    """SHA-1 (16 hex digits) over the path and bytes of every ``*.py`` file under
    :data:`TREE_DIRS`: a campaign's results belong to one source tree."""
    h = hashlib.sha1()
    for d in TREE_DIRS:
        for p in sorted((Path(root) / d).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class TaskTimeout(Exception):
    """A task ran past its time limit."""


def _alarm(signum, frame):
    raise TaskTimeout()


def run_task(kind, seed, index, params=None, timeout=None):
    """Run task ``index`` of a campaign of :class:`Kind` ``kind`` seeded ``seed``; returns its JSON-able result
    (``task``, ``kind``, ``seed``, the kind's fields, ``status``: ``ok``, ``fail``, ``timeout``
    or ``error`` (an exception, its traceback in ``detail``), and the :data:`TIMING` fields). ``timeout`` (seconds) is enforced with
    ``SIGALRM`` when called in a process's main thread. A ``campaign_tree`` in ``params`` (the
    driver's :func:`tree_id`) must be this process's tree: a task never runs on other code."""
    params = dict(params or {})
    t0, c0 = time.monotonic(), _cpu()
    use_alarm = bool(timeout) and _main_thread()
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, float(timeout))
    try:
        want = params.get("campaign_tree")
        if want and _tree() != want:
            raise RuntimeError(f"this worker's source tree {_tree()} is not the campaign's "
                               f"{want}: it changed since the campaign started")
        res = kind.run({**params, "campaign_seed": seed}, int(index), task_seed(seed, index))
    except TaskTimeout:
        res = {"status": "timeout", "detail": f"no result in {timeout} s"}
    except (Exception, SystemExit) as e:     # a broken task is a result, not a dead campaign
        import traceback
        res = {"status": "error",
               "detail": "".join(traceback.format_exception(e))[-4000:]}
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    res.setdefault("status", "ok")
    out = {"task": int(index), "kind": kind.name, "seed": seed, **res,
           "wall_seconds": round(time.monotonic() - t0, 3),
           "cpu_seconds": round(_cpu() - c0, 3), "host": os.uname().nodename,
           "pid": os.getpid()}
    return json.loads(json.dumps(out))


_TREE = []


def _tree():
    """:func:`tree_id` as this process first saw it."""
    if not _TREE:
        _TREE.append(tree_id())
    return _TREE[0]


def _main_thread():
    import threading
    return threading.current_thread() is threading.main_thread()


def _cpu():
    """CPU seconds of this process and its finished children (simulators, compilers)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def strip_timing(result):
    """``result`` without the :data:`TIMING` fields (what two runs must agree on)."""
    return {k: v for k, v in result.items() if k not in TIMING}


def _param_text(v):
    """``v`` as ``--param`` reads it back: plain text for a string that is not JSON, else JSON."""
    if isinstance(v, str):
        try:
            json.loads(v)
        except ValueError:
            return v
    return json.dumps(v, separators=(",", ":"))


def repro_command(kind, seed, index, n, params=None):
    """The one command that re-runs task ``index`` of a campaign of :class:`Kind` ``kind``
    alone."""
    extra = "".join(f" --param {shlex.quote(f'{k}={_param_text(v)}')}"
                    for k, v in sorted((params or {}).items()))
    return f"{kind.cli} --seed {seed} --n {n} --task {index}{extra}"


# ------------------------------------------------------------------------------------------------
# the results directory
# ------------------------------------------------------------------------------------------------

def default_dir(kind, seed, n, params):
    """``build/campaign/<kind>-<seed>`` (``kind`` a :class:`Kind`), plus ``-<8 hex>`` of ``n`` and the parameters when
    there are parameters or ``n`` is not the kind's default (two such campaigns never share a
    directory)."""
    name = f"{kind.name}-{seed}"
    if params or n != kind.default_n:
        h = hashlib.sha1(json.dumps({"n": n, "params": params or {}}, sort_keys=True).encode())
        name += f"-{h.hexdigest()[:8]}"
    return OUT / name


class CampaignDir:
    """``build/campaign/<kind>-<seed>[-<hash>]/`` (:func:`default_dir`): ``meta.json`` (kind, seed, n, params, source tree),
    ``tasks.jsonl`` (one result per line, appended as tasks finish) and ``summary.json``.

    A directory made by another source tree or with other parameters is refused (its results
    would be mixed with this tree's)."""

    def __init__(self, kind, seed, n, params, path=None, tree=None):
        self.path = Path(path) if path else default_dir(kind, seed, n, params)
        self.meta = {"kind": kind.name, "seed": seed, "n": n, "params": params or {},
                     "tree": tree or tree_id()}
        self.jsonl = self.path / "tasks.jsonl"
        self.path.mkdir(parents=True, exist_ok=True)
        mp = self.path / "meta.json"
        if mp.exists():
            old = json.loads(mp.read_text())
            diff = [k for k in self.meta if old.get(k) != self.meta[k]]
            if diff:
                raise ValueError(
                    f"campaign directory {self.path} holds a campaign with another "
                    f"{', '.join(diff)} ({', '.join(f'{k}={old.get(k)!r}' for k in diff)}); "
                    f"remove it or choose another --out, results are not mixed")
        else:
            mp.write_text(json.dumps(self.meta, indent=1) + "\n")

    def done(self):
        """``{task index: result}`` already in ``tasks.jsonl`` (a torn last line is ignored)."""
        out = {}
        if self.jsonl.exists():
            for line in self.jsonl.read_text().splitlines():
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                out.setdefault(r["task"], r)
        return out

    def append(self, result):
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps(result, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def write_summary(self, summary):
        (self.path / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


class Progress:
    """One status line (tasks done, rate, ETA), rewritten in place on a terminal."""

    def __init__(self, total, already, stream=sys.stderr, enabled=True):
        self.total, self.already, self.stream = total, already, stream
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.done = 0

    def step(self, failed=0):
        self.done += 1
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        left = self.total - self.already - self.done
        eta = el / self.done * left if self.done else 0.0
        line = (f"campaign: {self.already + self.done}/{self.total} tasks, "
                f"{self.done / el if el else 0:.2f} tasks/s, {failed} failing, "
                f"elapsed {_hms(el)}, ETA {_hms(eta)}")
        end = "\r" if self.stream.isatty() else "\n"
        print(line, end=end, file=self.stream, flush=True)

    def close(self):
        if self.enabled and self.stream.isatty():
            print(file=self.stream)


def _hms(s):
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
