# SPDX-License-Identifier: Apache-2.0
"""Run your own kernel on the golden ISA simulator and on the RTL core, in one command.

``python -m tb.core.run_kernel path/to/file.py:function [--config CONFIG] [--waves]``
(``make sim KERNEL=path/to/file.py:function [CONFIG=...] [WAVES=1]``), or from Python
``run_kernel("file.py:function", cfg)`` / ``run_kernel(function, cfg)``.

``function(cfg)`` returns a :class:`golden.kernel.Kernel` (built or not, or the
:class:`~golden.kernel.KernelProgram` of its ``build()``) whose inputs carry numpy data and
whose results are marked with ``k.output(name, dram_tensor)``. Then:

1. the core config is chosen for the kernel (:func:`core_config`): the whole-core build of the
   regression (BF16 tensor engine) when the kernel needs no more, else the ``make sim`` build
   (FP8 E4M3 and the 4:16 sparse PE as well), else the config given;
2. the kernel runs on the golden ISA simulator of that config (outputs, error, cycle
   estimate, per-instruction timeline);
3. the core is built for that config (cached: :func:`tb.core.build.core_sim`) and the generic
   cocotb module ``tb/core/tb_core_run_kernel.py`` runs the same DRAM image and queues on
   Verilator, tracing the ``activity`` port;
4. every output is compared bit for bit; the report gives the cycles (RTL and golden
   estimate), each engine's executing and waiting fractions, the first mismatch of each
   output, a run-time error by name, engine, instruction index and operation label, and
   writes ``build/sim/<kernel>/timeline.{png,svg,html}`` (RTL above, golden estimate below)
   and, with ``waves``, ``build/sim/<kernel>/<kernel>.vcd``.

Exit status of the command: 0 when everything matched, 1 on a mismatch or an error, 2 on a
bad ``KERNEL`` spec or a kernel that does not build (its message printed, nothing run).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from rtl import isa
from tb.runner import ROOT

__all__ = ["KernelSpecError", "KernelBuildError", "KernelReport", "load_kernel", "build_program", "kernel_needs",
           "core_config", "run_rtl", "format_report", "rtl_error_text",
           "run_golden_program", "compare_outputs", "run_kernel", "main"]


class KernelSpecError(ValueError):
    """A ``KERNEL`` spec that names no kernel function (file, function or return value)."""


class KernelBuildError(ValueError):
    """The kernel function raised ``ValueError`` / ``TypeError`` while building (a shape, a
    format, a capacity its operations check): nothing ran."""


@dataclass
class KernelReport:
    """What :func:`run_kernel` found. ``ok``: no mismatch and no error on either side."""
    kernel: str
    command: str
    config: str
    rtl_cycles: int | None = None
    golden_cycles: int | None = None
    fractions: dict = field(default_factory=dict)
    golden_fractions: dict = field(default_factory=dict)
    checked: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)
    golden_error: str | None = None
    rtl_error: str | None = None
    files: dict = field(default_factory=dict)
    build_cached: bool | None = None
    seconds: dict = field(default_factory=dict)

    @property
    def ok(self):
        return not self.mismatches and not self.golden_error and not self.rtl_error


# ---- the KERNEL spec ---------------------------------------------------------------------------

def load_kernel(spec):
    """``(function, name)`` of a ``"path/to/file.py:function"`` spec (or of a callable);
    :class:`KernelSpecError` naming the file or function otherwise."""
    if callable(spec):
        return spec, getattr(spec, "__name__", type(spec).__name__)
    if not isinstance(spec, str) or ":" not in spec:
        raise KernelSpecError(f"KERNEL must be 'path/to/file.py:function' or a function, "
                              f"not {spec!r}")
    path, fname = spec.rsplit(":", 1)
    p = Path(path)
    if not p.is_file():
        raise KernelSpecError(f"KERNEL file {path!r} does not exist (from KERNEL={spec!r})")
    if not fname.isidentifier():
        raise KernelSpecError(f"KERNEL function must be a Python name, not {fname!r} "
                              f"(from KERNEL={spec!r})")
    modname = f"_nc_kernel_{abs(hash(str(p.resolve()))):x}"
    mod_spec = importlib.util.spec_from_file_location(modname, p)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.modules[modname] = mod
    mod_spec.loader.exec_module(mod)
    fn = getattr(mod, fname, None)
    if fn is None or not callable(fn):
        names = sorted(n for n, v in vars(mod).items()
                       if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == modname)
        what = "has no function" if fn is None else "has a non-callable"
        raise KernelSpecError(f"KERNEL file {path!r} {what} {fname!r} (its functions: "
                              f"{', '.join(names) or 'none'})")
    return fn, fname


def build_program(fn, name, cfg):
    """``fn(cfg)`` built: its :class:`golden.kernel.KernelProgram`; :class:`KernelSpecError`
    when it returns something else or marks no output, ``ValueError`` for an output that is
    not a DRAM tensor (the core's results are read back from DRAM)."""
    from golden.kernel import DramTensor, Kernel, KernelProgram
    k = fn(cfg)
    if isinstance(k, Kernel):
        k = k.build()
    if not isinstance(k, KernelProgram):
        raise KernelSpecError(f"KERNEL function {name!r} must return a golden.kernel.Kernel "
                              f"(or its build()), not {type(k).__name__}")
    if not k.outputs:
        raise KernelSpecError(f"KERNEL function {name!r} marks no output: mark each result "
                              f"with k.output(name, dram_tensor)")
    for oname, where in k.outputs.items():
        if not isinstance(where, DramTensor):
            raise ValueError(f"kernel {name!r} output {oname!r} must be a DRAM tensor to be "
                             f"read back from the core (store its tiles with k.store), not "
                             f"{type(where).__name__}")
    return k


# ---- the core config ---------------------------------------------------------------------------

def kernel_needs(kp):
    """What the core must build for ``kp``: ``{"formats": tensor-engine input formats of its
    dense instructions, "sparse": N:M patterns, "mx": any MX instruction, "element_ops": any
    descriptor casting or reducing}``."""
    from golden import dma as gdma
    need = {"formats": set(), "sparse": set(), "mx": False, "element_ops": False}
    for eng, raw in kp.programs.items():
        for i in range(0, len(raw), isa.INSTR_BYTES):
            ins = isa.decode(raw[i:i + isa.INSTR_BYTES])
            if ins.op == "dma_start":
                for j in range(ins.imm["count"]):
                    a = ins.imm["desc_addr"] + 64 * j - kp.dram_base
                    d = gdma.Descriptor.unpack(bytes(kp.dram[a:a + 64]))
                    need["element_ops"] |= gdma.elementwise(d)
            if eng != "pe" or ins.op not in ("load_stationary", "multiply_moving", "transpose"):
                continue
            need["mx"] |= "mx" in ins.flags
            if "sparse" in ins.flags:
                need["sparse"].add(f"{ins.imm['sp_n']}:{ins.imm['sp_m']}")
            elif ins.op != "transpose" and "ap1" in ins.aps:
                need["formats"].add(ins.aps["ap1"].dtype)
    return need


def core_config(cfg, kp):
    """The config of the core the kernel runs on: :func:`tb.core.build.integration_cfg` of
    ``cfg`` (the regression's build: BF16 only) when the kernel needs nothing more, its
    ``sparse=True`` form (``make sim``'s: FP8 E4M3 and the 4:16 sparse PE too) when that is
    enough, else ``cfg`` itself (a build of its own)."""
    from tb.core.build import integration_cfg
    need = kernel_needs(kp)
    if need["mx"] or need["element_ops"]:
        return cfg
    for sparse in (False, True):
        c = integration_cfg(cfg, sparse=sparse)
        pats = set(c.sparse_patterns or ())
        if need["formats"] <= set(c.formats) and need["sparse"] <= pats:
            return c
    return cfg


# ---- the golden run ----------------------------------------------------------------------------

def run_golden_program(kp, cfg):
    """Run ``kp`` on the golden ISA simulator of ``cfg``: ``{"error": located SimError or None,
    "outputs": {name: codes}, "cycles", "sim"}``."""
    from golden.isasim import IsaSim
    sim = IsaSim(cfg, dram_bytes=bytearray(kp.dram), dram_base=kp.dram_base)
    err = kp.locate(sim.run(kp.programs))
    outs = {} if err else kp.read_outputs(sim, codes=True)
    return {"error": err, "outputs": outs, "cycles": sim.stats()["cycles"], "sim": sim}


# ---- comparison --------------------------------------------------------------------------------

def _value(cfg, dtype, code):
    from golden.kernel.data import codes_values
    try:
        return float(np.asarray(codes_values(cfg, dtype, np.array([[code]], np.uint32)),
                                dtype=np.float64)[0, 0])
    except (ValueError, TypeError):
        return None


def compare_outputs(kp, cfg, golden, rtl, reproduce):
    """Texts of the outputs whose RTL codes differ from the golden ones: the output's name,
    the first differing index, both codes and values, the number of differing elements, and
    the command that reproduces the run."""
    out = []
    for name, want in golden.items():
        t = kp.outputs[name]
        got = rtl.get(name)
        want = np.asarray(want, dtype=np.uint32)
        if got is None or got.shape != want.shape:
            out.append(f"output {name}: the RTL returned "
                       f"{'nothing' if got is None else got.shape}, golden {want.shape}; "
                       f"reproduce: {reproduce}")
            continue
        bad = np.argwhere(got != want)
        if not len(bad):
            continue
        r, c = (int(x) for x in bad[0])
        g, w = int(got[r, c]), int(want[r, c])
        gv, wv = _value(cfg, t.dtype, g), _value(cfg, t.dtype, w)
        out.append(f"output {name} ({t.dtype} {want.shape[0]}x{want.shape[1]}): {len(bad)} "
                   f"element(s) differ, first at [{r}, {c}]: RTL {g:#x} ({gv!r}), golden "
                   f"{w:#x} ({wv!r}); reproduce: {reproduce}")
    return out


def rtl_error_text(kp, e):
    from rtl.core.csr import ERR_SRC_DMA, ERR_SRC_SEM
    name = isa.ERROR_NAMES.get(e["code"], hex(e["code"]))
    src = e["source"]
    if src == ERR_SRC_DMA:
        return f"{name} on the DMA (detail {e['info']:#x})"
    if src == ERR_SRC_SEM:
        return f"{name} on the semaphore file (semaphore {e['info']})"
    eng = isa.ENGINES[src]
    op = kp.operation(eng, e["pc"])
    return (f"{name} on {eng} instruction {e['pc']}{f' ({op})' if op else ''}: "
            f"info {e['info']:#x}")


def describer(kp):
    """``describe(stream, index)`` for the timeline titles of the program ``kp``: the opcode and
    the operation (also the multi-core runner's, per rank)."""
    ops = {}
    for eng, raw in kp.programs.items():
        ops[eng] = [isa.decode(raw[i:i + isa.INSTR_BYTES]).op
                    for i in range(0, len(raw), isa.INSTR_BYTES)]

    def describe(stream, k):
        op = ops.get(stream, [])
        name = op[k] if 0 <= k < len(op) else ""
        label = kp.operation(stream, k) or ""
        return f"{name} ({label})" if name and label else (label or name)
    return describe


# ---- the run -----------------------------------------------------------------------------------

def run_rtl(kp, cfg, name, out_dir, *, waves=False, estimate=0):
    """Build (or reuse) the core of ``cfg`` and run ``kp`` on it with the generic cocotb
    module (the run is bounded by ``tb.core.driver.MAX_CYCLES`` or four times the golden
    ``estimate``, whichever is longer); returns ``(record, sim build)``: the record has
    ``cycles``, ``trace``, ``error`` and ``outputs`` ({name: codes})."""
    from tb.core.build import HIER_ABOVE_PES, core_sim
    sim = core_sim(cfg, waves=waves, hier=cfg.pe_rows * cfg.pe_cols > HIER_ABOVE_PES)
    queues = kp.place_queues()
    image = out_dir / "image.bin"
    image.write_bytes(bytes(kp.dram))
    rec_path = out_dir / "rtl.json"
    rec_path.unlink(missing_ok=True)
    outs = {n: (t.addr, t.shape[0] * t.pitch) for n, t in kp.outputs.items()}
    params = {"name": name, "image": str(image), "dram_base": kp.dram_base,
              "dram_bytes": kp.dram_base + len(kp.dram), "queues": queues,
              "outputs": outs, "out": str(rec_path),
              "max_cycles": 4 * int(estimate)}
    (out_dir / "params.json").write_text(json.dumps(params, indent=1))
    import time
    cpu = time.process_time()
    sim.run("tb.core.tb_core_run_kernel", params=params, tag=f"kernel_{name}")
    rec = json.loads(rec_path.read_text())
    rec["cpu_to_first_cycle"] = cpu + rec["cpu_to_start"]
    img = bytearray(len(kp.dram))
    for n, (addr, _nb) in outs.items():
        raw = bytes.fromhex(rec["outputs"].get(n, ""))
        img[addr - kp.dram_base:addr - kp.dram_base + len(raw)] = raw
    rec["outputs"] = {n: kp.outputs[n].read(img, kp.dram_base) for n in rec["outputs"]}
    return rec, sim


def run_kernel(kernel, cfg=None, waves=False, *, out_dir=None, golden=run_golden_program,
               quiet=False, command=None):
    """Run ``kernel`` (a ``"file.py:function"`` spec or the function) for ``cfg`` (default:
    the ``CONFIG`` preset, else ``small``) on the golden simulator and the RTL core; print the
    report (unless ``quiet``) and return it (:class:`KernelReport`). ``golden`` is the golden
    run (:func:`run_golden_program`; a test double may replace it)."""
    import time
    from rtl.config import preset_from_env
    from rtl.core.neuroncore import ENGINES_BUILT, activity_layout
    from tb.core import timeline
    t0, t0_wall = time.monotonic(), time.time()
    fn, name = load_kernel(kernel)
    cfg = cfg or preset_from_env("small")
    try:
        kp = build_program(fn, name, cfg)
    except KernelSpecError:
        raise
    except (ValueError, TypeError) as e:
        raise KernelBuildError(f"kernel {name!r} does not build for {cfg.name}: {e}") from e
    ccfg = core_config(cfg, kp)
    spec = kernel if isinstance(kernel, str) else f"<function {name}>"
    command = command or (f"python -m tb.core.run_kernel {spec} --config {cfg.name}"
                          + (" --waves" if waves else ""))
    rep = KernelReport(kernel=name, command=command, config=ccfg.name)
    out_dir = Path(out_dir) if out_dir else ROOT / "build" / "sim" / name
    out_dir.mkdir(parents=True, exist_ok=True)
    g = golden(kp, ccfg)
    t1 = time.monotonic()
    rep.golden_cycles = g["cycles"]
    rep.golden_error = str(g["error"]) if g["error"] else None
    rec, sim = run_rtl(kp, ccfg, name, out_dir, waves=waves, estimate=g["cycles"])
    t2 = time.monotonic()
    rep.build_cached = sim.cached
    rep.rtl_cycles = rec["cycles"]
    if rec["error"]:
        rep.rtl_error = rtl_error_text(kp, rec["error"])
    else:
        rep.checked = {n: int(v.size) for n, v in rec["outputs"].items()}
        if not g["error"]:
            rep.mismatches = compare_outputs(kp, ccfg, g["outputs"], rec["outputs"], command)
    tl = timeline.rtl_timeline(rec["trace"], rec["cycles"] or 0, activity_layout(ccfg),
                               ENGINES_BUILT, ccfg.dma_engines, ccfg.dma_queues)
    gtl = timeline.golden_timeline(g["sim"].timeline)
    rep.fractions = timeline.fractions(tl, rec["cycles"] or 0)
    rep.golden_fractions = timeline.fractions(gtl, g["cycles"])
    describe = describer(kp)
    png, svg, html = timeline.write_kernel_timeline(
        out_dir / "timeline",
        [("RTL", tl, rec["cycles"] or 0, describe),
         ("golden estimate", gtl, g["cycles"], describe)],
        title=f"{name} on {ccfg.name}")
    rep.files = {"png": png, "svg": svg, "html": html}
    if waves:
        vcds = sorted(Path(sim.build_dir).glob("*.vcd"), key=lambda p: p.stat().st_mtime)
        if vcds:
            dst = out_dir / f"{name}.vcd"
            shutil.copyfile(vcds[-1], dst)
            rep.files["vcd"] = str(dst)
    rep.seconds = {"golden": round(t1 - t0, 2), "rtl": round(t2 - t1, 2),
                   "to_first_cycle": round(rec["started"] - t0_wall, 2),
                   "cpu_to_first_cycle": round(rec["cpu_to_first_cycle"], 2),
                   "sim_wall": round(rec.get("wall_seconds", 0.0), 2)}
    (out_dir / "report.json").write_text(json.dumps(asdict(rep), indent=1, default=str))
    if not quiet:
        print(format_report(rep))
    return rep


def format_report(rep):
    """The report as text (what the command prints)."""
    lines = [f"kernel {rep.kernel} on {rep.config}: RTL {rep.rtl_cycles} cycles, golden "
             f"estimate {rep.golden_cycles} cycles"
             + (f" ({(rep.golden_cycles - rep.rtl_cycles) / rep.rtl_cycles:+.1%})"
                if rep.rtl_cycles and rep.golden_cycles else "")]
    lines.append(f"{'engine':<10}{'executing':>10}{'waiting':>9}   golden: executing waiting")
    for e, f in rep.fractions.items():
        gf = rep.golden_fractions.get(e, {})
        if not f.get("executing") and not f.get("waiting") and not gf:
            continue
        w = f"{f['waiting']:>9.0%}" if "waiting" in f else f"{'':>9}"
        gw = f"{gf['waiting']:.0%}" if "waiting" in gf else ""
        ge = f"{gf['executing']:.0%}" if gf else "-"
        lines.append(f"{e:<10}{f['executing']:>10.0%}{w}   {ge:>17} {gw:>7}")
    if rep.golden_error:
        lines.append(f"golden error: {rep.golden_error}")
    if rep.rtl_error:
        lines.append(f"RTL error: {rep.rtl_error}")
    for m in rep.mismatches:
        lines.append(f"MISMATCH {m}")
    if rep.checked and not rep.mismatches and not rep.golden_error:
        lines.append("outputs bit for bit equal to golden: " + ", ".join(
            f"{n} ({k} elements)" for n, k in rep.checked.items()))
    if rep.seconds:
        lines.append(f"core build {'reused (cache key unchanged)' if rep.build_cached else 'built'}"
                     f"; {rep.seconds['to_first_cycle']:.1f} s to the first simulated cycle "
                     f"({rep.seconds['cpu_to_first_cycle']:.1f} s of CPU), "
                     f"{rep.seconds['sim_wall']:.1f} s simulating")
    for k, v in rep.files.items():
        lines.append(f"{k}: {Path(v).relative_to(ROOT) if Path(v).is_relative_to(ROOT) else v}")
    lines.append("OK" if rep.ok else f"FAILED; reproduce: {rep.command}")
    return "\n".join(lines)


def _config(text):
    """``--config``: ``rtl.config.parse_config`` when it exists (preset names, overrides, TOML
    files), else a preset name."""
    import rtl.config as rc
    parse = getattr(rc, "parse_config", None)
    return parse(text) if parse else rc.get_preset(text)


def main(argv=None):
    """The command line (module docstring); returns the exit status."""
    import argparse
    import os
    ap = argparse.ArgumentParser(prog="python -m tb.core.run_kernel",
                                 description="Run a kernel on the golden ISA simulator and the "
                                             "RTL core; check its outputs bit for bit.")
    ap.add_argument("kernel", help="path/to/file.py:function (function(cfg) returns a Kernel)")
    ap.add_argument("--config", default=os.environ.get("CONFIG") or "small",
                    help="preset or config (default: $CONFIG, else small)")
    ap.add_argument("--waves", action="store_true", help="also write a VCD")
    a = ap.parse_args(argv)
    try:
        cfg = _config(a.config)
        rep = run_kernel(a.kernel, cfg, waves=a.waves)
    except (KernelSpecError, KernelBuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
