# SPDX-License-Identifier: Apache-2.0
"""Random programs of tb/core/isagen.py: race-free (find_races), clean, the same result under
random interleavings; with one corrupted byte, the same single error under every policy. Also
checks that the generator covers every format, opcode and queue it claims to."""

import random

import numpy as np
import pytest

from golden.ap import SBUF
from golden.isasim import IsaSim, find_races
from rtl.config import DEFAULT, SMALL
from rtl.isa import check_reserved
from tb.core.isagen import random_program


def _state(sim):
    return bytes(sim.mem.dram), bytes(sim.mem.sbuf), sim.psum.tobytes(), tuple(sim.sems)


@pytest.mark.parametrize("cfg,seed", [(SMALL, s) for s in range(8)] + [(DEFAULT, 100)])
def test_random_programs_are_race_free_and_interleaving_independent(cfg, seed):
    rp = random_program(cfg, seed, n_ops=40)
    ref = None
    for policy in ["timed", random.Random(seed), random.Random(seed + 1)]:
        sim = IsaSim(cfg, dram_bytes=rp.dram)
        err = sim.run(rp.programs, policy=policy)
        assert err is None, f"seed {seed}: {err}\n" + "\n".join(rp.ops)
        st = _state(sim)
        if ref is None:
            ref = st
            assert find_races(sim) == [], f"seed {seed}"
            assert np.any(sim.psum), f"seed {seed}: nothing reached PSUM"
        assert st == ref, f"seed {seed}: {policy} differs\n" + "\n".join(rp.ops)


@pytest.mark.parametrize("seed", range(12))
def test_corrupted_programs_give_one_error_under_every_policy(seed):
    rp = random_program(SMALL, seed, n_ops=24, corrupt=True)
    e, i, mode, detail = rp.corrupted
    errs = []
    for policy in ["timed", random.Random(seed), random.Random(seed + 7)]:
        errs.append(IsaSim(SMALL, dram_bytes=rp.dram).run(rp.programs, policy=policy))
    key = {None if x is None else (x.code, x.source, x.index, x.info) for x in errs}
    assert len(key) == 1, f"seed {seed} corrupted {rp.corrupted}: {key}"
    raw = rp.programs[e][128 * i:128 * i + 128]
    if check_reserved(raw, e):
        assert (errs[0].code, errs[0].source, errs[0].index) == (1, e, i), errs[0]


def test_generator_coverage():
    seen = set()
    for seed in range(10):
        rp = random_program(SMALL, seed, n_ops=40)
        for line in rp.ops:
            w = line.split()
            seen.add(w[0].split(".")[0])
            if w[0].startswith(("load_stationary", "multiply_moving")):
                seen.add(w[1])
            if w[0] in ("load", "store"):
                seen.add(w[-1])
    for name in ("load", "store", "load_stationary", "multiply_moving", "transpose", "nop",
                 "notify", *SMALL.formats, "q0", "q3"):
        assert name in seen, name


def test_corruption_covers_many_error_classes():
    codes = set()
    for seed in range(80):
        rp = random_program(SMALL, 1000 + seed, n_ops=12, corrupt=True)
        err = IsaSim(SMALL, dram_bytes=rp.dram).run(rp.programs)
        if err is not None:
            codes.add(err.name)
    # E_AP_RANGE comes about once in 60 corrupted programs: directed in test_isasim.py
    assert {"E_OPCODE", "E_SEM", "E_AP_PART", "E_SHAPE"} <= codes and len(codes) >= 6, codes


@pytest.mark.parametrize("rb", [128, 256])
def test_smaller_regions_make_shorter_valid_programs(rb):
    """``region_bytes`` shrinks the regions (the loads, the dump and every operand stay inside
    them): the programs stay race-free and interleaving-independent, and they are shorter."""
    SBP = SMALL.sbuf_bytes_per_partition
    cycles = {}
    for r in (None, rb):
        tot = 0
        for seed in range(4):
            rp = random_program(SMALL, 900 + seed, n_ops=16, engines=("pe", "dve", "act", "sp"),
                                dump=True, bystanders=(), region_bytes=r)
            sims = []
            for policy in ("timed", random.Random(seed)):
                sim = IsaSim(SMALL, dram_bytes=bytearray(rp.kp.dram), dram_base=rp.kp.dram_base)
                assert sim.run(rp.kp.programs, policy=policy) is None
                sims.append(bytes(sim.mem.dram))
            assert sims[0] == sims[1] and find_races(sim) == []
            timed = IsaSim(SMALL, dram_bytes=bytearray(rp.kp.dram), dram_base=rp.kp.dram_base)
            timed.run(rp.kp.programs)
            tot += timed.stats()["cycles"]
            # every SBUF access lies in the 8 regions of r bytes (from each region's start)
            size = r or min(512, SBP // 8)
            checked = 0
            for e in timed.timeline:
                for _k, mem, _p, lo, hi in e.access:
                    if mem in (SBUF, "sbuf"):
                        assert lo // size == hi // size and hi < 8 * size, (e, size)
                        checked += 1
            assert checked > 8
        cycles[r] = tot
    assert cycles[rb] < cycles[None]
    for bad in (rb + 4, 8, 1024, True):
        with pytest.raises(ValueError, match="random_program region_bytes must be a multiple"):
            random_program(SMALL, 1, region_bytes=bad)


@pytest.mark.parametrize("n_ops", [24, 96])
def test_queues_fit_in_the_dram_image(n_ops):
    """Every engine's queue fits after the tensors (the long differential run uses 96
    operations per program; 34,816 bytes were too few for it)."""
    for s in range(12):
        rp = random_program(SMALL, s, n_ops=n_ops, dump=True, corrupt=(s % 3 == 2),
                            region_bytes=256)
        queues = rp.kp.place_queues()
        assert queues, f"seed={s}: no queue placed"
