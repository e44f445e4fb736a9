# SPDX-License-Identifier: Apache-2.0
"""Every constant has one home (issue 36): a second literal definition fails.

The homes are ``rtl/isa.py`` (error codes and their width, dtype codes, opcodes, the instruction,
AP and DMA-descriptor encodings) and ``rtl/config.py`` (parameters and fixed widths such as
``LANE_BITS``), plus :data:`EXTRA_HOMES` for the few constants an HDL module owns. Every tracked
``.py`` file under ``rtl/``, ``golden/``, ``tb/``, ``bench/`` and ``synth/`` is parsed with
:mod:`ast`; at module and class level, an assignment of a *literal* (a number, a string, a
tuple/list/set/dict of literals, arithmetic on literals, ``range(...)`` of literals) fails when:

- its name is a public constant of a home (``E_OPCODE = 0x01`` outside ``rtl/isa.py``);
- its name is an error code ``E_*`` (every error code lives in ``rtl/isa.py``);
- its name is ``OP_*`` and its value an instruction opcode of ``rtl/isa.py`` (codes 0x10 and
  up: the tensor engine's command codes and the DMA descriptor ops start at 0 and are other
  name spaces).

Anywhere (any scope), a literal dict mapping dtype codes to their names (``{0: "fp32", ...}``)
outside ``rtl/isa.py`` fails too: derive it from ``rtl.isa.DTYPES``. Importing a constant, also
under another name (``from rtl.isa import DMA_OP_COPY as OP_COPY``), is the way to re-export it.
"""

import ast

import pytest

from rtl import config, isa
from tests.test_package_graph import ROOT, tracked_files

#: The homes of the checked constants.
HOMES = {"rtl/isa.py": isa, "rtl/config.py": config}
#: Constants whose home is a module that imports the HDL: name -> home.
EXTRA_HOMES = {"DESC_BITS": "rtl/dma/descriptor.py"}
#: Packages whose files are checked.
CHECKED = ("rtl", "golden", "tb", "bench", "synth")
#: Files not checked (none: every file imports its constants).
EXEMPT = ()


def _is_literal(node):
    """True when ``node`` is a literal value: a constant, a container of literals, arithmetic
    on literals or ``range`` of literals."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) \
            and all(_is_literal(v) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_literal(node.left) and _is_literal(node.right)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id == "range" and not node.keywords
                and all(_is_literal(a) for a in node.args))
    return False


def _literal_value(node):
    """The value of a literal node (``range`` as a tuple); ``None`` if it cannot be computed."""
    try:
        if isinstance(node, ast.Call):
            return tuple(range(*(ast.literal_eval(a) for a in node.args)))
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        if isinstance(node, ast.BinOp):
            try:
                return eval(compile(ast.Expression(node), "<literal>", "eval"), {"__builtins__": {}})
            except (NameError, TypeError, ValueError, ArithmeticError):   # names, not literals
                return None
        return None


def _pairs(target, value):
    """``(name, value node)`` of an assignment, tuple targets paired with tuple values or
    ``range`` elements (``value`` ``None`` when the value is not a literal)."""
    if isinstance(target, ast.Name):
        return [(target.id, value if _is_literal(value) else None)]
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            return [p for t, v in zip(target.elts, value.elts) for p in _pairs(t, v)]
        vals = _literal_value(value) if _is_literal(value) else None
        if isinstance(vals, tuple) and len(vals) == len(target.elts):
            return [p for t, v in zip(target.elts, vals) for p in _pairs(t, ast.Constant(v))]
    return []


def _assignments(tree):
    """``(line, name, literal value node)`` of the literal assignments at module and class
    level (an ``if``/``try`` block at those levels included)."""
    out = []

    def walk(body):
        for node in body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    out.extend((node.lineno, n, v) for n, v in _pairs(t, node.value) if v is not None)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                out.extend((node.lineno, n, v) for n, v in _pairs(node.target, node.value)
                           if v is not None)
            elif isinstance(node, ast.ClassDef):
                walk(node.body)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                walk(node.body)
                walk(getattr(node, "orelse", []))
    walk(tree.body)
    return out


def _literal_like(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, str)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_literal_like(v) for v in value)
    if isinstance(value, dict):
        return all(_literal_like(k) and _literal_like(v) for k, v in value.items())
    return False


def protected():
    """``{name: home}``: every public constant defined at module level in a home (its runtime
    value an int, a string or a container of them), plus :data:`EXTRA_HOMES`."""
    out = {}
    for home, mod in HOMES.items():
        tree = ast.parse((ROOT / home).read_text(), filename=home)
        names = set()
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        for n in names:
            if not n.startswith("_") and n.isupper() and _literal_like(getattr(mod, n, None)):
                out[n] = home
    out.update(EXTRA_HOMES)
    return out


#: Opcodes of rtl/isa.py that name an instruction (0x10 and up, see the module docstring).
INSTR_OPCODES = frozenset(c for c in isa.OPS_BY_CODE if c >= 0x10) \
    | {isa.OP_ACT_TENSOR_SCALAR, isa.OP_ACT_COPY}


def _dtype_dicts(tree):
    """Lines of literal dicts mapping two or more dtype codes to their :data:`rtl.isa.DTYPES`
    names."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and node.keys:
            hits = sum(1 for k, v in zip(node.keys, node.values)
                       if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)
                       and isinstance(k.value, int) and not isinstance(k.value, bool)
                       and 0 <= k.value < len(isa.DTYPES) and v.value == isa.DTYPES[k.value])
            if hits >= 2:
                lines.append(node.lineno)
    return lines


def duplicates(sources, names):
    """Messages ``file:line: NAME defined again (home: ...)`` for ``sources`` (``(path
    relative to the repository, text)`` pairs), ``names`` being :func:`protected`'s map."""
    out = []
    for rel, text in sources:
        if EXEMPT and rel.startswith(EXEMPT):
            continue
        tree = ast.parse(text, filename=rel)
        for line, name, value in _assignments(tree):
            home = names.get(name)
            if home is not None and home != rel:
                out.append(f"{rel}:{line}: {name} defined again (home: {home}); import it")
            elif home is None and name.startswith("E_") and rel != "rtl/isa.py":
                out.append(f"{rel}:{line}: error code {name} defined outside rtl/isa.py; "
                           f"add it to the error table there and import it")
            elif (home is None and name.startswith("OP_")
                  and isinstance(_literal_value(value), int)
                  and _literal_value(value) in INSTR_OPCODES):
                out.append(f"{rel}:{line}: opcode {name} defined outside rtl/isa.py (home of "
                           f"every instruction opcode); import it")
        if rel != "rtl/isa.py":
            out += [f"{rel}:{line}: dtype code -> name table (home: rtl/isa.py DTYPES); derive "
                    f"it from rtl.isa.DTYPES" for line in _dtype_dicts(tree)]
    return out


def checked_sources():
    """``(path, text)`` of every checked file."""
    return [(p.relative_to(ROOT).as_posix(), p.read_text()) for p in tracked_files()
            if p.relative_to(ROOT).parts[0] in CHECKED]


def test_homes_found():
    names = protected()
    for n in ("E_OPCODE", "E_AP_FORM", "ERROR_BITS", "ERRORS", "DTYPES", "OP_TENSOR_TENSOR",
              "OP_ACT_COPY", "DESC_BYTES", "DESC_BITS", "LANE_BITS", "AP_STEP_BITS"):
        assert n in names, n
    assert len(checked_sources()) > 50


def test_one_definition():
    found = duplicates(checked_sources(), protected())
    if found:
        pytest.fail(f"{len(found)} constant(s) defined outside their home "
                    f"(tests/test_constants.py):\n" + "\n".join(found), pytrace=False)


# --- the checker itself, on planted definitions ------------------------------------------------

@pytest.mark.parametrize("src, what", [
    ("E_OPCODE = 0x01\n", "E_OPCODE defined again"),
    ("E_OK, E_SEM = 0x00, 0x08\n", "E_SEM defined again"),
    ("E_NEW = 0x10\n", "error code E_NEW"),
    ("(A, B, E_X) = range(3)\n", "error code E_X"),
    ("class C:\n    LANE_BITS = 32\n", "LANE_BITS defined again"),
    ("DESC_BITS = 512\n", "DESC_BITS defined again"),
    ("OP_FOO = 0x20\n", "opcode OP_FOO"),
    ("NAMES = {0: 'fp32', 1: 'tf32', 2: 'bf16'}\n", "dtype code -> name table"),
    ("def f():\n    return {2: 'bf16', 3: 'fp16'}\n", "dtype code -> name table"),
    ("ERROR_BITS = 4 * 2\n", "ERROR_BITS defined again"),
])
def test_plant_fails(src, what):
    found = duplicates([("golden/planted.py", src)], protected())
    assert any(what in f for f in found), (src, found)


@pytest.mark.parametrize("src", [
    "from rtl.isa import E_OPCODE\n",
    "from rtl.isa import DMA_OP_COPY as OP_COPY\n",
    "OP_LOAD, OP_MATMUL = 0, 1\n",                 # an engine's own command codes
    "X = {code: name for code, name in enumerate(DTYPES)}\n",
    "E_LIST = compute()\n",
])
def test_import_passes(src):
    assert duplicates([("golden/planted.py", src)], protected()) == []


def test_home_passes_and_isasim_is_checked():
    assert duplicates([("rtl/isa.py", "E_OPCODE = 0x01\n")], protected()) == []
    assert duplicates([("golden/isasim/errors.py", "E_OPCODE = 0x01\n")], protected())
