# SPDX-License-Identifier: Apache-2.0
"""The requester ports of SBUF and PSUM: the one interface every engine uses to reach memory.

Two kinds of port (``docs/memory.md`` §5):

* a **row port** (:class:`RowPort`) addresses the same location in a set of partitions: what an
  access pattern does (``rtl/mem/ap.py`` issues ``addr`` + partition ``mask``). One 32-bit lane
  per partition per access: one FP32 element, two 16-bit or four 8-bit elements. The tensor
  engine (stationary, moving), the vector and scalar engines use row ports, on SBUF and on PSUM.
* a **partition port** (:class:`PartPort`) addresses one SBUF word (``sbuf_word_bytes``, as wide
  as the AXI data bus) of one partition: what the DMA needs so that one AXI beat is one SBUF
  write.

Both are requests on a :class:`amaranth.lib.stream` (``req``, with back-pressure: a request that
loses arbitration sees ``ready = 0`` and stays, it is never dropped or reordered) and read data
on ``rsp`` (no back-pressure: a requester keeps room for what it asked for). Read data of the
requests of one port come back in request order; ``rsp.valid`` marks them, so a requester does not
hard-code the memory's latency (the memory publishes it as ``latency`` on its own signature).

The requester's view is the signature below (``Out`` = driven by the requester); the memory
holds ``RowPort.Signature(...).flip()``.
"""

from __future__ import annotations

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from rtl.config import LANE_BITS, CoreConfig, check_config

__all__ = ["RowPort", "PartPort", "SBUF", "PSUM", "LANE_BITS"]

#: Memory selectors of a row port.
SBUF, PSUM = "sbuf", "psum"


def _bits(n):
    """Bits to number ``n`` things (at least 1)."""
    return max(1, (n - 1).bit_length())


class RowPort:
    """A row port: one 32-bit lane of each partition in ``mask`` at one address."""

    class Signature(wiring.Signature):
        """Requester's view of a row port on ``memory`` (``"sbuf"`` or ``"psum"``).

        ``req`` payload (``req_layout``):

        * ``addr``: SBUF: byte address inside the partition, a multiple of 4 (the lane holding
          the element; bits 1..0 are ignored); PSUM: FP32 entry index
          ``bank * psum_bank_fp32 + entry``.
        * ``mask``: partitions taking part (``partitions`` bits; at least one).
        * ``we``: write (1) or read (0).
        * ``be``: byte enables of the 32-bit lane (writes; the same in every partition).
        * ``wdata``: ``ArrayLayout(32, partitions)``, lane p for partition p.

        ``rsp`` payload: ``ArrayLayout(32, partitions)`` read data (lanes outside the mask are
        undefined), one beat per read request.
        """

        def __init__(self, cfg: CoreConfig, memory: str):
            check_config(cfg, "RowPort")
            if memory not in (SBUF, PSUM):
                raise ValueError(f"RowPort memory must be 'sbuf' or 'psum', not {memory!r}")
            self.memory = memory
            if memory == SBUF:
                self.addr_bits = _bits(cfg.sbuf_bytes_per_partition)
            else:
                self.addr_bits = _bits(cfg.psum_banks * cfg.psum_bank_fp32)
            self.data_layout = data.ArrayLayout(LANE_BITS, cfg.partitions)
            self.req_layout = data.StructLayout({
                "addr": self.addr_bits, "mask": cfg.partitions, "we": 1, "be": LANE_BITS // 8,
                "wdata": self.data_layout,
            })
            super().__init__({
                "req": Out(stream.Signature(self.req_layout)),
                "rsp": In(stream.Signature(self.data_layout, always_ready=True)),
            })


class PartPort:
    """A partition port: one SBUF word of one partition."""

    class Signature(wiring.Signature):
        """Requester's view of an SBUF partition port.

        ``req`` payload (``req_layout``):

        * ``part``: the partition.
        * ``addr``: byte address inside the partition, a multiple of ``sbuf_word_bytes``.
        * ``we``: write (1) or read (0).
        * ``be``: byte enables of the word (``sbuf_word_bytes`` bits; writes).
        * ``wdata``: the word (``8 * sbuf_word_bytes`` bits).

        ``rsp`` payload: the word read, one beat per read request.
        """

        def __init__(self, cfg: CoreConfig):
            check_config(cfg, "PartPort")
            self.addr_bits = _bits(cfg.sbuf_bytes_per_partition)
            self.word_bits = 8 * cfg.sbuf_word_bytes
            self.req_layout = data.StructLayout({
                "part": _bits(cfg.partitions), "addr": self.addr_bits, "we": 1,
                "be": cfg.sbuf_word_bytes, "wdata": self.word_bits,
            })
            super().__init__({
                "req": Out(stream.Signature(self.req_layout)),
                "rsp": In(stream.Signature(self.word_bits, always_ready=True)),
            })
