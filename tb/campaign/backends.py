# SPDX-License-Identifier: Apache-2.0
"""Where a campaign's tasks run: this process, a local process pool, or Ray.

Every backend takes the same task tuples ``(kind, seed, index, params, timeout)`` for
:func:`tb.campaign.core.run_task` and yields ``(index, result)`` once per index, in completion
order. A worker that dies mid-task (killed, out of memory) has its task run again; a task is
never counted twice because the driver keeps the first result per index.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from tb.campaign.core import ROOT, run_task

__all__ = ["SerialBackend", "LocalBackend", "RayBackend", "make_backend", "BACKENDS"]

#: A task that kills its worker this many times is reported failed instead of retried again.
MAX_RETRIES = 3


class SerialBackend:
    """Every task in this process, in index order (``--workers 1``)."""

    name = "serial"

    def map(self, tasks):
        for t in tasks:
            yield t[2], run_task(*t)

    def close(self):
        pass


class LocalBackend:
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes (``spawn``:
    no state inherited from the driver). A broken pool (a worker killed) is replaced and the
    tasks it held are submitted again, each at most :data:`MAX_RETRIES` times."""

    name = "local"

    def __init__(self, workers=None):
        self.workers = max(1, int(workers or os.cpu_count() or 1))

    def _pool(self):
        return ProcessPoolExecutor(self.workers, mp_context=get_context("spawn"))

    def map(self, tasks):
        todo = list(tasks)
        tries = {t[2]: 0 for t in todo}
        while todo:
            pool = self._pool()
            pending = {}
            it = iter(todo)
            todo = []
            broken = False
            try:
                # keep 2 tasks per worker queued: a big campaign is not all pickled up front
                for t in it:
                    pending[pool.submit(run_task, *t)] = t
                    if len(pending) >= 2 * self.workers:
                        break
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        t = pending.pop(f)
                        try:
                            res = f.result()
                        except BrokenProcessPool:
                            broken = True
                            tries[t[2]] += 1
                            if tries[t[2]] >= MAX_RETRIES:
                                yield t[2], _died(t, tries[t[2]])
                            else:
                                todo.append(t)
                            continue
                        yield t[2], res
                    if broken:
                        todo += [pending[f] for f in pending]
                        todo += list(it)
                        pending = {}
                        break
                    for t in it:
                        pending[pool.submit(run_task, *t)] = t
                        if len(pending) >= 2 * self.workers:
                            break
            finally:
                pool.shutdown(wait=not broken, cancel_futures=True)

    def close(self):
        pass


def _died(t, tries):
    kind, seed, index, _, _ = t
    return {"task": index, "kind": kind.name, "seed": seed, "status": "fail",
            "detail": f"the worker died {tries} times running this task"}


def check_address(address, timeout=5.0):
    """Raise ``ConnectionError`` within ``timeout`` seconds if ``address`` (``host:port`` or
    ``ray://host:port``) takes no TCP connection."""
    a = address.split("://", 1)[-1]
    host, _, port = a.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"RAY_ADDRESS must be host:port or ray://host:port, not {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(f"Ray cluster at {address!r} is unreachable ({e}); unset "
                              f"RAY_ADDRESS to run on this machine") from None


class RayBackend:
    """Ray tasks: an embedded local Ray on ``workers`` CPUs, or the cluster at ``address``
    (default ``$RAY_ADDRESS``; ``auto`` = the cluster this node belongs to). On a cluster the
    source tree is shipped as the job's working directory (without ``build/``)."""

    name = "ray"

    def __init__(self, workers=None, address=None):
        try:
            import ray
        except ImportError:
            raise SystemExit("campaign: the ray backend needs Ray: pip install -e '.[campaign]' "
                             "(or use --backend local)") from None
        self.ray = ray
        address = address if address is not None else os.environ.get("RAY_ADDRESS")
        if address and address != "auto":
            check_address(address)
        if address:
            env = {"working_dir": str(ROOT), "excludes": ["build/", ".venv/", ".git/"]}
            ray.init(address=address, runtime_env=env, log_to_driver=False)
        else:
            self.workers = max(1, int(workers or os.cpu_count() or 1))
            ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        self.remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(run_task)

    def map(self, tasks):
        ray = self.ray
        todo = list(tasks)
        window = 4 * int(ray.available_resources().get("CPU", 1) or 1)
        refs = {}
        it = iter(todo)
        for t in it:
            refs[self.remote.remote(*t)] = t
            if len(refs) >= window:
                break
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            for r in ready:
                t = refs.pop(r)
                try:
                    res = ray.get(r)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayTaskError) as e:
                    res = _died(t, MAX_RETRIES) | {"detail": f"{type(e).__name__}: {e}"[:2000]}
                yield t[2], res
            for t in it:
                refs[self.remote.remote(*t)] = t
                if len(refs) >= window:
                    break

    def close(self):
        self.ray.shutdown()


BACKENDS = {"serial": SerialBackend, "local": LocalBackend, "ray": RayBackend}


def make_backend(name, workers=None):
    """The backend ``name`` (``local``: ``workers`` = 1 runs serially in this process)."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {sorted(BACKENDS)}, not {name!r}")
    if name == "serial" or (name == "local" and workers == 1):
        return SerialBackend()
    return BACKENDS[name](workers)
