# SPDX-License-Identifier: Apache-2.0
"""Verilator models built once per node and reused by every task on it.

A model's key is a hash of what makes it (:func:`build_key`: the config, the unit and its
variant, and the bytes of every source file it is elaborated from), so a changed source gives a
new key, a new build directory, and a stale model is never used. :func:`node_build` makes the
model under an exclusive ``fcntl`` lock on ``build/campaign/builds/<unit>-<key>.lock``: the first
process on a node builds, the others wait for it and then find Verilator's build up to date
(they still elaborate the design in Python once each, to hold the model object). Within a
process the model is kept (one elaboration per worker process).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from contextlib import contextmanager
from pathlib import Path

from tb.campaign.core import OUT, ROOT

__all__ = ["build_key", "node_lock", "node_build", "BUILD_SOURCES"]

#: What a Verilator model of the core is made from (directories: every ``*.py`` below).
BUILD_SOURCES = ("rtl", "tb/runner.py", "tb/core/build.py")

_BUILT: dict = {}


def build_key(cfg_dict, unit, variant=None, sources=BUILD_SOURCES, root=ROOT):
    """16 hex digits over the config (a JSON-able dict), ``unit``, ``variant`` and the path and
    bytes of every source file."""
    h = hashlib.sha1(json.dumps({"cfg": cfg_dict, "unit": unit, "variant": variant},
                                sort_keys=True, default=str).encode())
    for s in sources:
        p = Path(root) / s
        files = sorted(p.rglob("*.py")) if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@contextmanager
def node_lock(path, blocking=True):
    """Exclusive ``fcntl.flock`` on ``<path>.lock`` while the block runs. With
    ``blocking=False`` raise ``BlockingIOError`` at once if another holder has it."""
    lock = Path(str(path) + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def node_build(unit, key, make, out=OUT):
    """The model ``unit`` with ``key``: ``make(name)`` builds it (``name`` = ``<unit>_<key>``, the
    build directory's name, so every key has its own) under the node lock; a stamp records a
    finished build. Kept per process."""
    if (unit, key) in _BUILT:
        return _BUILT[(unit, key)]
    base = Path(out) / "builds" / f"{unit}-{key}"
    with node_lock(base):
        model = make(f"{unit}_{key}")
        base.parent.mkdir(parents=True, exist_ok=True)
        Path(str(base) + ".done").write_text(key + "\n")
    _BUILT[(unit, key)] = model
    return model


def core_model(cfg):
    """The whole core's Verilator model for the fuzz campaign (``tb.core.build``'s regression
    build: the integration config, ``public_depth=1``), built once per node."""
    from tb.core.build import CORE_BUILD_ARGS, core_design, integration_cfg
    from tb.runner import SimBuild
    icfg = integration_cfg(cfg)
    key = build_key(icfg.to_dict(), "core", {"args": list(CORE_BUILD_ARGS)})
    return node_build("core", key, lambda name: SimBuild(
        core_design(icfg), unit="core", cfg=icfg, name=name, public_depth=1,
        build_args=CORE_BUILD_ARGS))
