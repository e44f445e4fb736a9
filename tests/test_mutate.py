# SPDX-License-Identifier: Apache-2.0
"""``synth.mutants`` (``make mutate``) without simulation: operators, stable ids, sampling, claims."""

import ast
import textwrap

import pytest

from synth import mutants as mu
from synth.blocks import BLOCKS

SNIPPET = textwrap.dedent('''\
    def helper(x):
        return x + 1

    class A:
        def __init__(self):
            self.w = 3 + 4            # not mutated: constructor

        def elaborate(self, platform):
            m = Module()
            a = Signal(8)             # shape: not mutated
            m.d.comb += [a.eq(self.x & self.y), self.z.eq(Mux(self.s, a, ~self.b))]
            with m.If(a == 5):        # a comment: + - << ±
                m.d.sync += a.eq(a << 1)
            m.d.comb += self.o.eq(~(a >= self.k))
            return m
    ''').encode()


def mutants(src=SNIPPET, **kw):
    return mu.find_mutants(src, "x.py", **kw)


def applied(m, src=SNIPPET):
    return m.apply(src).decode()


def line_of(m, src=SNIPPET):
    return applied(m, src).splitlines()[m.line - 1].strip()


def test_only_elaboration_code_is_mutated():
    ms = mutants()
    assert {m.func for m in ms} == {"elaborate"}
    assert not any(m.line == 10 for m in ms), "Signal(8) is a shape"
    assert {m.func for m in mutants(functions=("elaborate", "helper"))} == {"elaborate",
                                                                           "helper"}


@pytest.mark.parametrize("op,orig,want", [
    ("binop", "&", "m.d.comb += [a.eq(self.x | self.y), self.z.eq(Mux(self.s, a, ~self.b))]"),
    ("binop", "<<", "m.d.sync += a.eq(a >> 1)"),
    ("cmp", "==", "with m.If(a != 5):        # a comment: + - << ±"),
    ("cmp", ">=", "m.d.comb += self.o.eq(~(a > self.k))"),
    ("const_inc", "5", "with m.If(a == 6):        # a comment: + - << ±"),
    ("const_dec", "1", "m.d.sync += a.eq(a << 0)"),
    ("mux_swap", "a, ~self.b",
     "m.d.comb += [a.eq(self.x & self.y), self.z.eq(Mux(self.s, ~self.b, a))]"),
    ("negate_if", "a == 5", "with m.If(~(a == 5)):        # a comment: + - << ±"),
    ("drop_invert", "~self.b",
     "m.d.comb += [a.eq(self.x & self.y), self.z.eq(Mux(self.s, a, self.b))]"),
    ("drop_invert", "~(a >= self.k)", "m.d.comb += self.o.eq((a >= self.k))"),
    ("drop_eq", "a.eq(self.x & self.y), ", "m.d.comb += [self.z.eq(Mux(self.s, a, ~self.b))]"),
    ("drop_eq", "m.d.sync += a.eq(a << 1)", "pass"),
])
def test_operator_produces_expected_text(op, orig, want):
    ms = [m for m in mutants() if m.operator == op and m.original == orig]
    assert len(ms) == 1, [(m.operator, m.original) for m in mutants()]
    assert line_of(ms[0]) == want
    ast.parse(applied(ms[0]))


def test_last_list_element_drop_keeps_the_list_valid():
    ms = [m for m in mutants() if m.operator == "drop_eq" and "self.z.eq" in m.original]
    assert line_of(ms[0]) == "m.d.comb += [a.eq(self.x & self.y)]"


def test_non_ascii_text_before_a_site_keeps_offsets_right():
    src = SNIPPET.replace(b"m = Module()", b"m = Module()  # \xc2\xb1 \xe2\x89\xa5")
    for m in mutants(src):
        assert src[m.start:m.end].decode() == m.original
        ast.parse(applied(m, src))


def test_ids_survive_unrelated_edits_and_are_unique():
    ids = [m.id for m in mutants()]
    assert len(set(ids)) == len(ids)
    moved = SNIPPET.replace(b"class A:", b"X = 1 + 2\n\n\nclass A:\n    '''doc'''")
    assert [m.id for m in mutants(moved)] == ids
    keys = [m.key for m in mutants()]
    assert "x.py:elaborate:cmp:`with m.If(a == 5):        # a comment: + - << ±`#1" in keys


def test_sampling_is_deterministic_for_a_seed():
    ms = mutants()
    a = [m.id for m in mu.sample(ms, 7, "b")]
    assert a == [m.id for m in mu.sample(list(reversed(ms)), 7, "b")]
    assert a != [m.id for m in mu.sample(ms, 8, "b")]
    assert sorted(a) == sorted(m.id for m in ms)


@pytest.mark.parametrize("path", ["rtl/fp/adder.py", "rtl/fp/fused_add.py", "rtl/fp/pipe.py",
                                  "rtl/tensor/pe.py"])
def test_every_site_of_real_rtl_still_parses(path):
    src = (mu.ROOT / path).read_bytes()
    ms = mu.find_mutants(src, path)
    assert ms
    for m in ms:
        assert src[m.start:m.end].decode() == m.original
        assert m.mutated != m.original
        ast.parse(m.apply(src))


def test_registry_maps_blocks_to_sources_and_tests():
    have = [b for b in BLOCKS if b.tests]
    assert {"mac", "fp32_adder", "convert", "widen", "tensor_engine"} <= {b.name for b in have}
    collected = {}
    for b in have:
        assert b.sources, b.name
        for f in b.sources:
            assert (mu.ROOT / f).is_file(), f
        for t in b.tests:
            path, _, name = t.partition("::")
            if path not in collected:
                collected[path] = {n.name for n in ast.parse((mu.ROOT / path).read_text()).body
                                   if isinstance(n, ast.FunctionDef)}
            assert not name or name in collected[path], t     # a whole file, or one test


def test_claims_are_well_formed_and_name_existing_mutants():
    claims = mu.load_claims()
    assert mu.check_claims(claims) == []
    assert mu.check_claims({"xyz": "a\nb"}) and mu.check_claims({"0123456789": " "})
    ids = {m.id for b in BLOCKS if b.sources for m in mu.block_mutants(b)}
    stale = sorted(set(claims) - ids)
    assert not stale, f"stale equivalence claims in synth/mutants_equivalent.py: {stale}"


def test_summary_keeps_only_reports_of_the_current_rtl(tmp_path, monkeypatch):
    """summary.json merges earlier reports only while their sources hash matches the RTL."""
    monkeypatch.setattr(mu, "OUT", tmp_path)
    blocks = [b for b in BLOCKS if b.sources][:3]
    ran, current, stale = blocks

    def report(b, sha, tested, killed):
        counts = {s: 0 for s in mu.STATUSES}
        counts["killed"], counts["survived"] = killed, tested - killed
        (tmp_path / f"{b.name}.json").write_text(mu.json.dumps({
            "preset": "small", "sources_sha": sha, "counts": counts, "tested": tested,
            "kill_fraction": killed / tested}))

    report(ran, "whatever", 10, 9)                 # this run: always taken
    report(current, mu.sources_sha(current), 4, 4)
    report(stale, "0" * 12, 5, 0)                  # RTL changed since: left out
    s = mu.summarize("small", {ran.name}, "make mutate", [], 1.0)
    m = s["metrics"]
    assert m["mutants"] == 14 and m["kill_fraction"] == round(13 / 14, 4)
    assert f"kill_fraction_{stale.name}" not in m
    assert s["carried_over"] == [current.name]
    assert stale.name in s["not_measured"]
    assert mu.summarize("default", {ran.name}, "x", [], 1.0)["carried_over"] == []
