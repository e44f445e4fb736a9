# SPDX-License-Identifier: Apache-2.0
"""Golden ISA simulator: runs the binary per-engine programs of :mod:`rtl.isa` on a DRAM window,
the SBUF, the PSUM and the semaphore file, bit-exact, and estimates the cycles of every
instruction (``docs/kernels.md`` is the user's page; ``docs/isa.md`` §6 the semantics).

State
-----
* ``mem``: a :class:`golden.dma.Memory` (DRAM window from ``dram_base`` and the flat,
  partition-major SBUF, ``partitions x sbuf_bytes_per_partition`` bytes): the DMA's view.
* ``psum``: ``np.uint8 [partitions, psum_bytes_per_partition]``; :attr:`IsaSim.psum32` views it
  as FP32 bits ``[partitions, psum_banks, psum_bank_fp32]``, so ``psum32[m, bank, n]`` is
  ``golden.tensor.PsumModel.state[bank, m, n]`` for ``m < pe_cols``.
* ``sems``: ``cfg.semaphores`` counters of ``cfg.semaphore_bits`` bits.
* one stream per engine of :data:`rtl.isa.ENGINES` (its program: 128-byte instructions), and one
  stream per DMA queue (``cfg.dma_engines x cfg.dma_queues``) fed by ``dma_start``.

Scheduling
----------
Every instruction runs atomically (reads and writes at once) when the scheduler picks its
stream. A stream may run its next instruction when its wait (``sem[w] >= value``) holds; posts
are applied when the instruction completes. Two policies:

* ``"timed"`` (default): a discrete-event schedule on the cycle model (:class:`Timing`): the
  stream whose next instruction can issue earliest runs first (ties: engines in
  :data:`rtl.isa.ENGINES` order, then DMA engines and queues in index order). A wait sees only
  the posts visible at that cycle. This gives the timeline.
* a :class:`random.Random`: any stream whose wait holds with the posts applied so far, picked at
  random (the timeline is then meaningless). Used to check that a program's result does not
  depend on the interleaving.

Sems only grow (waits do not decrement), so the set of instructions a program can run is the
same under every policy, and a **race-free** program (every pair of instructions of different
streams touching a common byte, one of them writing, ordered through semaphores) gives the same
memory under every policy. A program with a race is undefined; :func:`find_races` reports races
(conservatively, on each access's closed-form extent).

Errors (``docs/architecture.md`` §11.2-11.3)
-------------------------------------------
Checked before an instruction touches anything, in this order: ``E_OPCODE``
(:func:`rtl.isa.check_reserved`), ``E_SEM`` (a wait or post on a semaphore ``>= semaphores``),
then the engine's checks in the order of its RTL decoder and engine (``docs/kernels.md`` §3:
the tensor decoder's static checks report the queue index as ERR_INFO, everything else 0). ``dma_start``: ``E_DESC`` (address not a multiple of 64, DMA engine or
queue out of range), ``E_AXI`` (descriptors outside the DRAM window); each descriptor:
:func:`golden.dma.check`. A post that overflows ``2^semaphore_bits - 1`` is ``E_SEM`` (source
``"sem"``). When every unfinished engine stream waits on a semaphore that can no longer reach its
value, the first of them in :data:`rtl.isa.ENGINES` order fails with ``E_TIMEOUT``; with
``run(..., watchdog=W)`` (timed policy) any wait longer than ``W`` cycles does, earliest first,
like the ``WATCHDOG`` register. :meth:`IsaSim.run_queues` runs programs from DRAM rings
(``E_QUEUE``, fetch ``E_AXI``). The first error is kept (:class:`SimError`: code, source, queue
index, info, detail) and every stream stops; the failing instruction wrote nothing.

Engine hooks
------------
Each engine opcode runs through :data:`OP_HOOKS` (``name -> OpHook``, :func:`register_op`):
every opcode of ``pe``, ``dve`` (each ``golden.vector`` opcode ``rtl.isa`` names the same),
``act`` (``activation``, ``act_table_load``), ``sp`` and ``cc`` is registered by the engine's hook
module. A valid opcode without a hook raises ``NotImplementedError`` naming it.

Modules
-------
* :mod:`~golden.isasim.errors`: the error codes, :class:`Fault`, :class:`SimError`;
* :mod:`~golden.isasim.timing`: :class:`Timing`, the shared AXI channels, bank sharing;
* :mod:`~golden.isasim.hooks`: the opcode registry and what the hooks share (footprints, the
  decoders' AP view);
* :mod:`~golden.isasim.machine`: :class:`IsaSim` (streams, scheduler, state);
* :mod:`~golden.isasim.races`: :func:`find_races`;
* one hook module per engine: :mod:`~golden.isasim.tensor_engine`,
  :mod:`~golden.isasim.sync_engine` (``dma_start`` and the DMA data timing),
  :mod:`~golden.isasim.vector_engine`, :mod:`~golden.isasim.scalar_engine`,
  :mod:`~golden.isasim.collective_engine` (the CC queue). A new engine adds
  its module here and imports it below, which registers its opcodes.
"""

# the engine modules register their opcodes when imported
from golden.isasim.errors import (E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_AXI, E_DESC,
                                  E_FLAGS, E_FORMAT, E_LINK, E_OPCODE, E_QUEUE, E_SEM, E_SHAPE,
                                  E_SPARSE_TAG, E_TIMEOUT, ERROR_NAMES, Fault, SimError)
from golden.isasim.collective_engine import CCRequest
from golden.isasim.hooks import OP_HOOKS, OpHook, decoder_form, register_op
from golden.isasim.machine import Event, IsaSim, split_program
from golden.isasim.races import find_races
from golden.isasim.scalar_engine import act_instr, act_slots, table_words
from golden.isasim.sync_engine import dma_data
from golden.isasim.tensor_engine import STATIC_DETAIL, pe_latency, pe_swap_guard, sparse_load_dtypes
from golden.isasim.timing import Timing, port_sharing
from golden.isasim.vector_engine import vec_instr

__all__ = [
    "E_OPCODE", "E_FORMAT", "E_AP_PART", "E_AP_RANGE", "E_SHAPE", "E_FLAGS", "E_SPARSE_TAG",
    "E_SEM", "E_TIMEOUT", "E_AXI", "E_QUEUE", "E_LINK", "E_DESC", "E_AP_ALIGN", "E_AP_FORM",
    "ERROR_NAMES", "Fault", "SimError", "Timing", "sparse_load_dtypes", "OpHook", "OP_HOOKS",
    "register_op", "Event", "IsaSim", "pe_latency", "pe_swap_guard", "find_races",
    "split_program", "STATIC_DETAIL", "act_instr", "act_slots", "table_words", "vec_instr",
    "decoder_form", "port_sharing", "dma_data", "CCRequest",
]
