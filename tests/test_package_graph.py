# SPDX-License-Identifier: Apache-2.0
"""The package graph is one-way (issue #8).

Every tracked ``.py`` file under ``rtl/``, ``golden/``, ``tb/``, ``bench/``, ``synth/`` and
``tests/`` is parsed with :mod:`ast`; every import counts, at module level or inside a function
(``import x``, ``from x import y``, relative imports resolved, ``importlib.import_module("x")``
with a literal name):

- ``rtl`` imports ``rtl``, Amaranth, numpy and the standard library;
- ``rtl.config`` and ``rtl.isa`` (and ``rtl/__init__.py``, which importing them runs) import only
  the standard library, so that the golden model and the tools can read the parameters and the
  instruction encoding without the HDL;
- ``golden`` imports ``golden``, ``rtl.config``, ``rtl.isa``, numpy, ml_dtypes and the standard
  library (plotting lives in ``tb``);
- ``tb`` imports ``rtl``, ``golden``, ``tb`` (and any third-party package);
- ``bench`` and ``synth`` import ``rtl``, ``golden``, ``tb`` and themselves, not each other;
- ``tests`` import public APIs only: no ``__main__`` module, no ``_private`` module or name, and
  nothing from ``bench`` but ``bench.doc_tables`` (the regression must not depend on the
  benchmarks).

Across every package:

- **no import circle** between project modules. Every import counts here too, a function-level
  one included: deferring an import into a function hides a circle from the interpreter, not
  from the design. An import of ``a.b.c`` is an edge to ``a.b.c`` only (not to the packages
  ``a`` and ``a.b`` whose ``__init__`` the interpreter also runs), so a package's
  ``__init__`` may re-export its submodules, which import one another;
- **no** ``_private`` **name of another module**: neither ``from a.b import _x`` nor ``m._x``
  where ``m`` names a project module (``import a.b as m``, ``from a import b as m``), dunders
  excepted. A helper two modules share is public (in a package: public inside the package,
  re-exported or not). :data:`PRIVATE_ALLOWED` lists the accesses not fixed yet.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rtl", "golden", "tb", "bench", "synth", "tests")
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}

#: Project packages each package may import (``None``: any third-party package too).
PROJECT_ALLOWED = {
    "rtl": {"rtl"},
    "golden": {"golden"},            # + rtl.config, below
    "tb": {"rtl", "golden", "tb"},
    "bench": {"rtl", "golden", "tb", "bench"},
    "synth": {"rtl", "golden", "tb", "synth"},
    "tests": {"rtl", "golden", "tb", "synth", "tests"},
}
#: Third-party top-level packages allowed; a package not listed here may import any.
THIRD_PARTY_ALLOWED = {
    "rtl": {"amaranth", "numpy"},
    "rtl.config": set(),
    "golden": {"numpy", "ml_dtypes"},
}
#: Third-party packages single modules may import besides their rule's (none at present: the
#: engine-activity PNG, matplotlib, is ``tb.core.timeline``, and ``tb`` may import any).
MODULE_EXTRA = {}
#: ``(file, "module._name")`` private accesses across modules still to be made public (each
#: must still occur: fixing one fails the test until its entry is removed).
PRIVATE_ALLOWED = set()
#: Modules of ``rtl`` that ``golden`` may import: the parameters and the instruction encoding,
#: which import no HDL.
GOLDEN_RTL = {"rtl", "rtl.config", "rtl.isa"}
#: The one ``bench`` module tests may import: it generates the docs' tables and runs no benchmark
#: (``tests/test_doc_tables.py`` checks the tables are current).
TESTS_MAY_IMPORT = {"bench.doc_tables"}
#: Modules held to ``rtl.config``'s rule (standard library only).
CONFIG_MODULES = {"rtl", "rtl.config", "rtl.isa"}


def tracked_files():
    """Tracked ``.py`` files of the checked packages (every file on disk outside git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *PACKAGES], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        files = [ROOT / p for p in out.split("\0") if p.endswith(".py")]
    except (OSError, subprocess.CalledProcessError):
        files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                 if "__pycache__" not in p.parts]
    return sorted(f for f in files if f.exists())


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_project_module(dotted):
    p = ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def resolve_from(node, mod, is_package):
    """The absolute module of an ``ImportFrom`` in module ``mod``."""
    if not node.level:
        return node.module
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path):
    """``(line, module, name)`` for every import in ``path``: ``name`` is the name taken from
    ``module`` by ``from module import name`` (resolved to the submodule ``module.name`` when
    there is one in the project), ``None`` for ``import module``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    mod = module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, mod, path.name == "__init__.py")
            for a in node.names:
                sub = f"{base}.{a.name}"
                if a.name != "*" and is_project_module(sub):
                    out.append((node.lineno, sub, None))
                else:
                    out.append((node.lineno, base, a.name))
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name)
                       and node.func.id in ("import_module", "__import__")))):
            out.append((node.lineno, node.args[0].value, None))
    return out


def project_edges(path):
    """``(line, target, name, attribute)`` of every use of another project module in ``path``:
    imports (``name``: the name taken by ``from target import name``, ``None`` for a module)
    and, with ``attribute`` True, ``m._x`` on a name ``m`` bound to a project module by an
    import (only private attributes are reported)."""
    mod = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    out, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                out.append((node.lineno, a.name, None, False))
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(node, mod, path.name == "__init__.py")
            for a in node.names:
                sub = f"{base}.{a.name}"
                if a.name != "*" and is_project_module(sub):
                    aliases[a.asname or a.name] = sub
                    out.append((node.lineno, sub, None, False))
                else:
                    out.append((node.lineno, base, a.name, False))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and is_private(node.attr)):
            out.append((node.lineno, aliases[node.value.id], node.attr, True))
    return [e for e in out if e[1] and e[1] != mod and e[1].split(".")[0] in PACKAGES
            and is_project_module(e[1])]


def is_private(name):
    return name.startswith("_") and not name.startswith("__")


def import_graph(files=None):
    """``{module: {imported project module}}`` over ``files`` (default: every tracked one)."""
    graph = {}
    for path in files if files is not None else tracked_files():
        edges = graph.setdefault(module_name(path), set())
        edges.update(t for _l, t, _n, attr in project_edges(path) if not attr)
    return graph


def circles(graph):
    """The strongly connected components of more than one module (or a module importing
    itself), each sorted; iterative Tarjan."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in graph.get(v, ()):
                        out.append(sorted(comp))
    return sorted(out)


def private_uses(files=None):
    """``(file, line, "module._name")`` of every private name of another project module used
    in ``files`` (default: every tracked one)."""
    out = []
    for path in files if files is not None else tracked_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, target, name, _attr in project_edges(path):
            if name and is_private(name):
                out.append((rel, line, f"{target}.{name}"))
    return sorted(set(out))


def rule_of(mod):
    """The rule a module follows: ``"rtl.config"`` or its top-level package."""
    return "rtl.config" if mod in CONFIG_MODULES else mod.split(".")[0]


def forbidden(rule, target, name):
    """True when a module under ``rule`` must not import ``target`` (``name`` from it)."""
    top = target.split(".")[0]
    if top in STDLIB:
        return False
    if rule == "rtl.config":
        return True
    if top in PACKAGES:
        if rule == "golden" and target in GOLDEN_RTL and (target != "rtl" or name in ("config", "isa")):
            return False
        if top not in PROJECT_ALLOWED[rule] and not (rule == "tests"
                                                     and target in TESTS_MAY_IMPORT):
            return True
        if rule == "tests":
            parts = target.split(".") + ([name] if name else [])
            return any(p == "__main__" or (p.startswith("_") and not p.startswith("__"))
                       for p in parts)
        return False
    allowed = THIRD_PARTY_ALLOWED.get(rule)
    return allowed is not None and top not in allowed


def violations():
    out = []
    for path in tracked_files():
        rule = rule_of(module_name(path))
        extra = MODULE_EXTRA.get(module_name(path), set())
        rel = path.relative_to(ROOT).as_posix()
        for line, target, name in imports(path):
            if target.split(".")[0] not in extra and forbidden(rule, target, name):
                shown = f"{target}.{name}" if name and name.startswith("_") else target
                out.append(f"{rel}:{line}: {rule} must not import {shown}")
    return sorted(set(out), key=lambda v: (v.split(":")[0], int(v.split(":")[1]), v))


def test_files_found():
    mods = {module_name(p) for p in tracked_files()}
    assert {"rtl.config", "golden.formats", "tests.test_config"} <= mods


def test_package_graph():
    found = violations()
    if found:
        pytest.fail(f"{len(found)} import(s) against the package graph "
                    f"(rules: tests/test_package_graph.py):\n" + "\n".join(found), pytrace=False)


def test_no_import_circle():
    found = circles(import_graph())
    assert not found, ("modules importing one another in a circle (each line: one strongly "
                       "connected set; tests/test_package_graph.py docstring):\n"
                       + "\n".join(", ".join(c) for c in found))


def test_no_private_name_of_another_module():
    uses = private_uses()
    bad = [f"{f}:{line}: {what}" for f, line, what in uses if (f, what) not in PRIVATE_ALLOWED]
    assert not bad, ("private names of other modules (make them public, docstring of "
                     "tests/test_package_graph.py):\n" + "\n".join(bad))
    stale = PRIVATE_ALLOWED - {(f, what) for f, _l, what in uses}
    assert not stale, f"PRIVATE_ALLOWED entries no longer needed: {sorted(stale)}"


# --- the checker itself, on made-up imports -----------------------------------------------------

def test_rules():
    assert forbidden("rtl", "synth.blocks", None)
    assert forbidden("rtl", "tb.runner", None)
    assert not forbidden("rtl", "amaranth.hdl", "Module")
    assert forbidden("rtl", "cocotb", None)
    assert forbidden("rtl.config", "amaranth.hdl", "Module")
    assert forbidden("rtl.config", "rtl.fp.pipe", None)
    assert not forbidden("rtl.config", "dataclasses", "dataclass")
    assert not forbidden("golden", "rtl.config", "FPFormat")
    assert not forbidden("golden", "rtl", "config")
    assert forbidden("golden", "rtl", "fp")
    assert forbidden("golden", "rtl.fp.convert", None)
    assert forbidden("golden", "amaranth", None)
    assert not forbidden("golden", "ml_dtypes", None)
    assert forbidden("tb", "bench.bench_tensor_engine", "run")
    assert forbidden("tb", "synth.design", None)
    assert not forbidden("tb", "cocotb.triggers", "Timer")
    assert forbidden("bench", "synth.flow", None)
    assert forbidden("synth", "bench.unit_bench", None)
    assert not forbidden("synth", "tb.runner", None)
    assert forbidden("tests", "bench.bench_tensor_engine", "depths_for")
    assert not forbidden("tests", "bench.doc_tables", "render")
    assert forbidden("tests", "synth.__main__", "main")
    assert forbidden("tests", "golden.formats", "_convert_core")
    assert not forbidden("tests", "golden.formats", "__all__")
    assert not forbidden("tests", "synth.report", "update_readme")


def test_relative_import_resolution():
    tree = ast.parse("from . import blocks\nfrom .design import x\nfrom .. import rtl\n")
    nodes = [n for n in tree.body]
    assert resolve_from(nodes[0], "synth.flow", False) == "synth"
    assert resolve_from(nodes[1], "synth.flow", False) == "synth.design"
    assert resolve_from(nodes[1], "synth", True) == "synth.design"
    assert resolve_from(nodes[2], "tb.tensor.build", False) == "tb"


def test_test_files_have_unique_basenames():
    """pytest imports test files by basename (no packages under tests/): two files with one
    name make the second fail to collect ("import file mismatch")."""
    from collections import Counter
    from pathlib import Path
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], names


def test_circle_and_private_checks_on_planted_modules(tmp_path, monkeypatch):
    """The two checks find a planted circle (one edge inside a function) and planted private
    uses (``from``-import and attribute), and accept a package re-exporting its submodules."""
    pkg = tmp_path / "golden" / "planted"
    pkg.mkdir(parents=True)
    (tmp_path / "golden" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from golden.planted.a import f\n")
    (pkg / "a.py").write_text("from golden.planted import b\n\ndef f():\n    return b._g()\n")
    (pkg / "b.py").write_text("def _g():\n    from golden.planted.a import f\n    return f\n")
    (pkg / "c.py").write_text("from golden.planted.b import _g\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    files = sorted(pkg.glob("*.py"))
    assert circles(import_graph(files)) == [["golden.planted.a", "golden.planted.b"]]
    assert [(f, w) for f, _l, w in private_uses(files)] == [
        ("golden/planted/a.py", "golden.planted.b._g"), ("golden/planted/c.py", "golden.planted.b._g")]
