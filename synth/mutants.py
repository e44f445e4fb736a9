# SPDX-License-Identifier: Apache-2.0
"""Mutation testing of the RTL (``make mutate``, :mod:`synth.mutate`): the mutants and their runs.

Method (docs/mutation.md): find mutation sites with :mod:`ast` in the functions of a block's
RTL files that run at elaboration time (every ``elaborate`` plus the hardware-building helpers of
:data:`HW_HELPERS`), apply ONE change per mutant by replacing the exact source segment (byte
offsets of the AST node; comments and formatting stay), regenerate the block's Verilog with the
registry's ``build`` and drop mutants whose Verilog is identical to the original, then run the
tests the registry maps to the block (``synth/blocks.py``: ``Block.tests``) in a per-worker copy
of the tree that keeps its Verilator builds between mutants.

The command line is :mod:`synth.mutate`; the campaign kind :mod:`synth.mutate_campaign`.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "mutate"

#: Module-level (or method) functions, besides every ``elaborate``, that build hardware at
#: elaboration time, per RTL file. Constructors, layouts and latency code are not mutated.
HW_HELPERS = {
    "rtl/fp/fused_add.py": ("lzc", "shl_top"),
    "rtl/fp/pipe.py": ("stage", "delay"),
    "rtl/fp/unpack.py": ("_decode",),
    "rtl/fp/convert.py": ("_cases",),
    "rtl/fp/prng.py": ("xorwow_step", "xorwow_reset_state", "_fmix32"),
    "rtl/tensor/hier.py": ("place_leaf",),
    "rtl/tensor/dot.py": ("_decode",),
    "rtl/tensor/psum.py": ("_adders",),
    "rtl/tensor/sparse.py": ("group_bus", "tag_select"),
    "rtl/mem/arbiter.py": ("first_one", "round_robin", "rr_pick", "build"),
    "rtl/mem/ap.py": ("_step",),
    "rtl/mem/apport.py": ("_gen_input", "_row_addr"),
    "rtl/core/engine_decode.py": ("fill",),
    "rtl/core/sequencer.py": ("opcode_check",),
    "rtl/core/tensor_decode.py": ("decode_ap",),
    "rtl/scalar/engine.py": ("_byte_range",),
    "rtl/scalar/function.py": ("_to_fp32",),
    "rtl/vector/fu.py": ("u24_to_fp32",),
}

#: Binary operator swaps: AST operator class -> (source token, replacement token).
BINOPS = {
    ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
    ast.BitXor: ("^", "|"), ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<"),
    ast.Mult: ("*", "+"),
}
#: Comparison swaps.
CMPOPS = {
    ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="), ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
}
#: Calls whose integer arguments are shapes or widths, not hardware values (not mutated).
SHAPE_CALLS = {"Signal", "range", "signed", "unsigned", "Const", "StructLayout", "Memory"}

OPERATORS = ("binop", "cmp", "const_inc", "const_dec", "mux_swap", "drop_eq", "negate_if",
             "drop_invert")

STATUSES = ("killed", "timed_out", "survived", "equivalent_claimed", "claim_broken",
            "identical_verilog", "failed_to_elaborate", "not_run")


# ------------------------------------------------------------------------------------------------
# sites and mutants
# ------------------------------------------------------------------------------------------------

@dataclass
class Mutant:
    """One single-change mutant of one file. ``start``/``end`` are byte offsets in the file."""
    file: str
    func: str
    operator: str
    line: int
    line_text: str          # stripped text of the source line where the change starts
    occurrence: int         # index among sites with the same (file, func, operator, line_text)
    start: int
    end: int
    original: str
    mutated: str

    @property
    def key(self):
        """The readable identity: survives edits elsewhere in the file."""
        return f"{self.file}:{self.func}:{self.operator}:`{self.line_text}`#{self.occurrence}"

    @property
    def id(self):
        return hashlib.sha1(self.key.encode()).hexdigest()[:10]

    def apply(self, source: bytes) -> bytes:
        return source[:self.start] + self.mutated.encode() + source[self.end:]

    def diff(self, source: bytes) -> str:
        a = source.decode().splitlines(keepends=True)
        b = self.apply(source).decode().splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, f"a/{self.file}", f"b/{self.file}", n=2))


class _Offsets:
    """Byte offsets of (lineno, col_offset) pairs; AST columns are UTF-8 byte offsets."""

    def __init__(self, source: bytes):
        self.src = source
        self.starts = [0]
        for ln in source.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(ln))
        self.lines = source.decode().splitlines()

    def start(self, node):
        return self.starts[node.lineno - 1] + node.col_offset

    def end(self, node):
        return self.starts[node.end_lineno - 1] + node.end_col_offset

    def text(self, a, b):
        return self.src[a:b].decode()


def _blank_comments(gap: str) -> str:
    """``gap`` with comments replaced by spaces (same length)."""
    return re.sub(r"#[^\n]*", lambda mt: " " * len(mt.group()), gap)


def _find_op(gap: str, tok: str):
    """Offset of the operator token ``tok`` in the text between two operands (not part of a
    longer operator), or None."""
    g = _blank_comments(gap)
    for mt in re.finditer(re.escape(tok), g):
        a, b = mt.start(), mt.end()
        before = g[a - 1] if a else " "
        after = g[b] if b < len(g) else " "
        if before in "<>=!*/" or after in "<>=*/":
            continue
        return a
    return None


def _call_name(node):
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _is_domain_add(node):
    """``m.d.<domain> += ...``"""
    return (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Attribute)
            and isinstance(node.target.value, ast.Attribute) and node.target.value.attr == "d")


def _is_eq_call(node):
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "eq")


def _functions(tree, names):
    """Top-level functions and methods whose name is in ``names`` (with their nested code)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            yield node


def _parents(root):
    par = {}
    for n in ast.walk(root):
        for c in ast.iter_child_nodes(n):
            par[c] = n
    return par


def find_mutants(source: bytes, file: str = "<src>", functions=None):
    """Every single-change mutant of ``source`` in the functions named ``functions`` (default:
    ``elaborate`` plus ``HW_HELPERS[file]``), in source order."""
    names = set(functions) if functions is not None else {"elaborate", *HW_HELPERS.get(file, ())}
    tree = ast.parse(source)
    off = _Offsets(source)
    raw = []        # (func, operator, lineno, start, end, original, mutated)
    seen_nodes = set()

    def add(func, op, lineno, a, b, new):
        raw.append((func, op, lineno, a, b, off.text(a, b), new))

    for fn in _functions(tree, names):
        par = _parents(fn)
        for node in ast.walk(fn):
            if id(node) in seen_nodes:
                continue
            seen_nodes.add(id(node))
            if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
                tok, new = BINOPS[type(node.op)]
                a, b = off.end(node.left), off.start(node.right)
                k = _find_op(off.text(a, b), tok)
                if k is not None:
                    s = a + len(off.text(a, b)[:k].encode())
                    ln = source[:s].count(b"\n") + 1
                    add(fn.name, "binop", ln, s, s + len(tok), new)
            elif isinstance(node, ast.Compare):
                left = node.left
                for op, right in zip(node.ops, node.comparators):
                    if type(op) in CMPOPS:
                        tok, new = CMPOPS[type(op)]
                        a, b = off.end(left), off.start(right)
                        k = _find_op(off.text(a, b), tok)
                        if k is not None:
                            s = a + len(off.text(a, b)[:k].encode())
                            ln = source[:s].count(b"\n") + 1
                            add(fn.name, "cmp", ln, s, s + len(tok), new)
                    left = right
            elif (isinstance(node, ast.Constant) and type(node.value) is int):
                p = par.get(node)
                if isinstance(p, ast.Call) and _call_name(p) in SHAPE_CALLS:
                    continue
                if isinstance(p, ast.keyword):
                    continue
                a, b = off.start(node), off.end(node)
                add(fn.name, "const_inc", node.lineno, a, b, str(node.value + 1))
                if node.value > 0:
                    add(fn.name, "const_dec", node.lineno, a, b, str(node.value - 1))
            elif isinstance(node, ast.Call):
                name = _call_name(node)
                if name == "Mux" and len(node.args) == 3 and not node.keywords:
                    x, y = node.args[1], node.args[2]
                    a, b = off.start(x), off.end(y)
                    xt, yt = off.text(a, off.end(x)), off.text(off.start(y), b)
                    mid = off.text(off.end(x), off.start(y))
                    add(fn.name, "mux_swap", node.lineno, a, b, yt + mid + xt)
                elif (name in ("If", "Elif") and isinstance(node.func, ast.Attribute)
                      and len(node.args) == 1):
                    c = node.args[0]
                    a, b = off.start(c), off.end(c)
                    add(fn.name, "negate_if", node.lineno, a, b, f"~({off.text(a, b)})")
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
                a, b = off.start(node), off.end(node)
                opnd = off.text(off.start(node.operand), off.end(node.operand))
                inner = off.text(a, off.start(node.operand))     # "~" plus any "(" ...
                opening = inner.count("(")
                add(fn.name, "drop_invert", node.lineno, a, b,
                    "(" * opening + opnd + off.text(off.end(node.operand), b))
            elif _is_domain_add(node):
                v = node.value
                if isinstance(v, (ast.List, ast.Tuple)):
                    elts = v.elts
                    for i, e in enumerate(elts):
                        if not _is_eq_call(e):
                            continue
                        if len(elts) == 1:
                            a, b = off.start(e), off.end(e)
                        elif i + 1 < len(elts):
                            a, b = off.start(e), off.start(elts[i + 1])
                        else:
                            a, b = off.end(elts[i - 1]), off.end(e)
                        add(fn.name, "drop_eq", e.lineno, a, b, "")
                elif _is_eq_call(v):
                    a, b = off.start(node), off.end(node)
                    add(fn.name, "drop_eq", node.lineno, a, b, "pass")

    raw.sort(key=lambda r: (r[3], r[1], r[6]))
    out, count = [], {}
    for func, op, ln, a, b, orig, new in raw:
        text = off.lines[ln - 1].strip()
        k = (func, op, text)
        count[k] = count.get(k, 0) + 1
        out.append(Mutant(file, func, op, ln, text, count[k], a, b, orig, new))
    return out


#: The tree as it was when the run started (path -> bytes). Mutants are byte offsets into these
#: originals, and workers copy from them, so editing the checkout during a run cannot mix a
#: mutant with newer code.
_SNAPSHOT: dict = {}


def original(f):
    """The bytes of ``f`` (relative to ROOT) as of the first time this run read it."""
    if f not in _SNAPSHOT:
        _SNAPSHOT[f] = (ROOT / f).read_bytes()
    return _SNAPSHOT[f]


def block_mutants(block, root=ROOT):
    """Every mutant of every source file of ``block``."""
    out = []
    for f in block.sources:
        text = original(f) if Path(root) == ROOT else (Path(root) / f).read_bytes()
        out += find_mutants(text, f)
    return out


def sample(mutants, seed, block_name=""):
    """``mutants`` in a deterministic random order for ``seed`` (and the block name)."""
    order = sorted(mutants, key=lambda m: m.id)
    random.Random(f"{seed}/{block_name}").shuffle(order)
    return order


# ------------------------------------------------------------------------------------------------
# equivalence claims
# ------------------------------------------------------------------------------------------------

def load_claims():
    """``{mutant id: reason}`` from ``synth/mutants_equivalent.py``."""
    from synth.mutants_equivalent import EQUIVALENT
    return dict(EQUIVALENT)


def check_claims(claims):
    """Problems with the claims table (id format, one-line non-empty reason)."""
    bad = []
    for k, v in claims.items():
        if not re.fullmatch(r"[0-9a-f]{10}", k):
            bad.append(f"{k!r}: id must be 10 hex digits")
        if not isinstance(v, str) or not v.strip() or "\n" in v:
            bad.append(f"{k!r}: reason must be one non-empty line")
    return bad


# ------------------------------------------------------------------------------------------------
# workers: a copy of the tree each, its Verilator builds kept across mutants
# ------------------------------------------------------------------------------------------------

def tracked_files(root=ROOT):
    r = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    return [f for f in r.stdout.decode().split("\0") if f]


class Worker:
    """``build/mutate/work/<n>``: a copy of the tracked tree; one mutant applied at a time."""

    def __init__(self, n, files):
        self.dir = OUT / "work" / str(n)
        # No build tricks: a make wrapper that gave unchanged generated files their old mtimes
        # (to recompile less) let a mutant run on the previous build's objects and survive.
        stale = self.dir / ".mutate-bin"
        if stale.exists():
            shutil.rmtree(stale)
        for f in files:
            if not (ROOT / f).is_file():
                continue
            text, dst = original(f), self.dir / f
            if dst.exists() and dst.read_bytes() == text:
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(text)

    def apply(self, mutant):
        path = self.dir / mutant.file
        path.write_bytes(mutant.apply(original(mutant.file)))

    def restore(self, mutant):
        (self.dir / mutant.file).write_bytes(original(mutant.file))

    def _run(self, cmd, timeout, env=None):
        """``(returncode or None on timeout, seconds, output tail)``; the process group is
        killed on timeout."""
        t0 = time.monotonic()
        e = dict(os.environ, **(env or {}))
        e.pop("PYTHONPATH", None)
        p = subprocess.Popen(cmd, cwd=self.dir, env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            rc = None
        return rc, time.monotonic() - t0, out.decode(errors="replace")[-3000:]

    def verilog(self, block, preset):
        """Hash of the block's Verilog in this tree, or ``(None, error)``."""
        cmd = [sys.executable, "-m", "synth.mutate", "--emit", block.name, "--preset", preset]
        rc, _, out = self._run(cmd, timeout=600)
        m = re.search(r"^VERILOG-SHA1 ([0-9a-f]{40})$", out, re.M)
        if rc == 0 and m:
            return m.group(1), None
        return None, out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"

    def tests(self, block, preset, seed, timeout):
        # the make-test selection: a block's test file may also hold make test-full's long
        # runs (tests/test_core.py: the 10^5-instruction shards), which a mutant must not wait on
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "-p", "no:randomly", "-m", "not full", f"--seed={seed}", *block.tests]
        rc, secs, out = self._run(cmd, timeout, env={"CONFIG": preset})
        if rc is None:
            # A build killed half-way may leave objects that look up to date: drop them.
            for pat in ("*.o", "*.a", "*.gch"):
                for f in (self.dir / "build" / "sim").rglob(pat):
                    f.unlink(missing_ok=True)
        return rc, secs, out


def emit_hash(block_name, preset):
    """Print the SHA-1 of the block's Verilog (the ``all`` variant if there is one, else every
    variant), built from the tree this process imports."""
    from rtl.config import parse_config
    from synth.blocks import get_block
    from synth.design import as_design, emit_verilog
    import warnings
    warnings.filterwarnings("ignore")
    block = get_block(block_name)
    cfg = parse_config(preset)
    vs = block.variants(cfg) if block.variants else (None,)
    if "all" in vs:
        vs = ("all",)
    h = hashlib.sha1()
    for v in vs:
        top = f"{block.name}_{v}" if v else block.name
        h.update(emit_verilog(as_design(block.build(cfg, v)), top).encode())
    print(f"VERILOG-SHA1 {h.hexdigest()}")


# ------------------------------------------------------------------------------------------------
# one block
# ------------------------------------------------------------------------------------------------

def _log(*a):
    print(*a, flush=True)


def _pool_map(workers, fn, items):
    """``fn(worker, item)`` for every item, each on a free worker, results in item order."""
    lock = threading.Lock()
    free = list(workers)

    def run(item):
        with lock:
            w = free.pop()
        try:
            return fn(w, item)
        finally:
            with lock:
                free.append(w)
    with ThreadPoolExecutor(len(workers)) as ex:
        return list(ex.map(run, items))


def plan_block(block, workers, *, n, seed, preset, claims):
    """Which mutants of ``block`` are tested: the claimed ones, then the sample in order (seed
    ``seed``) until ``n`` have changed Verilog. Returns ``{"block", "sites", "ref" (the
    original's Verilog hash), "elaborated": [[id, status, error or None], ...] in sample order,
    "chosen": [id, ...]}`` (statuses: ``changed``, ``identical_verilog``,
    ``failed_to_elaborate``, ``not_run``)."""
    allm = block_mutants(block)
    order = sample(allm, seed, block.name)
    claimed = [m for m in order if m.id in claims]
    rest = [m for m in order if m.id not in claims]
    ref, err = workers[0].verilog(block, preset)
    if ref is None:
        raise SystemExit(f"mutate: {block.name}: the original does not elaborate: {err}")

    def elaborate(w, m):
        w.apply(m)
        try:
            h, err = w.verilog(block, preset)
        finally:
            w.restore(m)
        if h is None:
            return "failed_to_elaborate", err
        return ("identical_verilog", None) if h == ref else ("changed", None)

    chosen, elaborated = [], []
    todo = claimed + rest
    i = 0
    target = len(claimed) + n
    while i < len(todo) and len(chosen) < target:
        batch = todo[i:i + len(workers)]
        i += len(batch)
        for m, (st, err) in zip(batch, _pool_map(workers, elaborate, batch)):
            if st == "changed" and len(chosen) < target:
                chosen.append(m.id)
            elif st == "changed":
                st = "not_run"
            elaborated.append([m.id, st, err])
    return {"block": block.name, "sites": len(allm), "ref": ref, "elaborated": elaborated,
            "chosen": chosen}


def test_mutant(worker, block, mutant, *, preset, seed, timeout, claims):
    """Run ``block``'s tests on ``mutant`` in ``worker``: ``(status, seconds)``, status one of
    ``killed``, ``timed_out``, ``survived`` or, for a claimed mutant, ``equivalent_claimed`` /
    ``claim_broken``."""
    worker.apply(mutant)
    try:
        rc, secs, _ = worker.tests(block, preset, seed, timeout)
    finally:
        worker.restore(mutant)
    st = "timed_out" if rc is None else "survived" if rc == 0 else "killed"
    if mutant.id in claims:
        st = "equivalent_claimed" if st == "survived" else "claim_broken"
    return st, secs


def warm_up(worker, block, preset, seed):
    """Run the original's tests in ``worker`` (builds its Verilator models); returns the seconds
    they took and the per-mutant time limit, 1.5 x that plus a minute (the first run of a
    worker builds from nothing, a mutant rebuilds only the design; a hang costs 3 x)."""
    rc, secs, out = worker.tests(block, preset, seed, timeout=3600)
    if rc != 0:
        raise SystemExit(f"mutate: {block.name}: the tests fail on the original design "
                         f"(exit {rc}):\n{out}")
    return secs, 1.5 * secs + 60


def block_report(block, plan, tested, *, n, seed, preset, claims, base, timeout, wall):
    """The result dict written to ``build/mutate/<block>.json`` from the ``plan``
    (:func:`plan_block`) and ``tested`` (``{id: (status, seconds)}`` of the chosen mutants)."""
    by_id = {m.id: m for m in block_mutants(block)}
    src = {f: original(f) for f in block.sources}
    mutants = []
    for mid, st, err in plan["elaborated"]:
        m = by_id[mid]
        r = {"status": st, "seconds": 0.0}
        if err:
            r["error"] = err
        if st == "changed":
            t = tested.get(mid)
            r = {"status": t[0], "seconds": round(t[1], 1)} if t else {"status": "not_run",
                                                                       "seconds": 0.0}
        e = {"id": m.id, "key": m.key, **{k: v for k, v in asdict(m).items()
                                           if k not in ("start", "end")}, **r}
        if r["status"] in ("survived", "equivalent_claimed", "claim_broken"):
            e["diff"] = m.diff(src[m.file])
        if m.id in claims:
            e["claim"] = claims[m.id]
        mutants.append(e)
    counts = {s: sum(e["status"] == s for e in mutants) for s in STATUSES}
    detected = counts["killed"] + counts["timed_out"] + counts["claim_broken"]
    denom = detected + counts["survived"]
    return {
        "block": block.name, "preset": preset, "seed": seed, "n": n,
        "tests": list(block.tests), "sources": list(block.sources),
        "sources_sha": sources_sha(block),
        "sites": plan["sites"], "timeout_seconds": round(timeout, 1),
        "original_test_seconds": round(base, 1),
        "counts": counts, "tested": denom,
        "kill_fraction": round(detected / denom, 4) if denom else None,
        "wall_seconds": round(wall, 1),
        "mutants": mutants,
    }


def run_block(block, workers, *, n, seed, preset, claims, log=_log):
    """Mutate ``block`` with ``workers`` in this process; returns the result dict written to
    ``build/mutate/<block>.json`` (``make mutate`` runs the same steps as campaign tasks,
    :mod:`synth.mutate_campaign`)."""
    t0 = time.monotonic()
    plan = plan_block(block, workers, n=n, seed=seed, preset=preset, claims=claims)
    warm = _pool_map(workers, lambda w, _: warm_up(w, block, preset, seed), workers)
    base = max(b for b, _ in warm)
    timeout = max(t for _, t in warm)
    log(f"{block.name}: {plan['sites']} mutation sites in {len(block.sources)} files; original "
        f"tests pass ({base:.0f} s); timeout {timeout:.0f} s per mutant")
    log(f"{block.name}: {len(plan['elaborated'])} mutants elaborated, {len(plan['chosen'])} "
        f"with changed Verilog to test")
    by_id = {m.id: m for m in block_mutants(block)}
    chosen = [by_id[i] for i in plan["chosen"]]

    def test(w, m):
        return test_mutant(w, block, m, preset=preset, seed=seed, timeout=timeout, claims=claims)
    tested = {}
    for m, (st, secs) in zip(chosen, _pool_map(workers, test, chosen)):
        tested[m.id] = (st, secs)
        log(f"  {m.id} {st:<18} {secs:6.1f} s  {m.key}")
    return block_report(block, plan, tested, n=n, seed=seed, preset=preset, claims=claims,
                        base=base, timeout=timeout, wall=time.monotonic() - t0)


def sources_sha(block):
    """Hash of the block's RTL sources as this run sees them (ties a report to the RTL)."""
    h = hashlib.sha1()
    for f in block.sources:
        h.update(f.encode() + b"\0" + original(f) + b"\0")
    return h.hexdigest()[:12]


def _current(block, res, preset):
    """Whether an earlier report ``res`` of ``block`` still describes the RTL: same preset and
    the same sources hash. Reports written before the hash was recorded count if they are newer
    than the last commit touching the sources and those sources have no uncommitted change."""
    if res.get("preset") != preset:
        return False
    if "sources_sha" in res:
        return res["sources_sha"] == sources_sha(block)
    git = ["git", "-C", str(ROOT)]
    # --first-parent: a merge that brought the sources in counts at its own time (the merged
    # branch's commits may be older than the report)
    last = subprocess.run(git + ["log", "-1", "--first-parent", "--format=%ct", "--",
                                 *block.sources],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--", *block.sources]).returncode
    path = OUT / f"{block.name}.json"
    return bool(last) and dirty == 0 and path.stat().st_mtime > int(last)


def summarize(preset, ran, cmd, stale, wall):
    """``build/mutate/summary.json`` over every block whose latest report still describes its
    RTL: the blocks of this run and current reports of earlier runs (listed as carried over);
    blocks without a current report are listed as not measured."""
    from synth.blocks import BLOCKS
    metrics, carried, missing = {}, [], []
    det = den = 0
    for b in BLOCKS:
        if not b.sources:
            continue
        path = OUT / f"{b.name}.json"
        res = json.loads(path.read_text()) if path.exists() else None
        if res is None or not (b.name in ran or _current(b, res, preset)):
            missing.append(b.name)
            continue
        if b.name not in ran:
            carried.append(b.name)
        c = res["counts"]
        det += c["killed"] + c["timed_out"] + c["claim_broken"]
        den += res["tested"]
        metrics[f"kill_fraction_{b.name}"] = res["kill_fraction"]
        metrics[f"mutants_{b.name}"] = res["tested"]
    metrics = {"kill_fraction": round(det / den, 4) if den else None, **metrics,
               "mutants": den, "wall_seconds": wall}
    return {"name": "mutate", "preset": preset, "metrics": metrics, "command": cmd,
            "carried_over": carried, "not_measured": missing, "stale_claims": stale}


def write_report(res):
    """``build/mutate/<block>.md``: counts, each survivor with its diff and how to claim it."""
    c = res["counts"]
    kf = res["kill_fraction"]
    lines = [f"# Mutation report: {res['block']}", "",
             f"Preset `{res['preset']}`, seed {res['seed']}, N = {res['n']}; "
             f"{res['sites']} mutation sites in {', '.join(res['sources'])}; tests: "
             f"{' '.join(res['tests'])} (timeout {res['timeout_seconds']} s per mutant, "
             f"original {res['original_test_seconds']} s); wall {res['wall_seconds']} s.", "",
             f"**Kill fraction {kf if kf is None else f'{kf:.3f}'}** "
             f"((killed + timed out + broken claims) / tested, {res['tested']} tested)", "",
             "| status | mutants |", "|---|---:|"]
    names = {"killed": "killed", "timed_out": "timed out", "survived": "survived",
             "equivalent_claimed": "equivalent (claimed, re-checked: still survives)",
             "claim_broken": "equivalence claim no longer holds (killed)",
             "identical_verilog": "equivalent (identical Verilog, not run)",
             "failed_to_elaborate": "failed to elaborate", "not_run": "not run (beyond N)"}
    lines += [f"| {names[s]} | {c[s]} |" for s in STATUSES]
    for title, st in (("Survivors", "survived"), ("Broken equivalence claims", "claim_broken"),
                      ("Claimed equivalent (still surviving)", "equivalent_claimed")):
        ms = [e for e in res["mutants"] if e["status"] == st]
        if not ms:
            continue
        lines += ["", f"## {title}", ""]
        for e in ms:
            lines += [f"### `{e['id']}` {e['operator']} in `{e['func']}` at "
                      f"{e['file']}:{e['line']}", "", f"``{e['key']}``", ""]
            if e.get("claim"):
                lines += [f"Claim: {e['claim']}", ""]
            lines += ["```diff", e["diff"].rstrip(), "```", ""]
            if st == "survived":
                lines += ["Kill it with a new test, or if it is equivalent add to "
                          "`synth/mutants_equivalent.py`:", "",
                          f"    \"{e['id']}\": \"<one-line reason>\",   # {e['key']}", ""]
    stale = res.get("stale_claims") or []
    if stale:
        lines += ["", "## Stale claims (no such mutant any more)", ""]
        lines += [f"- `{s}`: {r}" for s, r in stale]
    fails = [e for e in res["mutants"] if e["status"] == "failed_to_elaborate"]
    if fails:
        lines += ["", "## Failed to elaborate", ""]
        lines += [f"- `{e['id']}` {e['file']}:{e['line']} {e['operator']}: "
                  f"``{' '.join(e['original'].split())}`` -> ``{' '.join(e['mutated'].split())}``"
                  f": {(e.get('error') or '')[:160]}"
                  for e in fails]
    return "\n".join(lines) + "\n"


def stale_claims(claims):
    """``[(id, reason)]`` of the claims that name no mutant of any registered block."""
    from synth.blocks import BLOCKS
    all_ids = {m.id for b in BLOCKS if b.sources for m in block_mutants(b)}
    return [(k, v) for k, v in claims.items() if k not in all_ids]


def write_outputs(results, names, *, n, seed, preset, stale, wall):
    """``build/mutate/<block>.json`` and ``.md`` for each result of :func:`block_report`, the
    one-line verdicts, and ``build/mutate/summary.json``."""
    OUT.mkdir(parents=True, exist_ok=True)
    blocks = [r["block"] for r in results]
    for res in results:
        res["stale_claims"] = stale
        b = res["block"]
        (OUT / f"{b}.json").write_text(json.dumps(res, indent=1) + "\n")
        (OUT / f"{b}.md").write_text(write_report(res))
        c = res["counts"]
        det = c["killed"] + c["timed_out"] + c["claim_broken"]
        kf = res["kill_fraction"]
        _log(f"mutate {b}: kill fraction {'n/a' if kf is None else f'{kf:.3f}'} "
              f"({det}/{res['tested']}; killed {c['killed']}, timed out {c['timed_out']}, "
              f"survived {c['survived']}, claimed equivalent {c['equivalent_claimed']}, "
              f"broken claims {c['claim_broken']}, identical Verilog {c['identical_verilog']}, "
              f"failed to elaborate {c['failed_to_elaborate']}) in {res['wall_seconds']:.0f} s; "
              f"report build/mutate/{b}.md")
    for k, v in stale:
        print(f"mutate: stale claim {k} (no such mutant any more): {v}")
    cmd = "make mutate" + (f" BLOCK={','.join(blocks)}" if names else "") + \
        (f" N={n}" if n != 20 else "") + (f" SEED={seed}" if seed != 1 else "")
    summary = summarize(preset, set(blocks), cmd, [k for k, _ in stale], round(wall, 1))
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
