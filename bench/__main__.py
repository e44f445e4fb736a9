# SPDX-License-Identifier: Apache-2.0
"""``python -m bench [--only NAME]``: run every benchmark, write ``build/bench/<name>.json``.

A benchmark is a module ``bench/bench_<name>.py`` with a ``NAME`` string and a function
``run(cfg) -> dict`` of metric name -> number. The JSON written is
``{"name", "preset", "metrics", "command"}``.
"""

import argparse
import importlib
import json
import pkgutil
import sys
import time
from pathlib import Path

import bench
from rtl.config import preset_from_env

OUT = Path(__file__).resolve().parent.parent / "build" / "bench"


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
    for name, mod in sorted(mods.items()):
        if args.only and name != args.only:
            continue
        t0 = time.monotonic()
        metrics = mod.run(cfg)
        record = {"name": name, "preset": cfg.name, "metrics": metrics,
                  "command": f"make bench BENCH={name} CONFIG={cfg.name}"}
        (OUT / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"[bench] {name} ({cfg.name}, {time.monotonic() - t0:.1f} s): "
              + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in metrics.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
