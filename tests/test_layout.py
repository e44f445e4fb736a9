# SPDX-License-Identifier: Apache-2.0
"""Every testbench directory follows the recipe of docs/adding-a-block.md: one file name per role.

A directory ``tb/<engine>/`` holds, for each role it has, the file of that role's name:

* ``harness.py``: the Verilator top (a ``wiring.Component``), built by ``build.py``;
* ``build.py``: the cached Verilator build, the only place outside ``tb/runner.py`` that makes a
  ``SimBuild``;
* ``driver.py``: the cocotb driver, the only place that subclasses ``tb.base.TB``;
* ``rig.py``: the amaranth.sim rig, imported by a test under ``tests/``;
* ``program.py``: stimulus and expected results;
* ``tb_<engine>.py`` / ``tb_<engine>_<what>.py``: the cocotb test modules, the only files with
  ``@cocotb.test`` (in a directory of several units, ``tb_<unit>.py``).

A Verilator testbench has ``build.py``, ``driver.py`` and a cocotb module (and ``harness.py``
unless the RTL top is run as it is); an amaranth.sim testbench has ``rig.py``. The checks read
the sources (``ast``), so :func:`test_planted_violations_are_found` runs them on a copy of
``tb/`` with violations planted.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: File names of the roles above.
ROLES = ("harness.py", "build.py", "driver.py", "rig.py", "program.py")
#: Names the roles had before they had one name each (a file may not take one again).
DEPRECATED = {
    "top.py": "harness.py", "fed.py": "rig.py / program.py", "dma_fed.py": "harness.py",
    "dma_fed_driver.py": "driver.py", "engine_sim.py": "rig.py", "function_sim.py": "rig.py",
    "tb_engine.py": "tb_<engine>.py", "tb_bench.py": "tb_<engine>_bench.py",
    "vectors.py": "program.py (or tb/fp/driver.py)", "units.py": "build.py",
    "common.py": "driver.py", "tb_harness_selftest.py": "tb/fp/tb_fp_harness.py",
    "top_level.py": "harness.py", "sim_top.py": "harness.py", "tb_driver.py": "driver.py",
}
#: Directories whose Verilator harness, build and driver are another directory's (the FP
#: units share tb/fp).
SHARED = {"fp_arith": "fp", "fp_convert": "fp"}
#: Directories that group several units: their cocotb modules are named per unit.
UNITS = {"fp_arith": ("mul", "fma", "add"), "fp_convert": ("convert", "widen")}
#: Verilator testbenches whose top is the RTL block itself (no harness.py).
TOP_IS_RTL = {"core": "rtl.core.neuroncore.NeuronCore", "multicore": "rtl.core.multicore.MultiCore"}
#: Directories with neither a Verilator build nor a rig of their own, and why.
NO_SIM = {"ap": "the AP generator runs bare in tb.amsim.SimBench (tests/test_ap_units.py); "
                "its bounded proof is formal.py"}
#: Directories without stimulus of their own (the shared FP harness).
NO_PROGRAM = {"fp": "a harness shared by tb/fp_arith and tb/fp_convert, which hold the vectors"}
#: Directories under tb/ that are not a block's testbench, and why (the global rules, one
#: SimBuild per build.py and @cocotb.test only in tb_*.py, still hold in them).
NOT_TESTBENCH = {"campaign": "the campaign runner (docs/campaigns.md): it runs other directories' "
                             "testbenches as tasks; its build.py is the per-node build cache"}


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def _base_names(cls):
    return [b.attr if isinstance(b, ast.Attribute) else b.id for b in cls.bases
            if isinstance(b, (ast.Attribute, ast.Name))]


def _classes(tb_root):
    """``{class name: (file, base names)}`` of every class defined under ``tb_root``."""
    out = {}
    for f in sorted(tb_root.rglob("*.py")):
        for node in ast.walk(_tree(f)):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (f, _base_names(node)))
    return out


def _tb_subclasses(classes):
    """Names of the classes derived from ``tb.base.TB`` (by name, transitively)."""
    subs, grown = set(), True
    while grown:
        grown = False
        for name, (_, bases) in classes.items():
            if name not in subs and any(b == "TB" or b in subs for b in bases):
                subs.add(name)
                grown = True
    return subs


def _has_cocotb_test(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                d = d.func if isinstance(d, ast.Call) else d
                if isinstance(d, ast.Attribute) and d.attr == "test" \
                        and isinstance(d.value, ast.Name) and d.value.id == "cocotb":
                    return True
    return False


def _calls(tree, name):
    return any(isinstance(n, ast.Call) and (getattr(n.func, "id", None) == name
                                            or getattr(n.func, "attr", None) == name)
               for n in ast.walk(tree))


def engine_dirs(tb_root):
    return sorted(d.name for d in tb_root.iterdir()
                  if d.is_dir() and (d / "__init__.py").exists() and d.name not in NOT_TESTBENCH)


def layout_problems(root: Path):
    """Every departure from the recipe under ``root/tb``, as texts (empty: none)."""
    tb_root, tests = root / "tb", root / "tests"
    problems = []
    classes = _classes(tb_root)
    tb_subs = _tb_subclasses(classes)
    test_text = "\n".join(f.read_text() for f in sorted(tests.rglob("test_*.py")))
    for f in sorted(tb_root.rglob("*.py")):
        rel, tree = f.relative_to(root), _tree(f)
        if f.name in DEPRECATED:
            problems.append(f"{rel}: deprecated role name, use {DEPRECATED[f.name]}")
        top = f.parent == tb_root
        if top and (f.name in ROLES or f.name.startswith("tb_")):
            problems.append(f"{rel}: a role file belongs in an engine directory tb/<engine>/")
        if _has_cocotb_test(tree) and not f.name.startswith("tb_"):
            problems.append(f"{rel}: @cocotb.test outside a tb_<engine>*.py module")
        if _calls(tree, "SimBuild") and f.name != "build.py" and rel.as_posix() != "tb/runner.py":
            problems.append(f"{rel}: a SimBuild outside build.py")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in tb_subs \
                    and classes[node.name][0] == f and f.name != "driver.py":
                problems.append(f"{rel}: TB subclass {node.name} outside driver.py")
    for d in engine_dirs(tb_root):
        path = tb_root / d
        has = {r for r in ROLES if (path / r).exists()}
        mods = sorted(p.name for p in path.glob("tb_*.py"))
        prefixes = [f"tb_{u}" for u in UNITS.get(d, (d,))]
        for m in mods:
            stem = m[:-3]
            if not any(stem == p or stem.startswith(p + "_") for p in prefixes):
                problems.append(f"tb/{d}/{m}: a cocotb module is named "
                                f"{' or '.join(p + '[_<what>].py' for p in prefixes)}")
        shared = SHARED.get(d)
        if shared is not None:
            sh = tb_root / shared
            if not all((sh / r).exists() for r in ("harness.py", "build.py", "driver.py")):
                problems.append(f"tb/{d}: its shared harness tb/{shared} lacks "
                                "harness.py, build.py or driver.py")
        if "harness.py" in has and "build.py" not in has:
            problems.append(f"tb/{d}: harness.py without build.py")
        if "build.py" in has:
            if "harness.py" not in has and d not in TOP_IS_RTL:
                problems.append(f"tb/{d}: build.py without harness.py (or a TOP_IS_RTL entry)")
            if "driver.py" not in has:
                problems.append(f"tb/{d}: a Verilator build without driver.py")
            if not mods:
                problems.append(f"tb/{d}: a Verilator build without a tb_{d}.py cocotb module")
        if "driver.py" in has:
            drv = [n.name for n in ast.walk(_tree(path / "driver.py"))
                   if isinstance(n, ast.ClassDef) and n.name in tb_subs]
            if not drv:
                problems.append(f"tb/{d}/driver.py: defines no subclass of tb.base.TB")
        if "harness.py" in has:
            comps = [n for n in ast.walk(_tree(path / "harness.py")) if isinstance(n, ast.ClassDef)
                     and "Component" in _base_names(n)]
            if not comps:
                problems.append(f"tb/{d}/harness.py: defines no wiring.Component")
        if "rig.py" in has and f"tb.{d}.rig" not in test_text:
            problems.append(f"tb/{d}/rig.py: no test under tests/ imports tb.{d}.rig")
        if not ({"build.py", "rig.py"} & has) and shared is None and d not in NO_SIM:
            problems.append(f"tb/{d}: neither build.py (Verilator) nor rig.py (amaranth.sim)")
        if mods and not ({"build.py"} & has) and shared is None:
            problems.append(f"tb/{d}: cocotb modules without a build.py")
        if "program.py" not in has and d not in NO_PROGRAM:
            problems.append(f"tb/{d}: no program.py (stimulus and expected results)")
    for table in (SHARED, UNITS, TOP_IS_RTL, NO_SIM, NO_PROGRAM):
        for d in table:
            if d not in engine_dirs(tb_root):
                problems.append(f"tests/test_layout.py names tb/{d}, which does not exist")
    return problems


def test_every_engine_directory_follows_the_recipe():
    assert layout_problems(ROOT) == []


def test_the_engine_directories_are_the_known_ones():
    """A new directory under tb/ is a new engine: it is checked above like the others (this
    list only makes its arrival visible)."""
    assert set(engine_dirs(ROOT / "tb")) >= {"fp", "fp_arith", "fp_convert", "tensor", "mem",
                                             "dma", "vector", "scalar", "core", "ap"}


def test_unit_names_are_the_fp_build_table():
    from tb.fp.build import UNITS as FP_UNITS
    assert {u for us in UNITS.values() for u in us} == set(FP_UNITS)


def test_planted_violations_are_found(tmp_path):
    """The checks fail on a copy of tb/ with one violation of each kind planted."""
    shutil.copytree(ROOT / "tb", tmp_path / "tb", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", tmp_path / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert layout_problems(tmp_path) == []
    tb = tmp_path / "tb"
    (tb / "vector" / "harness.py").rename(tb / "vector" / "top.py")
    (tb / "dma" / "tb_dma_bench.py").rename(tb / "dma" / "tb_bench.py")
    (tb / "scalar" / "build.py").unlink()
    (tb / "vectors.py").write_text("")
    (tb / "tensor" / "tb_tensor.py").write_text(
        (tb / "tensor" / "tb_tensor.py").read_text() + "\n\nclass Extra(EngineDriver):\n    pass\n")
    (tb / "tensor" / "program.py").write_text(
        (tb / "tensor" / "program.py").read_text()
        + "\n\n@cocotb.test()\nasync def stray(dut):\n    pass\n")
    (tb / "newengine").mkdir()
    (tb / "newengine" / "__init__.py").write_text("")
    got = "\n".join(layout_problems(tmp_path))
    for want in ("tb/vector/top.py: deprecated role name",
                 "tb/vector: build.py without harness.py",
                 "tb/dma/tb_bench.py: deprecated role name",
                 "tb/dma/tb_bench.py: a cocotb module is named tb_dma[_<what>].py",
                 "tb/scalar: harness.py without build.py",
                 "tb/vectors.py: deprecated role name",
                 "tb/tensor/tb_tensor.py: TB subclass Extra outside driver.py",
                 "tb/tensor/program.py: @cocotb.test outside a tb_<engine>*.py module",
                 "tb/newengine: neither build.py (Verilator) nor rig.py (amaranth.sim)",
                 "tb/newengine: no program.py"):
        assert want in got, f"not reported: {want}\nreported:\n{got}"
