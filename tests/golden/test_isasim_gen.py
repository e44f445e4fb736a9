# SPDX-License-Identifier: Apache-2.0
"""Random programs across pe/dve/act/sp (tb/core/isagen.py): clean, race-free and the same
state under the timed and random schedulers; every vector opcode and the scalar ones
generated; corrupted programs (a byte, an AP field, an immediate, a semaphore, an unreachable
wait) give one error, the same under every policy, over many error classes; engines=
restricts the generator to what the RTL core runs."""

import random
from collections import Counter

import pytest

from golden import vector as gv
from golden.isasim import IsaSim, find_races
from rtl.config import DEFAULT, SMALL
from rtl.isa import decode
from tb.core.isagen import random_program


def _state(sim):
    return (bytes(sim.mem.dram), bytes(sim.mem.sbuf), sim.psum.tobytes(), tuple(sim.sems),
            sim.act_acc.tobytes(), sim.act_loaded)


def _ops(rp):
    out = Counter()
    for e, p in rp.programs.items():
        for i in range(0, len(p), 128):
            out[(e, decode(p[i:i + 128]).op)] += 1
    return out


@pytest.mark.parametrize("cfg,seed", [(SMALL, s) for s in range(3)] + [
    pytest.param(SMALL, s, marks=pytest.mark.full) for s in range(3, 40)] + [
    pytest.param(DEFAULT, 7, marks=pytest.mark.full)])
def test_all_engine_programs_deterministic(cfg, seed):
    rp = random_program(cfg, 2000 + seed, n_ops=36)
    ref = None
    for policy in ("timed", random.Random(seed), random.Random(seed + 50)):
        sim = IsaSim(cfg, dram_bytes=rp.dram)
        err = sim.run(rp.programs, policy=policy)
        assert err is None, f"seed {seed}: {err}\n" + "\n".join(rp.ops)
        if ref is None:
            ref = _state(sim)
            assert find_races(sim) == [], seed
        assert _state(sim) == ref, f"seed {seed}: {policy}\n" + "\n".join(rp.ops)


def test_generator_covers_vector_and_scalar_opcodes():
    seen = Counter()
    for seed in range(8):
        seen += _ops(random_program(SMALL, 3000 + seed, n_ops=40))
    from tb.core.isagen import VECTOR_OPS     # the opcodes the generator draws
    for name in gv.OPCODES.values():
        assert seen[("dve", name)] > 0 or name not in VECTOR_OPS, name
    assert seen[("act", "activation")] > 0 and seen[("act", "act_table_load")] > 0


def test_engines_subset_for_the_rtl_core():
    rp = random_program(SMALL, 5, n_ops=30, engines=("pe", "dve", "sp"))
    ops = _ops(rp)
    assert not any(op in ("activation", "act_table_load") for _e, op in ops)
    assert any(e == "dve" and op != "nop" and op != "notify" for e, op in ops)
    with pytest.raises(ValueError, match="engines"):
        random_program(SMALL, 5, engines=("pool",))


@pytest.mark.parametrize("seed", [*range(5), *(pytest.param(s, marks=pytest.mark.full)
                                                for s in range(5, 60))])
def test_corrupted_all_engine_programs_one_error(seed):
    rp = random_program(SMALL, 4000 + seed, n_ops=16, corrupt=True)
    errs = [IsaSim(SMALL, dram_bytes=rp.dram).run(rp.programs, policy=p)
            for p in ("timed", random.Random(seed), random.Random(seed + 9))]
    key = {None if x is None else (x.code, x.source, x.index, x.info) for x in errs}
    assert len(key) == 1, f"seed {seed} corrupted {rp.corrupted}: {key}"


@pytest.mark.full
def test_corruption_error_classes_all_engines():
    codes = Counter()
    for seed in range(150):
        rp = random_program(SMALL, 5000 + seed, n_ops=12, corrupt=True)
        err = IsaSim(SMALL, dram_bytes=rp.dram).run(rp.programs)
        codes[err.name if err else None] += 1
    assert {"E_OPCODE", "E_SEM", "E_SHAPE", "E_FORMAT", "E_TIMEOUT", "E_AP_RANGE"} <= set(codes)
    assert len(codes) >= 9, codes          # 8 error classes and clean runs (150 seeds: 9)
