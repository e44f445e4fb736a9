# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's DMA operations (sync engine ``dma_start``): loads, stores, and the
N:M sparse weights' decompression by one-element descriptors."""

from __future__ import annotations

import numpy as np

from golden import dma as gdma
from golden.ap import ELEM_BYTES, SBUF
from golden.kernel.types import DramRect

from golden.kernel.checks import operation

__all__ = ["DmaOps"]


class DmaOps:
    """DMA operations of :class:`golden.kernel.Kernel`."""

    def _queue(self, queue):
        c = self.cfg
        if queue is None:       # round-robin, alternating the DMA engines first
            g, self._queue_rr = self._queue_rr, (self._queue_rr + 1) % (c.dma_engines
                                                                        * c.dma_queues)
            queue = (g % c.dma_engines) * c.dma_queues + (g // c.dma_engines)
        if not 0 <= queue < c.dma_engines * c.dma_queues:
            raise ValueError(f"queue must be in [0, {c.dma_engines * c.dma_queues}), "
                             f"not {queue}")
        return divmod(queue, c.dma_queues)

    def _dma(self, tile, tensor, row0, col0, to_sbuf, queue):
        c = self.cfg
        if tile.mem != SBUF:
            raise ValueError(f"load/store tile must be in SBUF, not PSUM ({tile.name}): PSUM is "
                             f"read by the vector/scalar engines (copy)")
        if tile.dtype != tensor.dtype:
            raise ValueError(f"load/store tile dtype {tile.dtype} must equal the tensor's "
                             f"{tensor.dtype} (casts need the DMA element path, [later])")
        rows, cols = tensor.shape
        if not (0 <= row0 and row0 + tile.parts <= rows and 0 <= col0
                and col0 + tile.elems <= cols):
            raise ValueError(f"tile {tile.name} [{tile.parts} x {tile.elems}] at ({row0}, "
                             f"{col0}) must lie in {tensor.name} {tensor.shape}")
        es = tensor.esize
        dram_addr = tensor.addr + row0 * tensor.pitch + col0 * es
        if (dram_addr - tile.offset) % c.sbuf_word_bytes:
            raise ValueError(f"load/store column {col0} of {tensor.name}: the DRAM address "
                             f"must sit in the tile's lane of the {c.sbuf_word_bytes}-byte word "
                             f"(docs/dma.md §3 rule 11); start at a word-aligned column")
        eq = self._queue(queue)
        sb = tile.offset
        code = gdma.DTYPE_CODES[tensor.dtype]
        if to_sbuf:
            d = dict(src=dram_addr, dst=sb, src_space=gdma.DRAM, dst_space=gdma.SBUF,
                     dims=((tile.elems, es, es), (tile.parts, tensor.pitch,
                                                  c.sbuf_bytes_per_partition)))
            reads, writes = [DramRect(tensor, row0, col0, tile.parts, tile.elems)], [tile]
        else:
            d = dict(src=sb, dst=dram_addr, src_space=gdma.SBUF, dst_space=gdma.DRAM,
                     dims=((tile.elems, es, es), (tile.parts, c.sbuf_bytes_per_partition,
                                                  tensor.pitch)))
            reads, writes = [tile], [DramRect(tensor, row0, col0, tile.parts, tile.elems)]

        def make(wait, post):
            desc = gdma.Descriptor(**d, src_dtype=code, dst_dtype=code, post=True,
                                   sem=post[0], inc=1)
            return ("dma", desc, eq, wait)
        self._emit("sp", eq, reads, writes, make)

    @operation("load")
    def load(self, tile, tensor, row0=0, col0=0, queue=None):
        """``tile[p, j] = tensor[row0 + p, col0 + j]`` by one DMA descriptor (queue: global
        index ``engine * dma_queues + queue``, default round-robin)."""
        self._dma(tile, tensor, row0, col0, True, queue)

    @operation("store")
    def store(self, tensor, tile, row0=0, col0=0, queue=None):
        """``tensor[row0 + p, col0 + j] = tile[p, j]`` by one DMA descriptor."""
        self._dma(tile, tensor, row0, col0, False, queue)

    @operation("sparse_load")
    def sparse_load(self, tile, values, tags, pattern, row0=0, col0=0, queue=None):
        """Decompress N:M weights into the dense SBUF ``tile`` [K_log, M] (bf16 or any 2-byte
        dense format): ``values`` is the DRAM tensor of kept values ``[K_phys, F]``
        (``golden.sparse.compress`` layout, ``K_phys = K_log n / m``), ``tags`` their positions
        (a numpy array, known when the kernel is built), the tile's rows ``row0 ..`` of the
        logical weights and columns ``col0 ..``. The tile is cleared (``memset``), then every kept value is copied into
        place by a one-element DMA descriptor (the tags become the addresses): the
        decompression path, for any pattern and a dense matmul after it (the tensor engine's
        sparse mode, which keeps the weights compressed in SBUF, is :meth:`sparse_matmul`).
        Returns the descriptor count."""
        from rtl.config import parse_sparse_pattern
        n, m = parse_sparse_pattern(pattern)      # decompressed by DMA: any pattern will do
        tags = np.asarray(tags)
        if tile.mem != SBUF or tile.dtype != values.dtype or ELEM_BYTES[tile.dtype] != 2:
            raise ValueError(f"sparse_load tile must be an SBUF tile of the values' 2-byte "
                             f"format {values.dtype}, not {tile.mem} {tile.dtype}")
        if tags.shape != values.shape:
            raise ValueError(f"sparse_load tags must have the values' shape {values.shape}, "
                             f"not {tags.shape}")
        self.memset(tile, 0.0)
        es, SBP = 2, self.cfg.sbuf_bytes_per_partition
        count = 0
        for r in range(tile.parts):
            g, pos = divmod(row0 + r, m)
            for j in range(tile.elems):
                hit = [kp for kp in range(g * n, (g + 1) * n) if tags[kp, col0 + j] == pos]
                if not hit:
                    continue
                d = gdma.Descriptor(src=values.addr + hit[0] * values.pitch + es * (col0 + j),
                                    dst=r * SBP + tile.offset + es * j, src_space=gdma.DRAM,
                                    dst_space=gdma.SBUF, dims=((1, es, es),),
                                    src_dtype=gdma.DTYPE_CODES[values.dtype],
                                    dst_dtype=gdma.DTYPE_CODES[values.dtype])
                self.descriptor(d, reads=[values], writes=[tile], queue=queue)
                count += 1
        return count

