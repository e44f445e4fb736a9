# SPDX-License-Identifier: Apache-2.0
"""A deliberately naive Python model of SBUF's contents (docs/memory.md §5), written from the
spec: byte arrays per partition, a row access = the 32-bit lane at ``addr & ~3`` of every masked
partition, a partition access = the ``sbuf_word_bytes`` word at ``addr`` of one partition."""

from __future__ import annotations

import numpy as np

__all__ = ["SbufModel"]


class SbufModel:
    """Bytes of every partition; ``row_*`` / ``part_*`` apply one access."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.mem = np.zeros((cfg.partitions, cfg.sbuf_bytes_per_partition), dtype=np.uint8)

    def row_write(self, addr, mask, be, wdata):
        a = addr & ~3
        for p in range(self.cfg.partitions):
            if mask >> p & 1:
                for j in range(4):
                    if be >> j & 1:
                        self.mem[p, a + j] = (wdata[p] >> (8 * j)) & 0xFF

    def row_read(self, addr):
        a = addr & ~3
        return [int.from_bytes(self.mem[p, a:a + 4].tobytes(), "little")
                for p in range(self.cfg.partitions)]

    def part_write(self, part, addr, be, wdata):
        WB = self.cfg.sbuf_word_bytes
        for j in range(WB):
            if be >> j & 1:
                self.mem[part, addr + j] = (wdata >> (8 * j)) & 0xFF

    def part_read(self, part, addr):
        WB = self.cfg.sbuf_word_bytes
        return int.from_bytes(self.mem[part, addr:addr + WB].tobytes(), "little")
