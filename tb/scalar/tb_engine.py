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
from amaranth.hdl import Shape
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from golden.activation import (FUNCTION_IDS, FUNCTIONS, OP_ACT_TABLE_LOAD, ActInstr, table,
                               table_image, table_words)
from golden.ap import AP, SBUF
from rtl.scalar.function import table_write_layout
from tb.base import TB
from tb.scalar.engine_sim import pack_instr
from tb.scalar.harness import IDEPTH
from tb.scalar.program import bad_instr, golden_program, random_instr, random_memories


class ScalarTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        cfg = self.cfg
        self.P = cfg.partitions
        self.full = (1 << self.P) - 1

    async def start(self):
        await self.reset(start=0, n_instr=0, instr_gap=0, done_stall=0, sb_hog=0, ps_hog=0,
                         tw__valid=0, sb__req__valid=0, ps__req__valid=0)
        self.dut.imem  # noqa: B018  (fails early if the memory is not visible)

    # --- memories through the testbench row ports (bounded waits) ----------------------------
    # --- memories, through the bank arrays (no clock cycles; the engine is idle) ----------
    def _banks(self):
        """``[(array handle, bytes per partition in one word, partition byte base)]`` of SBUF
        and PSUM (``rtl.mem.sbuf`` / ``rtl.tensor.psum`` bank memories ``bank<k>``)."""
        cfg = self.cfg
        sb = [(getattr(self.dut.sbuf, f"bank{b}"), cfg.sbuf_word_bytes, b * cfg.sbuf_bank_bytes)
              for b in range(cfg.sbuf_banks)]
        ps = [(getattr(self.dut.psum, f"bank{b}"), 4, b * cfg.psum_bank_bytes)
              for b in range(cfg.psum_banks)]
        return sb, ps

    def load_mem(self, sbuf, psum):
        for banks, mem in zip(self._banks(), (sbuf, psum)):
            for arr, wb, base in banks:
                for i in range(len(arr)):
                    a = base + i * wb
                    arr[i].value = int.from_bytes(
                        np.ascontiguousarray(mem[:, a:a + wb]).tobytes(), "little")

    def read_mem(self):
        cfg = self.cfg
        out = []
        for banks, n in zip(self._banks(), (cfg.sbuf_bytes_per_partition,
                                            cfg.psum_bytes_per_partition)):
            mem = np.zeros((self.P, n), np.uint8)
            for arr, wb, base in banks:
                for i in range(len(arr)):
                    a = base + i * wb
                    word = int(arr[i].value).to_bytes(self.P * wb, "little")
                    mem[:, a:a + wb] = np.frombuffer(word, np.uint8).reshape(self.P, wb)
            out.append(mem)
        return out

    async def load_table_tw(self, name):
        d = self.dut
        aw = Shape.cast(table_write_layout(self.cfg)["addr"].shape).width   # addr | data
        d.tw__valid.value = 1
        for addr, word in sorted(table_image(table(name), self.cfg).items()):
            d.tw__payload.value = addr | word << aw
            await RisingEdge(d.clk)
        d.tw__valid.value = 0

    # --- a program ------------------------------------------------------------------------
    async def run(self, instrs, *, gap=0, stall=0, sb_hog=0, ps_hog=0, what=""):
        d = self.dut
        assert len(instrs) <= IDEPTH
        for k, ins in enumerate(instrs):
            d.imem[k].value = pack_instr(self.cfg, ins)
        d.n_instr.value = len(instrs)
        d.instr_gap.value, d.done_stall.value = gap, stall
        d.sb_hog.value, d.ps_hog.value = sb_hog, ps_hog
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0
        n = sum(int(i.src.count) * max(1, i.src.num_partitions) for i in instrs)
        await self.wait_high(d.finished, cycles=20 * n + 2000 + 5000 * len(instrs), what=what)
        st = [int(d.slog[k].value) for k in range(len(instrs))]
        tl = [int(d.tlog[k].value) for k in range(len(instrs))]
        await RisingEdge(d.clk)
        d.sb_hog.value, d.ps_hog.value = 0, 0
        for _ in range(64):                                   # bounded: the engine drains
            await ReadOnly()
            if not int(d.busy.value):
                break
            await RisingEdge(d.clk)
        await RisingEdge(d.clk)
        acc = np.array([(int(d.acc.value) >> (32 * p)) & 0xFFFFFFFF for p in range(self.P)],
                       np.uint32)
        return st, acc, tl


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
