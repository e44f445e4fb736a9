# SPDX-License-Identifier: Apache-2.0
"""The cocotb driver of the DMA harness: DRAM as cocotbext-axi ``AxiRam`` (random
back-pressure, read/write latency, SLVERR injection by address), the SBUF model preloaded and
read back, descriptors fed in one batch, results compared with ``golden.dma`` byte for byte."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiRam

from golden import dma as G
from tb.base import TB

__all__ = ["DMATB", "golden_batch"]


def golden_batch(cfg, mem, batch, *, poisoned=(), rand=None):
    """Apply ``batch`` (``[(queue, Descriptor)]``, in order) to the golden ``mem``: each queue
    runs its descriptors until the first error and drops the rest. Returns per queue
    ``(code, info)`` of its first error (``(0, 0)`` if none), the completed counts and the
    semaphore increments. Destinations must be disjoint from each other and from every source
    (then the interleaving of queues does not matter), and the descriptors with stochastic
    rounding on one queue (they draw from the engine's one stream ``rand``,
    ``golden.dma.sr_stream``, in the order the engine runs them). Element descriptors run when
    ``cfg.dma_element_ops``."""
    Q = cfg.dma_queues
    codes = [(0, 0)] * Q
    done = [0] * Q
    sem = {}
    for q, d in batch:
        if codes[q][0]:
            continue
        code, info = G.run(cfg, d, mem, element_ops=cfg.dma_element_ops, rand=rand)
        if code:
            codes[q] = (code, info)
            continue
        done[q] += 1
        if d.post:
            sem[d.sem] = sem.get(d.sem, 0) + d.inc
    return codes, done, sem


class DMATB(TB):
    """Clock, reset, DRAM, SBUF model and batch runs of the DMA harness."""

    def __init__(self, dut, *, dram_base=0x10000, dram_bytes=0x4000):
        super().__init__(dut)
        cfg = self.cfg
        self.W = cfg.sbuf_word_bytes
        self.dram_base, self.dram_bytes = dram_base, dram_bytes
        self.dram_limit = dram_base + dram_bytes
        self.sbuf_words = cfg.partitions * cfg.sbuf_bytes_per_partition // self.W
        self.ram = AxiRam(AxiBus.from_prefix(dut, "axi", bus_separator="__"), dut.clk, dut.rst,
                          size=self.dram_limit)
        for ch in ("aw_channel", "w_channel", "b_channel"):
            getattr(self.ram.write_if, ch).log.setLevel("WARNING")
        self.ram.write_if.log.setLevel("ERROR")
        self.ram.read_if.log.setLevel("ERROR")
        self.poison = []                 # (lo, hi) DRAM byte ranges that answer SLVERR
        self._wrap_poison()

    def _wrap_poison(self):
        rd, wr = self.ram.read_if, self.ram.write_if
        orig_r, orig_w = rd._read, wr._write

        async def _read(address, length):
            if any(lo <= address + k < hi for lo, hi in self.poison for k in range(length)):
                raise IOError("poisoned")
            return await orig_r(address, length)

        async def _write(address, data):
            if any(lo <= address + k < hi for lo, hi in self.poison for k in range(len(data))):
                raise IOError("poisoned")
            return await orig_w(address, data)

        rd._read, wr._write = _read, _write

    def start_monitor(self):
        """Record every AXI address handshake as ``(channel, id, addr, len)`` in
        ``self.bursts`` and the largest number of read / write bursts in flight in
        ``self.max_out`` (a per-cycle coroutine; the RAM model is per-cycle Python anyway)."""
        self.bursts = []
        self.bursts_checked = 0
        self.max_out = [0, 0]
        cocotb.start_soon(self._monitor())

    async def _monitor(self):
        dut = self.dut
        rd = wr = 0
        while True:
            await RisingEdge(dut.clk)
            if int(dut.rst.value):
                rd = wr = 0
                continue
            if int(dut.dut.axi__arvalid.value) and int(dut.dut.axi__arready.value):
                self.bursts.append(("ar", int(dut.dut.axi__arid.value),
                                    int(dut.dut.axi__araddr.value), int(dut.dut.axi__arlen.value)))
                rd += 1
            if int(dut.dut.axi__rvalid.value) and int(dut.dut.axi__rready.value) \
                    and int(dut.dut.axi__rlast.value):
                rd -= 1
            if int(dut.dut.axi__awvalid.value) and int(dut.dut.axi__awready.value):
                self.bursts.append(("aw", int(dut.dut.axi__awid.value),
                                    int(dut.dut.axi__awaddr.value), int(dut.dut.axi__awlen.value)))
                wr += 1
            if int(dut.dut.axi__bvalid.value) and int(dut.dut.axi__bready.value):
                wr -= 1
            self.max_out = [max(self.max_out[0], rd), max(self.max_out[1], wr)]

    def check_bursts(self, batch, what):
        """Every burst recorded: within one 4 KiB page, at most 256 beats, inside the DRAM
        extent of a descriptor of its queue (its ID), on the right side; at most
        ``dma_outstanding`` in flight per direction."""
        W = self.W
        for ch, bid, addr, ln in self.bursts:
            end = addr + (ln + 1) * W - 1
            assert addr // 4096 == end // 4096 and ln < 256 and addr % W == 0, \
                self.fail_text(what, f"{ch} burst {addr:#x}+{ln + 1} beats crosses 4 KiB")
            ok = False
            for q, d in batch:
                if q != bid:
                    continue
                if G.check(self.cfg, d, dram_base=self.dram_base, dram_limit=self.dram_limit,
                           element_ops=self.cfg.dma_element_ops)[0]:
                    continue                    # rejected: issues no burst
                # reads: the source; an element op also reads the old destination
                sides = (0, 1) if ch == "ar" and d.op != G.OP_COPY else (0 if ch == "ar" else 1,)
                for side in sides:
                    if (d.src_space if side == 0 else d.dst_space) != G.DRAM:
                        continue
                    lo, hi = G.extent(d, side)
                    if lo // W * W <= addr and end <= hi // W * W + W - 1:
                        ok = True
            assert ok, self.fail_text(what, f"{ch} burst id {bid} {addr:#x}+{ln + 1} beats "
                                            f"matches no descriptor of queue {bid}")
        self.bursts_checked += len(self.bursts)
        out = self.cfg.dma_outstanding
        assert max(self.max_out) <= out, self.fail_text(what, f"{self.max_out} bursts in "
                                                              f"flight, limit {out}")
        self.bursts = []

    def set_backpressure(self, rng: random.Random, level):
        """Random pauses on every AXI channel of the RAM (``level`` = pause probability)."""
        def gen(seed):
            r = random.Random(seed)
            while True:
                yield r.random() < level
        chans = [self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                 self.ram.write_if.b_channel, self.ram.read_if.ar_channel,
                 self.ram.read_if.r_channel]
        for ch in chans:
            ch.set_pause_generator(gen(rng.randrange(1 << 30)) if level else None)
            if not level:
                ch.pause = False        # a killed generator may leave the channel paused

    async def reset(self):
        await super().reset(start=0, n_desc=0, clear=0, sbuf_stall=0, rd_delay=0, b_delay=0,
                            force_rresp=0, force_bresp=0, sem_rd=0, sem_set_valid=0,
                            sem_set_sem=0, sem_set_value=0, dram_base=self.dram_base,
                            dram_limit=self.dram_limit)
        await self.zero_sems()
        #: The golden stochastic-rounding stream of the engine (restarted by reset).
        self.sr = G.sr_stream(self.cfg, 0)

    async def zero_sems(self):
        """Set every semaphore to 0 (the semaphore memory is not cleared by reset)."""
        dut = self.dut
        dut.sem_set_valid.value = 1
        dut.sem_set_value.value = 0
        for s in range(self.cfg.semaphores):
            dut.sem_set_sem.value = s
            await RisingEdge(dut.clk)
        dut.sem_set_valid.value = 0
        await RisingEdge(dut.clk)

    # --- memories -----------------------------------------------------------------------------
    def load(self, mem: G.Memory):
        self.ram.write(self.dram_base, bytes(mem.dram))
        W, sm = self.W, self.dut.sbuf_mem
        for i in range(self.sbuf_words):
            sm[i].value = int.from_bytes(mem.sbuf[i * W:(i + 1) * W], "little")

    def read_sbuf(self):
        W, sm = self.W, self.dut.sbuf_mem
        return b"".join(int(sm[i].value).to_bytes(W, "little") for i in range(self.sbuf_words))

    def read_dram(self):
        return self.ram.read(self.dram_base, self.dram_bytes)

    def random_memory(self, rng: random.Random):
        n = self.cfg.partitions * self.cfg.sbuf_bytes_per_partition
        return G.Memory(self.cfg, dram_base=self.dram_base, dram_bytes=self.dram_bytes,
                        dram=rng.randbytes(self.dram_bytes), sbuf=rng.randbytes(n))

    async def read_sems(self):
        vals = []
        for s in range(self.cfg.semaphores):
            self.dut.sem_rd.value = s
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            vals.append(int(self.dut.sem_data.value))
            await RisingEdge(self.dut.clk)
        return vals

    # --- a batch ------------------------------------------------------------------------------
    async def run_batch(self, batch, *, timeout=None):
        """Feed ``batch`` (``[(queue, Descriptor)]``) and wait for ``done`` (bounded)."""
        dut = self.dut
        dm = dut.desc_mem
        for j, (q, d) in enumerate(batch):
            dm[j].value = (q << 512) | d.to_int()
        dut.n_desc.value = len(batch)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await RisingEdge(dut.clk)
        words = sum(d.count * 4 // self.W + 2 * d.count + 4
                    + (8 * d.count if G.elementwise(d) else 0) for _, d in batch)
        limit = timeout or (40 * words + 400 * len(batch) + 2000)
        await self.wait_high(dut.done, cycles=limit, what=f"batch of {len(batch)} descriptors")
        out = {k: int(getattr(dut, k).value) for k in ("cycles", "t_first", "t_last", "err")}
        Q = self.cfg.dma_queues
        qc, qi, cp = int(dut.q_code.value), int(dut.q_info.value), int(dut.completed.value)
        out["codes"] = [((qc >> (8 * q)) & 0xFF, (qi >> (32 * q)) & 0xFFFFFFFF) for q in range(Q)]
        out["completed"] = [(cp >> (16 * q)) & 0xFFFF for q in range(Q)]
        await RisingEdge(dut.clk)
        return out

    async def clear_all(self):
        self.dut.clear.value = (1 << self.cfg.dma_queues) - 1
        await RisingEdge(self.dut.clk)
        self.dut.clear.value = 0
        await RisingEdge(self.dut.clk)
