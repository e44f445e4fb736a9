# SPDX-License-Identifier: Apache-2.0
"""Mutation testing of the RTL (``make mutate``): how many small source changes do the tests catch?

Method (docs/mutation.md): find mutation sites with :mod:`ast` in the functions of a block's
RTL files that run at elaboration time, apply ONE change per mutant, drop mutants whose Verilog
is identical to the original, then run the tests the registry maps to the block
(``synth/blocks.py``: ``Block.tests``) in a per-worker copy of the tree
(:mod:`synth.mutants`).

``python -m synth.mutate [--block NAME ...] [-n N] [--seed S] [--jobs J] [--list]`` runs the
blocks in this process with ``--jobs`` threads; ``python -m synth.mutate campaign [--n N]
[--seed S] [--backend local|ray] [--workers W] [--task I] [--param blocks=a,b] ...`` (``make
mutate``) runs the mutants as tasks of a ``mutate`` campaign (:mod:`synth.mutate_campaign`,
options as ``python -m tb.campaign``, docs/campaigns.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from synth.blocks import BLOCKS, get_block
from synth.mutants import (
    OUT, Worker, block_mutants, check_claims, emit_hash, load_claims, run_block, stale_claims,
    tracked_files, write_outputs)
from synth.mutate_campaign import MUTATE
from tb.campaign import cli as campaign_cli

__all__ = ["main"]


def main(argv=None):
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["campaign"]:
        return campaign_cli.main(argv[1:], kind=MUTATE)
    ap = argparse.ArgumentParser(prog="python -m synth.mutate", description=__doc__.split("\n")[0])
    ap.epilog = ("python -m synth.mutate campaign --help: the same as a mutate campaign "
                 "(make mutate)")
    ap.add_argument("--block", action="append", help="block name (repeatable); default: every "
                    "block with tests in synth/blocks.py")
    ap.add_argument("-n", type=int, default=20, help="mutants with changed Verilog per block")
    ap.add_argument("--seed", type=int, default=1, help="sampling and test seed")
    ap.add_argument("--jobs", type=int, default=2, help="parallel workers")
    ap.add_argument("--list", action="store_true", help="list the mutants of the blocks and exit")
    ap.add_argument("--emit", metavar="BLOCK", help=argparse.SUPPRESS)
    ap.add_argument("--preset", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    preset = a.preset or os.environ.get("CONFIG", "small")
    if a.emit:
        emit_hash(a.emit, preset)
        return 0
    names = [n for arg in a.block or () for n in arg.split(",") if n.strip()]
    blocks = [get_block(n.strip()) for n in names] if names else [b for b in BLOCKS if b.tests]
    for b in blocks:
        if not b.tests or not b.sources:
            raise SystemExit(f"mutate: block {b.name!r} has no sources/tests in synth/blocks.py")
    if a.list:
        for b in blocks:
            for m in block_mutants(b):
                flat = [" ".join(t.split()) for t in (m.original, m.mutated)]
                print(f"{b.name} {m.id} {m.file}:{m.line} {m.operator} "
                      f"`{flat[0]}` -> `{flat[1]}`  [{m.func}]")
        return 0
    claims = load_claims()
    bad = check_claims(claims)
    if bad:
        raise SystemExit("mutate: synth/mutants_equivalent.py: " + "; ".join(bad))
    stale = stale_claims(claims)

    t0 = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    files = tracked_files()
    workers = [Worker(k, files) for k in range(max(1, a.jobs))]
    results = [run_block(b, workers, n=a.n, seed=a.seed, preset=preset, claims=claims)
               for b in blocks]
    write_outputs(results, names, n=a.n, seed=a.seed, preset=preset, stale=stale,
                  wall=time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
