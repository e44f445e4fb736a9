# SPDX-License-Identifier: Apache-2.0
"""cocotb tests of the Scalar engine alone (``tb.scalar.harness``: the engine on the real SBUF
and PSUM units), bit for bit against ``golden.activation``: for each function of the
``functions`` parameter, its table loaded (through ``tw``, or by ``ACT_TABLE_LOAD`` from SBUF
when it fits), then ``batches`` random programs of ``per_batch`` instructions streamed back to
back (ACTIVATION of that function and COPY; every enabled format; random APs with partial
partition ranges, negative and zero steps; immediate and per-partition scale/bias; every
``reduce_cmd``; some bad instructions of every status) under random SBUF/PSUM contention,
instruction gaps and ``done`` back-pressure. Compared: every status, SBUF, PSUM and the
accumulators. Parameters: ``seed``, ``functions`` (names), ``batches``, ``per_batch``."""

from __future__ import annotations

import cocotb
import numpy as np

from golden.activation import (FUNCTION_IDS, FUNCTIONS, OP_ACT_TABLE_LOAD, ActInstr, table,
                               table_words)
from golden.ap import AP, SBUF
from tb.scalar.driver import ScalarTB
from tb.scalar.program import bad_instr, golden_program, random_instr, random_memories


def _table_load_instr(tb, name, sbuf, rng):
    """An ACT_TABLE_LOAD of ``name`` placed in the source zone of a random partition, or None
    when it does not fit there; writes the words into ``sbuf``."""
    w = table_words(table(name), tb.cfg)
    S = tb.cfg.sbuf_bytes_per_partition
    if 4 * len(w) > S // 2:
        return None
    p = int(rng.integers(0, tb.P))
    rev = rng.random() < 0.5
    off = int(rng.integers(0, (S // 2 - 4 * len(w)) // 4 + 1)) * 4
    sbuf[p, off:off + 4 * len(w)] = np.ascontiguousarray(w[::-1] if rev else w).view(np.uint8)
    if rev:
        src = AP(memory=SBUF, start_partition=p, offset=off + 4 * (len(w) - 1),
                 dims=((-1, len(w)),))
    else:
        src = AP(memory=SBUF, start_partition=p, offset=off, dims=((1, len(w)),))
    return ActInstr(opcode=OP_ACT_TABLE_LOAD, func=FUNCTION_IDS[name], src=src)


@cocotb.test()
async def random_programs(dut):
    tb = ScalarTB(dut)
    await tb.start()
    cfg = tb.cfg
    names = tb.params.get("functions") or list(FUNCTIONS)
    batches, per = int(tb.params.get("batches", 2)), int(tb.params.get("per_batch", 8))
    loaded, acc_run = "", None
    for fi, name in enumerate(names):
        rng = tb.rng(fi)
        for b in range(batches):
            sbuf, psum = random_memories(rng, cfg)
            prog = []
            if b == 0:
                ld = _table_load_instr(tb, name, sbuf, rng)
                if ld is None:
                    await tb.load_table_tw(name)
                    loaded = name
                else:
                    prog.append(ld)
            fid = FUNCTION_IDS[name]
            while len(prog) < per:
                ins = random_instr(rng, cfg, fid)
                if rng.random() < 0.15:
                    ins = bad_instr(rng, cfg, ins)
                prog.append(ins)
            tb.load_mem(sbuf, psum)
            knobs = dict(gap=int(rng.choice([0, 0, 64])), stall=int(rng.choice([0, 0, 100])),
                         sb_hog=int(rng.choice([0, 60, 120])), ps_hog=int(rng.choice([0, 60])))
            what = f"{name} batch {b} {knobs}"
            want, wsb, wps, wacc, loaded = golden_program(cfg, prog, sbuf, psum, loaded,
                                                          acc_run)
            st, acc, _ = await tb.run(prog, what=what, **knobs)
            gsb, gps = tb.read_mem()
            tb.check_equal(what + " statuses", st, want,
                           lambda j, prog=prog: f"instr {j} {prog[j]}")
            for mname, got, exp in (("SBUF", gsb, wsb), ("PSUM", gps, wps)):
                tb.check_equal(f"{what} {mname}", got.ravel(), exp.ravel(),
                               lambda j, n=got.shape[1]: f"partition {j // n} byte {j % n}")
            tb.check_equal(what + " accumulators", acc, wacc, lambda j: f"partition {j}")
            acc_run = wacc
            tb.record(function=name, batch=b, instrs=len(prog),
                      bad=sum(s != 0 for s in want), **knobs)


@cocotb.test()
async def stream_cycles(dut):
    """``stream`` ACTIVATIONs of ``free`` FP32 elements per partition (SBUF -> BF16 SBUF,
    reset_reduce) back to back: bit for bit against golden, and the cycles recorded (the first
    ``done`` = one instruction's latency, the spacing of the others = the steady-state cost per
    instruction; bench figures, no speed assertion)."""
    tb = ScalarTB(dut)
    await tb.start()
    cfg = tb.cfg
    free, stream = int(tb.params.get("free", 512)), int(tb.params.get("stream", 4))
    rng = tb.rng(99)
    sbuf, psum = random_memories(rng, cfg)
    sbuf[:, :4 * free] = rng.uniform(-4, 4, (tb.P, free)).astype(np.float32).view(np.uint8)
    await tb.load_table_tw("exp")
    ins = ActInstr(func=FUNCTION_IDS["exp"],
                   src=AP(memory=SBUF, num_partitions=tb.P, dims=((1, free),)),
                   dst=AP(memory=SBUF, num_partitions=tb.P, offset=4 * free, elem_bytes=2,
                          dims=((1, free),)), dst_dtype=2, reduce_cmd=3)
    for k in (1, stream):
        prog = [ins] * k
        tb.load_mem(sbuf, psum)
        want, wsb, wps, wacc, _ = golden_program(cfg, prog, sbuf, psum, "exp")
        st, acc, tl = await tb.run(prog, what=f"stream of {k}")
        gsb, gps = tb.read_mem()
        tb.check_equal(f"stream of {k} statuses", st, want, lambda j: f"instr {j}")
        tb.check_equal(f"stream of {k} SBUF", gsb.ravel(), wsb.ravel(), lambda j: f"byte {j}")
        tb.check_equal(f"stream of {k} acc", acc, wacc, lambda j: f"partition {j}")
        per = (tl[-1] - tl[0]) / (k - 1) if k > 1 else None
        tb.record(instrs=k, free=free, done_cycles=tl, per_instruction=per)
