# SPDX-License-Identifier: Apache-2.0
"""``python -m bench [--only NAME]``: run every benchmark, write ``build/bench/<name>.json``.

A benchmark is a module ``bench/bench_<name>.py`` with a ``NAME`` string and a function
``run(cfg) -> dict`` of metric name -> number. The JSON written is
``{"name", "preset", "metrics", "command", "commit"}``; ``commit`` is ``git rev-parse --short
HEAD`` with ``-dirty`` when tracked files have uncommitted changes (``unknown`` outside git).
``make docs`` turns these records into the README's figures table (``bench/doc_tables.py``).
"""

import argparse
import importlib
import json
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

import bench
from rtl.config import preset_from_env

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"


def commit(root=OUT.parent.parent):
    """The checked-out commit (short hash), ``-dirty`` when a tracked file differs from it;
    ``"unknown"`` when ``root`` is not a git work tree or git is missing."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty.strip() else "")


def discover():
    mods = {}
    for info in pkgutil.iter_modules(bench.__path__):
        if info.name.startswith("bench_"):
            mod = importlib.import_module(f"bench.{info.name}")
            mods[mod.NAME] = mod
    return mods


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", help="run only this benchmark")
    args = ap.parse_args(argv)
    cfg = preset_from_env()
    mods = discover()
    if args.only is not None and args.only not in mods:
        ap.error(f"--only must be one of {sorted(mods)}, not {args.only!r}")
    OUT.mkdir(parents=True, exist_ok=True)
    rev = commit()
    for name, mod in sorted(mods.items()):
        if args.only and name != args.only:
            continue
        t0 = time.monotonic()
        metrics = mod.run(cfg)
        record = {"name": name, "preset": cfg.name, "metrics": metrics,
                  "command": f"make bench BENCH={name} CONFIG={cfg.name}", "commit": rev}
        (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"[bench] {name} ({cfg.name}, {time.monotonic() - t0:.1f} s): "
              + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in metrics.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
