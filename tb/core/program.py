# SPDX-License-Identifier: Apache-2.0
"""Programs for the whole core: a DRAM image with one instruction queue per engine, DMA
descriptors and data, built from assembly text (``golden/asm.py``) and ``golden/dma.py``
descriptors. Layout (byte addresses in DRAM): queues from :data:`QUEUE_BASE`, ``QUEUE_BYTES``
each in ``rtl.isa.ENGINES`` order, descriptors from :data:`DESC_BASE`, data from
:data:`DATA_BASE`."""

from __future__ import annotations

from dataclasses import dataclass, field

from golden.asm import assemble
from golden.dma import Descriptor
from rtl import isa

__all__ = ["CoreProgram", "QUEUE_BASE", "QUEUE_BYTES", "DESC_BASE", "DATA_BASE", "DRAM_BYTES"]

QUEUE_BASE = 0x0000
QUEUE_BYTES = 0x2000            # 64 instructions per engine
DESC_BASE = 0xC000
DATA_BASE = 0x10000
DRAM_BYTES = 1 << 20


@dataclass
class CoreProgram:
    """Assembly per engine, descriptors and DRAM data; :meth:`image` lays them out."""
    queues: dict = field(default_factory=dict)        # engine -> assembly text
    descriptors: list = field(default_factory=list)   # Descriptor, in DESC_BASE order
    data: dict = field(default_factory=dict)          # DRAM address -> bytes

    def desc_addr(self, i):
        """DRAM address of descriptor ``i``."""
        return DESC_BASE + 64 * i

    def add_descriptor(self, d: Descriptor):
        self.descriptors.append(d)
        return len(self.descriptors) - 1

    def queue_base(self, engine):
        return QUEUE_BASE + QUEUE_BYTES * isa.ENGINES.index(engine)

    def encoded(self):
        """``{engine: bytes}`` of each queue."""
        return {e: assemble(t) for e, t in self.queues.items()}

    def image(self):
        """``(dram bytearray, {engine: (base, count)})``."""
        dram = bytearray(DRAM_BYTES)
        qs = {}
        for e, raw in self.encoded().items():
            base = self.queue_base(e)
            if len(raw) > QUEUE_BYTES - isa.INSTR_BYTES:
                raise ValueError(f"queue {e} holds at most {QUEUE_BYTES // isa.INSTR_BYTES - 1} "
                                 f"instructions, not {len(raw) // isa.INSTR_BYTES}")
            dram[base:base + len(raw)] = raw
            qs[e] = (base, len(raw) // isa.INSTR_BYTES)
        for i, d in enumerate(self.descriptors):
            a = self.desc_addr(i)
            if a + 64 > DATA_BASE:
                raise ValueError("too many descriptors for the descriptor area")
            dram[a:a + 64] = d.pack()
        for a, b in self.data.items():
            dram[a:a + len(b)] = b
        return dram, qs
