# SPDX-License-Identifier: Apache-2.0
"""The cocotb driver of :class:`tb.scalar.harness.ScalarHarness`: reset, memories through the
bank arrays, table writes through ``tw``, and one unattended program run (every wait bounded)."""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Shape
from cocotb.triggers import ReadOnly, RisingEdge

from golden.activation import table, table_image
from rtl.scalar.function import table_write_layout
from tb.base import TB
from tb.scalar.harness import IDEPTH
from tb.scalar.rig import pack_instr

__all__ = ["ScalarTB"]


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
