# SPDX-License-Identifier: Apache-2.0
"""Kernel API: NKI-like Python that allocates DRAM tensors and SBUF/PSUM tiles, emits
one program per engine for :mod:`golden.isasim` (and the RTL core: the same bytes), and inserts
the semaphore waits and posts from the data dependencies (``docs/kernels.md``).

A :class:`Kernel` records operations in program order. Each operation reads and writes
*resources* (a tile, the rectangle of a DRAM tensor a load or store touches) and completes on a
*completion stream*: its engine (an engine instruction posts ``sem[engine index] += 1`` at
completion **only when a later operation waits for it**, decided when the kernel is built: a
post makes the tensor decoder wait for the array to drain, docs/core.md §4, so matmul chains
without a consumer stream; so ``sem[e] >= j`` means "e's j-th posting instruction, and
everything before it, retired": retire is in order) or its DMA queue (every descriptor posts
its queue's semaphore, ``len(ENGINES) + engine * dma_queues + queue``). Before an operation,
the issuing engine waits for the last writer of everything it touches and, when it writes, for
every reader since that write (the latest count per completion stream; a wait the same issuer
already made is not repeated; more than one wait becomes ``nop``s with a wait in front of the
instruction). Operations on one completion stream are ordered by program order (an engine's
in-order stream, a DMA queue's FIFO) and need no semaphore.

So the emitted programs are race-free by construction (:func:`golden.isasim.find_races` finds
nothing) and give the result of running the operations one after the other.

Layout rules: tiles start at partition 0 and at a multiple of the SBUF word
(``cfg.sbuf_word_bytes``); DRAM tensors are row-major with a row pitch rounded up to the word;
a load/store column start must be word-aligned (the DMA copy's lane rule, docs/dma.md §3, rule
11). The tensor engine computes ``stationary.T @ moving``, so a GEMM ``C = A @ B`` keeps ``A``
transposed in DRAM (``AT [K, M]``, written by the host, as NKI's ``lhsT``).

Modules: :mod:`~golden.kernel.types` (tensors, tiles, the built program),
:mod:`~golden.kernel.alloc` (allocation), :mod:`~golden.kernel.deps` (dependencies, semaphores,
the build), one module of operations per engine (:mod:`~golden.kernel.dma_ops`,
:mod:`~golden.kernel.tensor_ops`, :mod:`~golden.kernel.vector_ops`,
:mod:`~golden.kernel.scalar_ops`) and :mod:`~golden.kernel.builder` (:class:`Kernel`, which
combines them). Kernels built with it (the tiled GEMM, the MLP, ...) are in
:mod:`golden.kernels`.
"""

from golden.ap import ELEM_BYTES
from golden.kernel.builder import Kernel
from golden.kernel.types import (ENGINE_OF, DramRect, DramTensor, KernelProgram, Tile, alu_code,
                                 nonzero_imm, sparse_pairs, sub_tile)

__all__ = ["DramTensor", "DramRect", "Tile", "KernelProgram", "Kernel", "ENGINE_OF",
           "sparse_pairs", "sub_tile", "alu_code", "nonzero_imm", "ELEM_BYTES"]
