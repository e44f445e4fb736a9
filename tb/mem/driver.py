# SPDX-License-Identifier: Apache-2.0
"""The cocotb driver of :class:`tb.mem.harness.DmaFedHarness`: DRAM as cocotbext-axi
``AxiRam`` (through :class:`tb.dma.driver.DMATB`), SBUF preloaded and read back through the bank
memories, fed commands and DMA descriptors loaded, one unattended run per call, and the
stimulus of the tests and the bench (back-to-back tiles, DMA batches with disjoint
destinations). Expected values come from ``golden/tensor.py`` (``Program``) and
``golden/dma.py``."""

from __future__ import annotations

import random
import time

import numpy as np
from cocotb.triggers import RisingEdge

from golden import dma as G
from tb.base import TB
from tb.dma.driver import DMATB
from tb.dma.program import random_copy

__all__ = ["DmaFedTB", "dram_layout", "random_dma_batch", "bank_fill", "load_sbuf_banks",
           "read_sbuf_banks"]


def dram_layout(cfg):
    """``(dram_bytes, src_hi, big_lo, slots_lo)``: the DRAM window holds sources in
    ``[0, src_hi)``, a destination for one whole bank of every partition at ``big_lo`` and the
    random destination slots from ``slots_lo`` (offsets from the window base)."""
    bank_all = cfg.partitions * cfg.sbuf_bank_bytes
    src_hi = max(bank_all, 8192)
    big_lo = src_hi
    slots_lo = big_lo + bank_all
    return slots_lo + 8192, src_hi, big_lo, slots_lo


def bank_fill(cfg, *, src, bank, dram_to_sbuf=True, queue=0, post=False, sem=0, inc=1):
    """One descriptor moving bank ``bank`` of every partition (FP32 words, contiguous rows)
    from DRAM at ``src`` into SBUF (``dram_to_sbuf``) or from SBUF to DRAM at ``src``."""
    BB, BPP, P = cfg.sbuf_bank_bytes, cfg.sbuf_bytes_per_partition, cfg.partitions
    code = G.DTYPE_CODES["fp32"]
    if dram_to_sbuf:
        d = G.Descriptor(src=src, dst=bank * BB, src_space=G.DRAM, dst_space=G.SBUF,
                         dims=((BB // 4, 4, 4), (P, BB, BPP)), src_dtype=code, dst_dtype=code,
                         post=post, sem=sem, inc=inc)
    else:
        d = G.Descriptor(src=bank * BB, dst=src, src_space=G.SBUF, dst_space=G.DRAM,
                         dims=((BB // 4, 4, 4), (P, BPP, BB)), src_dtype=code, dst_dtype=code,
                         post=post, sem=sem, inc=inc)
    return (queue, d)


def random_dma_batch(cfg, rng: random.Random, n, *, dram_base, read_banks=(0, 1),
                     write_bank=2, max_bytes=256):
    """``n`` random legal copies (every direction, 1..4 dims, negative strides, every queue)
    whose SBUF destinations lie in bank ``write_bank`` (slots spread over the partitions) and
    whose SBUF sources lie in ``read_banks`` (the banks the tensor engine reads), DRAM sources
    in the source area and DRAM destinations in disjoint slots (:func:`dram_layout`): no two
    descriptors touch the same destination byte and no destination is a source."""
    BB, BPP, P = cfg.sbuf_bank_bytes, cfg.sbuf_bytes_per_partition, cfg.partitions
    dram_bytes, src_hi, _big, slots_lo = dram_layout(cfg)
    per = -(-n // P)
    size = BB // per
    dslot = (dram_bytes - slots_lo) // n
    lo_b, hi_b = min(read_banks), max(read_banks) + 1
    batch = []
    for j in range(n):
        p, k = j % P, j // P
        sb_dst = (p * BPP + write_bank * BB + k * size, p * BPP + write_bank * BB + (k + 1) * size)
        ps = rng.randrange(P)
        d = random_copy(cfg, rng, dram_base=dram_base, dram_limit=dram_base + dram_bytes,
                        dram_span=(dram_base, dram_base + src_hi),
                        sbuf_span=(ps * BPP + lo_b * BB, ps * BPP + hi_b * BB),
                        dst_dram_span=(dram_base + slots_lo + j * dslot,
                                       dram_base + slots_lo + (j + 1) * dslot),
                        dst_sbuf_span=sb_dst, max_bytes=max_bytes)
        batch.append((rng.randrange(cfg.dma_queues), d))
    return batch


def load_sbuf_banks(cfg, banks, image):
    """Write ``image`` (partitions x bytes, uint8) into an SBUF's bank memories ``banks`` (the
    cocotb handles of ``rtl.mem.sbuf``'s ``bank<b>``, in bank order), backdoor."""
    P, BB, WB = cfg.partitions, cfg.sbuf_bank_bytes, cfg.sbuf_word_bytes
    for b, mem in enumerate(banks):
        words = np.ascontiguousarray(image[:, b * BB:(b + 1) * BB]).reshape(P, BB // WB, WB)
        for i in range(BB // WB):
            mem[i].value = int.from_bytes(words[:, i, :].tobytes(), "little")


def read_sbuf_banks(cfg, banks):
    """An SBUF's bank memories ``banks`` (as :func:`load_sbuf_banks`) as partitions x bytes
    (uint8)."""
    P, BB, WB = cfg.partitions, cfg.sbuf_bank_bytes, cfg.sbuf_word_bytes
    out = np.zeros((P, cfg.sbuf_bytes_per_partition), np.uint8)
    for b, mem in enumerate(banks):
        for i in range(BB // WB):
            w = int(mem[i].value).to_bytes(P * WB, "little")
            out[:, b * BB + i * WB:b * BB + (i + 1) * WB] = \
                np.frombuffer(w, np.uint8).reshape(P, WB)
    return out


class DmaFedTB(DMATB):
    """Reset, memories and runs of a ``DmaFedHarness`` top level."""

    def __init__(self, dut, *, dram_base=0x10000):
        cfg = TB(dut).cfg
        super().__init__(dut, dram_base=dram_base, dram_bytes=dram_layout(cfg)[0])
        self.completed = [0] * cfg.dma_queues

    async def reset(self):
        await TB.reset(self, start=0, n_cmd=0, n_desc=0, syn_en=0, syn_bank=0, clear=0,
                       dram_base=self.dram_base, dram_limit=self.dram_limit)
        self.completed = [0] * self.cfg.dma_queues

    # --- memories (backdoor) --------------------------------------------------------------------
    def _banks(self):
        return [getattr(self.dut.sbuf, f"bank{b}") for b in range(self.cfg.sbuf_banks)]

    def load_sbuf(self, image):
        """Write ``image`` (partitions x bytes, uint8) into the SBUF bank memories."""
        load_sbuf_banks(self.cfg, self._banks(), image)

    def read_sbuf_image(self):
        """The SBUF as partitions x bytes (uint8)."""
        return read_sbuf_banks(self.cfg, self._banks())

    def clear_psum(self):
        """Zero PSUM (golden starts from zero; a memory is not cleared by reset)."""
        psum = self.dut.fed.engine.psum
        for b in range(self.cfg.psum_banks):
            mem = getattr(psum, f"bank{b}")
            for i in range(self.cfg.psum_bank_fp32):
                mem[i].value = 0

    # --- a run ------------------------------------------------------------------------------------
    async def run(self, cmds, batch=(), *, syn_bank=None, n_res_max=None, limit=None):
        """Load ``cmds`` (fed command words) and ``batch`` (``[(queue, Descriptor)]``), start,
        await ``done`` (bounded). Returns the counters, ``beats`` (result words as lists of
        FP32 ints), ``codes`` / ``completed`` (per queue, completed counted for this run) and
        ``run_seconds``."""
        dut, cfg = self.dut, self.cfg
        depths = self.params.get("depths", {})
        if len(cmds) > depths.get("cmd", 1 << 30) or len(batch) > depths.get("desc", 1 << 30):
            raise ValueError(f"{len(cmds)} commands / {len(batch)} descriptors exceed the "
                             f"harness depths {depths}")
        self.clear_psum()
        for i, w in enumerate(cmds):
            dut.cmd_mem[i].value = int(w)
        for j, (q, d) in enumerate(batch):
            dut.desc_mem[j].value = (q << 512) | d.to_int()
        dut.n_cmd.value = len(cmds)
        dut.n_desc.value = len(batch)
        dut.syn_en.value = int(syn_bank is not None)
        dut.syn_bank.value = syn_bank or 0
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.clk)
        W = cfg.sbuf_word_bytes
        words = sum(d.count * 4 // W + 2 * d.count + 4 for _, d in batch)
        limit = limit or (40 * words + 400 * len(batch) + 200 * len(cmds)
                          + 8 * cfg.psum_bank_fp32 * len(cmds) + 5000)
        t0 = time.monotonic()
        await self.wait_high(dut.done, cycles=limit,
                             what=f"{len(cmds)} commands + {len(batch)} descriptors")
        out = {"run_seconds": time.monotonic() - t0}
        for k in ("cycles", "t_first", "t_last_we", "n_res", "dma_wr", "dma_rd", "dma_stall",
                  "dma_wr_first", "dma_wr_last", "syn_wr", "syn_stall", "err", "err_code",
                  "ap_err", "ap_err_code", "dma_err", "sem_posts"):
            out[k] = int(getattr(dut, k).value)
        Q = cfg.dma_queues
        qc, qi, cp = int(dut.q_code.value), int(dut.q_info.value), int(dut.completed.value)
        out["codes"] = [((qc >> (8 * q)) & 0xFF, (qi >> (32 * q)) & 0xFFFFFFFF) for q in range(Q)]
        now = [(cp >> (16 * q)) & 0xFFFF for q in range(Q)]
        out["completed"] = [(a - b) % (1 << 16) for a, b in zip(now, self.completed)]
        self.completed = now
        C = cfg.pe_cols
        out["beats"] = []
        for i in range(out["n_res"]):
            w = int(dut.res_mem[i].value)
            out["beats"].append([(w >> (32 * c)) & 0xFFFFFFFF for c in range(C)])
        await RisingEdge(dut.clk)
        return out
