# SPDX-License-Identifier: Apache-2.0
"""The kernel builder, :class:`Kernel`: its state, and the allocator, dependency tracking and
per-engine operations of the mixins it combines."""

from __future__ import annotations

from golden.kernel.alloc import Allocator
from golden.kernel.cc_ops import CCOps
from golden.kernel.deps import Dependencies
from golden.kernel.dma_ops import DmaOps
from golden.kernel.scalar_ops import ScalarOps
from golden.kernel.tensor_ops import TensorOps
from golden.kernel.vector_ops import VectorOps
from rtl.config import CoreConfig, check_config
from rtl.isa import ENGINES

__all__ = ["Kernel"]


class Kernel(CCOps, Allocator, Dependencies, DmaOps, TensorOps, VectorOps, ScalarOps):
    """Build a kernel (see the module docstring).

    Parameters
    ----------
    cfg : CoreConfig
    dram_bytes : int
        Size of the DRAM image (tensors, then the descriptors).
    dram_base : int
        DRAM address of the image's first byte.
    rank, ranks : int
        This kernel's rank on a ring of ``ranks`` cores (the collectives of
        :mod:`golden.kernel.cc_ops`; :class:`golden.kernel.multi.MultiKernel` builds one
        kernel per rank).
    """

    def __init__(self, cfg: CoreConfig, *, dram_bytes=1 << 20, dram_base=0, rank=0, ranks=1):
        check_config(cfg, "Kernel")
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise ValueError(f"Kernel ranks must be an int >= 1, not {ranks!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < ranks:
            raise ValueError(f"Kernel rank must be in [0, {ranks - 1}], not {rank!r}")
        self.rank, self.ranks = rank, ranks
        self.cc_log = []                          # this rank's collectives (CCRecord)
        self._cc_sends = {}                       # stream -> (src, to) of an unpaired send
        self.cfg = cfg
        self.dram_base = dram_base
        self.dram = bytearray(dram_bytes)
        self._dram_top = 0
        self._sbuf_top = 0
        self._live = {}                           # SBUF tile uid -> (first, end) byte
        self._dead = []                           # freed (first, end, resource key)
        self._uid = 0
        self._next_bank = 0
        self._next_sbuf_bank = 0
        self._queue_rr = 0
        self.tensors = {}
        self.outputs = {}
        self._ops = {e: [] for e in ENGINES}     # engine -> [(make, wait dep, (stream, k))]
        self._posting = {}                        # engine stream -> {k: some op waits on it}
        self._count = {}                          # completion stream -> completions so far
        self._writer = {}                         # resource -> (stream, count)
        self._readers = {}                        # resource -> {stream: count}
        self._dram_rects = {}                     # DRAM tensor name -> {rectangle: None}
        self._waited = {e: {} for e in ENGINES}   # issuer -> stream -> count already waited
        self._pe_loaded = None                    # (AP, its writer) of the loaded weights
        self._act_table = None                    # function whose table the scalar engine holds
        self._op_label = None                     # label of the operation being recorded
        self._op_counts = {}                      # operation name -> calls so far
        nsem = len(ENGINES) + cfg.dma_engines * cfg.dma_queues
        if nsem > cfg.semaphores:
            raise ValueError(f"Kernel needs {nsem} semaphores (one per engine and DMA queue), "
                             f"cfg.semaphores is {cfg.semaphores}")

