# SPDX-License-Identifier: Apache-2.0
"""The cocotb driver of :class:`tb.vector.harness.VecTop`: packed requests of the priority
``hog`` row ports, and SBUF / PSUM rows written and read through them (every wait bounded)."""

from __future__ import annotations

import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from tb.base import TB

__all__ = ["VecTB", "SBUF", "PSUM"]

#: Memory selectors of the hog row ports and write monitors.
SBUF, PSUM = 1, 2


class VecTB(TB):
    def __init__(self, dut):
        super().__init__(dut)
        c = self.cfg
        self.P = c.partitions
        self.full = (1 << self.P) - 1

    def req(self, mem, addr, we=0, wdata=0, mask=None, be=0xF):
        """The packed request of a hog row port (``req_layout``: addr, mask, we, be, wdata)."""
        from rtl.mem.port import RowPort
        lay = RowPort.Signature(self.cfg, "sbuf" if mem == SBUF else "psum").req_layout
        v = 0
        for name, f in lay:
            x = {"addr": addr, "mask": self.full if mask is None else mask, "we": we,
                 "be": be, "wdata": wdata}[name]
            v |= (x & ((1 << f.width) - 1)) << f.offset
        return v

    def hog(self, mem):
        return self.dut.sbuf_hog__req__valid if mem == SBUF else self.dut.psum_hog__req__valid

    async def poke_rows(self, mem, words):
        """Write ``words`` (``(P, n)`` uint32 lanes) into lanes 0..n-1 of ``mem`` through its
        hog port, one lane of every partition per granted request (bounded)."""
        d = self.dut
        pre = "sbuf_hog" if mem == SBUF else "psum_hog"
        valid, payload = getattr(d, f"{pre}__req__valid"), getattr(d, f"{pre}__req__payload")
        ready = getattr(d, f"{pre}__req__ready")
        n = words.shape[1]
        for e in range(n):
            wdata = 0
            for p in range(self.P):
                wdata |= int(words[p, e]) << (32 * p)
            payload.value = self.req(mem, 4 * e if mem == SBUF else e, we=1, wdata=wdata)
            valid.value = 1
            for _ in range(50):
                await ReadOnly()
                granted = int(ready.value)
                await RisingEdge(d.clk)
                if granted:
                    break
            else:
                raise AssertionError(self.fail_text("preload", f"{pre} write {e} not granted"))
        valid.value = 0

    async def peek_rows(self, mem, n):
        """Read lanes 0..n-1 of ``mem`` through its hog port: ``(P, n)`` uint32."""
        d = self.dut
        pre = "sbuf_hog" if mem == SBUF else "psum_hog"
        valid, payload = getattr(d, f"{pre}__req__valid"), getattr(d, f"{pre}__req__payload")
        ready = getattr(d, f"{pre}__req__ready")
        rv, rd = getattr(d, f"{pre}__rsp__valid"), getattr(d, f"{pre}__rsp__payload")
        out = np.zeros((self.P, n), np.uint32)
        issued = got = 0
        for _ in range(4 * n + 100):
            if issued < n:
                payload.value = self.req(mem, 4 * issued if mem == SBUF else issued)
            valid.value = int(issued < n)
            await ReadOnly()
            fire = issued < n and int(ready.value)
            if int(rv.value):
                v = int(rd.value)
                for p in range(self.P):
                    out[p, got] = (v >> (32 * p)) & 0xFFFFFFFF
                got += 1
            await RisingEdge(d.clk)
            issued += int(bool(fire))
            if got == n:
                break
        valid.value = 0
        if got != n:
            raise AssertionError(self.fail_text("dump", f"{pre}: {got} of {n} lanes read"))
        return out
