# SPDX-License-Identifier: Apache-2.0
"""The README and ``docs/*.md`` describe the design, not the history of their writing.

Two checks on every one of those files:

- **narration**: no word of :data:`NARRATION` (``session``, ``we tried``, ...), and no date
  (``YYYY-MM-DD``) except inside a generated table (between ``<!-- name:begin ... -->`` and
  ``<!-- name:end -->`` markers), where a date can only identify a measurement. A figure names
  the commit it was measured on, not the day;
- **links**: no link or path that leaves the repository: a relative link or ``../`` path that
  resolves outside the repository root, an absolute file path, or ``../shared``. Public sources
  are cited by their URLs.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Phrases of a document narrating its own writing (matched case-insensitively, as words).
NARRATION = ("session", "sessions", "this page belongs", "we tried", "last measured",
             "as of today")
_NARRATION_RE = re.compile(r"\b(" + "|".join(re.escape(w) for w in NARRATION) + r")\b", re.I)
_DATE_RE = re.compile(r"\b(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")
_BEGIN_RE = re.compile(r"<!-- ([\w-]+):begin\b")
#: Markdown link targets ``[text](target)`` and ``[name]: target``, and bare ``../`` paths.
_LINK_RE = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_UP_PATH_RE = re.compile(r"(?<![\w.])((?:\.\./)+[\w.\-/]*)")


def _outside_generated(text):
    """``(line number, line)`` of ``text`` outside its generated blocks."""
    out, block = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if block is None:
            m = _BEGIN_RE.search(line)
            if m:
                block = m[1]
                continue
            out.append((n, line))
        elif f"<!-- {block}:end -->" in line:
            block = None
    return out


def narration(text):
    """``[(line number, phrase)]`` of the narration in ``text``."""
    found = []
    for n, line in _outside_generated(text):
        found += [(n, m[0]) for m in _NARRATION_RE.finditer(line)]
        found += [(n, m[0]) for m in _DATE_RE.finditer(line)]
    for n, line in enumerate(text.splitlines(), 1):        # generated tables: words only
        found += [(n, m[0]) for m in _NARRATION_RE.finditer(line)
                  if (n, m[0]) not in found]
    return sorted(set(found))


def _is_url(target):
    return re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) is not None or target.startswith("#")


def outside_links(path, text, root=ROOT):
    """``[(line number, target)]`` of the links and paths in ``text`` (the file ``path``) that
    leave the repository ``root``."""
    root = Path(root).resolve()
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        targets = {m[1] or m[2] for m in _LINK_RE.finditer(line)}
        targets |= {m[1] for m in _UP_PATH_RE.finditer(line)}
        for t in targets:
            if "../shared" in t:
                found.append((n, t))
                continue
            if _is_url(t):
                continue
            if t.startswith("/"):
                found.append((n, t))
                continue
            dest = (Path(path).parent / t.split("#")[0]).resolve()
            if dest != root and root not in dest.parents:
                found.append((n, t))
        if "../shared" in line and not any(f[0] == n for f in found):
            found.append((n, "../shared"))
    return sorted(set(found))


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_doc_does_not_narrate_its_writing(path):
    bad = narration(path.read_text())
    assert not bad, (f"{path.relative_to(ROOT)} narrates its own writing (state the design and "
                     f"its current figures; name a measurement by its commit): "
                     + "; ".join(f"line {n}: {w!r}" for n, w in bad))


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_doc_links_stay_in_the_repository(path):
    bad = outside_links(path, path.read_text())
    assert not bad, (f"{path.relative_to(ROOT)} links outside the repository (cite the public "
                     f"source's URL): " + "; ".join(f"line {n}: {t}" for n, t in bad))


def test_docs_found():
    assert ROOT / "README.md" in DOCS and len(DOCS) > 5


# --- the checks themselves, on made-up text ---------------------------------------------------

def test_narration_is_found():
    text = ("The unit adds.\nIn the tenth session it got faster.\nMeasured on 2026-11-28.\n"
            "We tried a ROM.\nFigures as last measured.\nAs of today it works.\n"
            "This page belongs to issue 14.\n")
    assert [n for n, _ in narration(text)] == [2, 3, 4, 5, 6, 7]
    assert narration("A sessionless design; 2026-13-01 is no date.\n") \
        == []


def test_dates_are_allowed_in_generated_tables_only():
    table = ("<!-- t:begin (generated) -->\n| run | 2026-11-28 |\n<!-- t:end -->\n"
             "after 2026-11-28\n")
    assert narration(table) == [(4, "2026-11-28")]
    assert narration("<!-- t:begin -->\n| a session |\n<!-- t:end -->\n") == [(2, "session")]


def test_outside_links_are_found():
    doc = ROOT / "docs" / "x.md"
    text = ("[isa](../rtl/isa.py) and [arch](architecture.md#3) and [w](https://example.org)\n"
            "see `../shared/reference/a.md` §9\n"
            "[up](../../elsewhere/file.md)\n"
            "[abs](/etc/passwd)\n"
            "the range 0..1 and ../ alone\n")
    assert [n for n, _ in outside_links(doc, text)] == [2, 3, 4]
    assert outside_links(ROOT / "README.md", "[d](docs/core.md) [x](../x.md)\n") \
        == [(1, "../x.md")]
