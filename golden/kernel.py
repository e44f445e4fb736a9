# SPDX-License-Identifier: Apache-2.0
"""Kernel API (start): NKI-like Python that allocates DRAM tensors and SBUF/PSUM tiles, emits
one program per engine for :mod:`golden.isasim` (and the RTL core: the same bytes), and inserts
the semaphore waits and posts from the data dependencies (``docs/kernels.md``).

A :class:`Kernel` records operations in program order. Each operation reads and writes
*resources* (a tile, a whole DRAM tensor) and completes on a *completion stream*: its engine
(an engine instruction posts ``sem[engine index] += 1`` at completion **only when a later
operation waits for it**, decided when the kernel is built: a post makes the tensor decoder
wait for the array to drain, docs/core.md §4, so matmul chains without a consumer stream; so
``sem[e] >= j`` means "e's j-th posting instruction, and everything before it, retired":
retire is in order) or its DMA queue (every descriptor posts its queue's semaphore,
``len(ENGINES) + engine * dma_queues + queue``).
Before an operation, the issuing engine waits for the last writer of everything it touches and,
when it writes, for every reader since that write (the latest count per completion stream; a
wait the same issuer already made is not repeated; more than one wait becomes ``nop``s with a
wait in front of the instruction). Operations on one completion stream are ordered by program
order (an engine's in-order stream, a DMA queue's FIFO) and need no semaphore.

So the emitted programs are race-free by construction (:func:`golden.isasim.find_races` finds
nothing) and give the result of running the operations one after the other.

Layout rules: tiles start at partition 0 and at a multiple of the SBUF word
(``cfg.sbuf_word_bytes``); DRAM tensors are row-major with a row pitch rounded up to the word;
a load/store column start must be word-aligned (the DMA copy's lane rule, docs/dma.md §3, rule
11). The tensor engine computes ``stationary.T @ moving``, so a GEMM ``C = A @ B`` keeps ``A``
transposed in DRAM (``AT [K, M]``, written by the host, as NKI's ``lhsT``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from golden import dma as gdma
from golden.ap import ELEM_BYTES, PSUM, SBUF
from golden.asm import format_instr
from rtl.config import CoreConfig, check_config
from rtl.isa import ENGINES, OPS_BY_NAME, APEnc, Instr, encode

__all__ = ["DramTensor", "Tile", "KernelProgram", "Kernel", "gemm_kernel", "ENGINE_OF",
           "sparse_pairs"]

#: The engine each opcode issues on (the ISA's table).
ENGINE_OF = {name: op.engine for name, op in OPS_BY_NAME.items()}


@dataclass(frozen=True)
class DramTensor:
    """A row-major 2-D tensor in DRAM: ``name``, ``addr`` (first byte), ``shape`` (rows,
    cols), ``dtype`` (a :data:`golden.ap.ELEM_BYTES` name), ``pitch`` (bytes per row)."""
    name: str
    addr: int
    shape: tuple
    dtype: str
    pitch: int

    @property
    def esize(self):
        return ELEM_BYTES[self.dtype]

    def read(self, dram, dram_base=0):
        """The element codes ``[rows, cols]`` (uint32) from a DRAM image."""
        rows, cols = self.shape
        es = self.esize
        raw = np.frombuffer(bytes(dram[self.addr - dram_base:self.addr - dram_base
                                       + rows * self.pitch]), dtype=np.uint8)
        b = raw.reshape(rows, self.pitch)[:, :cols * es].reshape(rows, cols, es).astype(np.uint32)
        return np.bitwise_or.reduce(b << (8 * np.arange(es, dtype=np.uint32)), axis=2)


@dataclass(frozen=True)
class _DramRect:
    """Rows ``row0 .. row0 + rows`` x columns ``col0 .. col0 + cols`` of a DRAM tensor (what
    one load or store touches, for the dependency tracking)."""
    tensor: DramTensor
    row0: int
    col0: int
    rows: int
    cols: int


@dataclass(frozen=True)
class Tile:
    """An SBUF or PSUM tile: ``parts`` partitions from 0, ``elems`` elements of ``dtype`` per
    partition at byte ``offset`` (PSUM: ``bank * psum_bank_bytes``, ``bank`` set)."""
    mem: int
    parts: int
    elems: int
    dtype: str
    offset: int
    name: str
    uid: int
    bank: int | None = None

    def view(self, col0=0, cols=None, parts=None):
        """Columns ``[col0, col0 + cols)`` (and the first ``parts`` partitions) of this tile as
        a tile of its own: the same resource for the dependency tracking."""
        cols = self.elems - col0 if cols is None else cols
        parts = self.parts if parts is None else parts
        if not (0 <= col0 and 1 <= cols and col0 + cols <= self.elems
                and 1 <= parts <= self.parts):
            raise ValueError(f"tile {self.name} view [{parts} x {col0}:{col0 + cols}] must lie "
                             f"in [{self.parts} x 0:{self.elems}]")
        return Tile(self.mem, parts, cols, self.dtype, self.offset + col0 * ELEM_BYTES[self.dtype],
                    self.name, self.uid, self.bank)

    def bcast(self, n):
        """The :class:`rtl.isa.APEnc` reading element 0 of each partition ``n`` times (step 0):
        a per-partition scalar as the second source of an ``n``-element vector operation."""
        return APEnc(mem=self.mem, start=0, count=self.parts, dtype=self.dtype,
                     offset=self.offset, dims=((0, n),))

    def ap(self, col0=0, cols=None):
        """The :class:`rtl.isa.APEnc` of columns ``[col0, col0 + cols)`` of the tile."""
        cols = self.elems - col0 if cols is None else cols
        if not (0 <= col0 and 1 <= cols and col0 + cols <= self.elems):
            raise ValueError(f"tile {self.name} columns [{col0}, {col0 + cols}) must lie in "
                             f"[0, {self.elems})")
        return APEnc(mem=self.mem, start=0, count=self.parts, dtype=self.dtype,
                     offset=self.offset + col0 * ELEM_BYTES[self.dtype], dims=((1, cols),))


@dataclass
class KernelProgram:
    """What :meth:`Kernel.build` returns: ``programs`` (engine -> bytes), ``dram`` (the DRAM
    image: tensors and descriptors), ``dram_base``, ``tensors`` (name -> :class:`DramTensor`),
    ``outputs`` (name -> a :class:`DramTensor` or a dict ``{(row, col) tile origin: Tile}`` of
    PSUM/SBUF tiles), ``listing`` (engine -> assembly text), ``free`` (offset of the first
    unused byte of the image)."""
    programs: dict
    dram: bytearray
    dram_base: int
    tensors: dict
    outputs: dict
    listing: dict = field(default_factory=dict)
    free: int = 0           # first image byte after the tensors and descriptors

    def instructions(self):
        return {e: len(p) // 128 for e, p in self.programs.items()}

    def read_outputs(self, sim):
        """Every output as element codes (``uint32``) from a finished
        :class:`golden.isasim.IsaSim`: a DRAM tensor ``[rows, cols]``, or a dict of tiles
        assembled at their ``(row, col)`` origins (PSUM: FP32 bits)."""
        out = {}
        for name, where in self.outputs.items():
            if isinstance(where, DramTensor):
                out[name] = where.read(sim.mem.dram, sim.mem.dram_base)
                continue
            rows = max(r + t.parts for (r, _c), t in where.items())
            cols = max(c + t.elems for (_r, c), t in where.items())
            a = np.zeros((rows, cols), dtype=np.uint32)
            for (r, c), t in where.items():
                if t.mem == PSUM:
                    a[r:r + t.parts, c:c + t.elems] = sim.psum32[:t.parts, t.bank, :t.elems]
                else:
                    a[r:r + t.parts, c:c + t.elems] = sim.read_ap(sim.check_ap(t.ap(), "ap0"))
            out[name] = a
        return out

    def place_queues(self, base=None):
        """Write every engine's program into the DRAM image as a queue (docs/core.md §1) from
        ``base`` (default: after everything else, 128-aligned) and return ``{engine: (q_base,
        q_size, q_tail)}``: ``q_size`` the smallest power of two above the instruction count
        (the ring holds ``q_size - 1``), ``q_head`` 0. An engine with an empty program gets no
        queue. Feed it to :meth:`golden.isasim.IsaSim.run_queues` or to the core's CSRs."""
        top = base - self.dram_base if base is not None else self.free
        if top < self.free:
            raise ValueError(f"place_queues base must be >= {self.dram_base + self.free:#x} "
                             f"(after the tensors and descriptors), not {base:#x}")
        top = -(-top // 128) * 128
        out = {}
        for e, prog in self.programs.items():
            n = len(prog) // 128
            if not n:
                continue
            size = 1 << n.bit_length()          # > n: the ring holds size - 1
            if top + 128 * size > len(self.dram):
                raise ValueError(f"place_queues: the {e} queue does not fit in the DRAM image "
                                 f"of {len(self.dram)} bytes")
            self.dram[top:top + len(prog)] = prog
            out[e] = (self.dram_base + top, size, n)
            top += 128 * size
        return out


class Kernel:
    """Build a kernel (see the module docstring).

    Parameters
    ----------
    cfg : CoreConfig
    dram_bytes : int
        Size of the DRAM image (tensors, then the descriptors).
    dram_base : int
        DRAM address of the image's first byte.
    """

    def __init__(self, cfg: CoreConfig, *, dram_bytes=1 << 20, dram_base=0):
        check_config(cfg, "Kernel")
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
        nsem = len(ENGINES) + cfg.dma_engines * cfg.dma_queues
        if nsem > cfg.semaphores:
            raise ValueError(f"Kernel needs {nsem} semaphores (one per engine and DMA queue), "
                             f"cfg.semaphores is {cfg.semaphores}")

    # --- allocation ---------------------------------------------------------------------------
    def _word(self, n):
        W = self.cfg.sbuf_word_bytes
        return -(-n // W) * W

    def dram_tensor(self, name, shape=None, dtype="bf16", data=None):
        """A DRAM tensor ``[rows, cols]`` of ``dtype`` (element codes ``data`` written into the
        image, or zero)."""
        if name in self.tensors:
            raise ValueError(f"dram_tensor name {name!r} is already used")
        if dtype not in ELEM_BYTES:
            raise ValueError(f"dram_tensor dtype must be one of {sorted(ELEM_BYTES)}, "
                             f"not {dtype!r}")
        if data is not None:
            data = np.asarray(data)
            shape = data.shape
        if shape is None or len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"dram_tensor shape must be (rows >= 1, cols >= 1), not {shape!r}")
        es = ELEM_BYTES[dtype]
        pitch = self._word(shape[1] * es)
        addr = self._word(self._dram_top)
        if addr + shape[0] * pitch > len(self.dram):
            raise ValueError(f"dram_tensor {name!r} does not fit in dram_bytes = "
                             f"{len(self.dram)}")
        self._dram_top = addr + shape[0] * pitch
        t = DramTensor(name, self.dram_base + addr, tuple(shape), dtype, pitch)
        self.tensors[name] = t
        if data is not None:
            codes = data.astype(np.uint64)
            b = ((codes[..., None] >> (8 * np.arange(es, dtype=np.uint64))) & 0xFF).astype(np.uint8)
            img = np.frombuffer(self.dram, dtype=np.uint8)
            rows = img[addr:addr + shape[0] * pitch].reshape(shape[0], pitch)
            rows[:, :shape[1] * es] = b.reshape(shape[0], -1)
        return t

    def _tile_uid(self):
        self._uid += 1
        return self._uid

    def sbuf_tile(self, parts, elems, dtype="bf16", name=None, bank=None, prefer=()):
        """An SBUF tile of ``parts`` partitions (from 0) x ``elems`` elements, in SBUF bank
        ``bank`` (first fit inside it) or, by default, in the first bank of ``prefer`` with
        room, else in the next bank with room (see :meth:`_fit`)."""
        c = self.cfg
        def bad(b):
            return isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < c.sbuf_banks
        if bank is not None and bad(bank):
            raise ValueError(f"sbuf_tile bank must be None or in [0, {c.sbuf_banks - 1}], "
                             f"not {bank!r}")
        prefer = tuple(prefer)
        if any(bad(b) for b in prefer):
            raise ValueError(f"sbuf_tile prefer must hold banks in [0, {c.sbuf_banks - 1}], "
                             f"not {prefer!r}")
        if not 1 <= parts <= c.partitions:
            raise ValueError(f"sbuf_tile parts must be in [1, {c.partitions}], not {parts}")
        if dtype not in ELEM_BYTES:
            raise ValueError(f"sbuf_tile dtype must be one of {sorted(ELEM_BYTES)}, "
                             f"not {dtype!r}")
        size = self._word(elems * ELEM_BYTES[dtype]) if elems >= 1 else 0
        bb = c.sbuf_bank_bytes
        if bank is not None:
            off = self._fit_in(size, bank * bb, (bank + 1) * bb)
        else:
            off = next((o for o in (self._fit_in(size, b * bb, (b + 1) * bb) for b in prefer)
                        if o is not None), None)
            if off is None:
                off = self._fit(size)
        if elems < 1 or off is None:
            used = sum(b - a for a, b in self._live.values())
            raise ValueError(f"sbuf_tile of {elems} {dtype} does not fit: {used} of "
                             f"{c.sbuf_bytes_per_partition} bytes per partition in use")
        uid = self._tile_uid()
        self._live[uid] = (off, off + size)
        self._sbuf_top = max(self._sbuf_top, off + size)
        # the space may have held freed tiles: their last writer and their readers (as they were
        # when freed) become readers of the new tile, so its first write waits for them; later
        # accesses to the new tile do not touch the old ones (no false dependencies between
        # tiles that merely share a freed region)
        carry = {}
        for a, b, key in self._dead:
            if a < off + size and off < b:
                deps = dict(self._readers.get(key, {}))
                if self._writer.get(key):
                    deps[self._writer[key][0]] = max(deps.get(self._writer[key][0], 0),
                                                     self._writer[key][1])
                for st, n in deps.items():
                    carry[st] = max(carry.get(st, 0), n)
        if carry:
            self._readers[("tile", uid)] = carry
        return Tile(SBUF, parts, elems, dtype, off, name or f"sbuf{uid}", uid)

    def sbuf_bank(self, tile):
        """The SBUF bank ``tile`` starts in."""
        return tile.offset // self.cfg.sbuf_bank_bytes

    def _fit(self, size):
        """Word-aligned offset for ``size`` bytes per partition: a tile that fits in one SBUF
        bank goes to the next bank (round-robin) with room for it, first fit inside the bank,
        so tiles used together tend to sit in different banks (a bank serves one access per
        cycle, docs/memory.md §5); a larger tile, or one no bank has room for, takes the first
        fit anywhere."""
        top = self.cfg.sbuf_bytes_per_partition
        bb = top // self.cfg.sbuf_banks
        if size <= bb:
            for k in range(self.cfg.sbuf_banks):
                b = (self._next_sbuf_bank + k) % self.cfg.sbuf_banks
                off = self._fit_in(size, b * bb, (b + 1) * bb)
                if off is not None:
                    self._next_sbuf_bank = (b + 1) % self.cfg.sbuf_banks
                    return off
        return self._fit_in(size, 0, top)

    def _fit_in(self, size, lo, hi):
        """First word-aligned offset in ``[lo, hi)`` where ``size`` bytes are free."""
        off = lo
        for a, b in sorted(self._live.values()):
            if b <= off:
                continue
            if a >= hi:
                break
            if a - off >= size:
                return off
            off = max(off, b)
        return off if hi - off >= size else None

    def free(self, tile):
        """Give ``tile``'s SBUF space back. A tile allocated there later waits for every
        reader and writer of ``tile`` (the dependencies carry over), so reuse is race-free."""
        if tile.mem != SBUF or tile.uid not in self._live:
            raise ValueError(f"free: {tile.name} is not a live SBUF tile of this kernel")
        a, b = self._live.pop(tile.uid)
        self._dead.append((a, b, ("tile", tile.uid)))

    def psum_tile(self, parts, n, bank=None, name=None):
        """A PSUM tile (FP32): ``parts`` partitions x ``n <= psum_bank_fp32`` entries at entry 0
        of ``bank`` (default: the next bank, round-robin). Tiles of one bank alias: the
        dependency tracking treats the bank as the resource."""
        c = self.cfg
        if bank is None:
            bank, self._next_bank = self._next_bank, (self._next_bank + 1) % c.psum_banks
        if not 0 <= bank < c.psum_banks or not 1 <= n <= c.psum_bank_fp32 \
                or not 1 <= parts <= c.partitions:
            raise ValueError(f"psum_tile needs bank in [0, {c.psum_banks}), n in [1, "
                             f"{c.psum_bank_fp32}], parts in [1, {c.partitions}], not "
                             f"{bank}, {n}, {parts}")
        return Tile(PSUM, parts, n, "fp32", bank * c.psum_bank_bytes, name or f"psum{bank}",
                    -1 - bank, bank)

    # --- dependency tracking -----------------------------------------------------------------
    @staticmethod
    def _res(x):
        if isinstance(x, DramTensor):
            return ("dram", x.name)
        if isinstance(x, Tile):
            return ("tile", x.uid)
        return ("key", x)

    def _keys(self, x):
        """The resource keys an access to ``x`` touches. A DRAM tensor is tracked by the
        rectangles loads and stores touch (a whole-tensor access is its full rectangle): an
        access touches its own rectangle's key and every overlapping one's, so stores of
        disjoint output tiles do not wait for one another, and anything that overlaps still
        does."""
        if isinstance(x, DramTensor):
            x = _DramRect(x, 0, 0, *x.shape)
        if isinstance(x, _DramRect):
            name, r = x.tensor.name, (x.row0, x.col0, x.row0 + x.rows, x.col0 + x.cols)
            rects = self._dram_rects.setdefault(name, {})
            rects[r] = None
            return [("dram", name) + q for q in rects
                    if q[0] < r[2] and r[0] < q[2] and q[1] < r[3] and r[1] < q[3]]
        return [self._res(x)]

    def _emit(self, issuer, stream, reads, writes, make):
        """Record one operation: waits from its dependencies, then ``make(wait, post)`` gives
        what is appended to ``issuer``'s program."""
        deps = {}

        def need(dep):
            if dep and dep[0] != stream:
                deps[dep[0]] = max(deps.get(dep[0], 0), dep[1])
        reads = [r for x in reads for r in self._keys(x)]
        writes = [r for x in writes for r in self._keys(x)]
        for r in reads:
            need(self._writer.get(r))
        for r in writes:
            need(self._writer.get(r))
            for s, k in self._readers.get(r, {}).items():
                need((s, k))
        waited = self._waited[issuer]
        waits = [(s, k) for s, k in sorted(deps.items(), key=str) if waited.get(s, 0) < k]
        for s, k in deps.items():
            waited[s] = max(waited.get(s, 0), k)
        for s, k in waits:
            if isinstance(s, str):              # that engine instruction must post
                self._posting.setdefault(s, set()).add(k)
        for w in waits[:-1]:
            self._ops[issuer].append((None, w, None))
        self._count[stream] = self._count.get(stream, 0) + 1
        me = (stream, self._count[stream])
        self._ops[issuer].append((make, waits[-1] if waits else None, me))
        for r in writes:
            self._writer[r] = me
            self._readers[r] = {}
        for r in reads:
            self._readers.setdefault(r, {})[stream] = self._count[stream]

    def _wait_value(self, dep):
        """``(semaphore, value)`` of a dependency ``(stream, k)``: an engine posts only the
        instructions someone waits for, so ``k`` becomes the number of its posting
        instructions up to and including its ``k``-th (which posts); a DMA queue posts every
        descriptor."""
        if dep is None:
            return None
        s, k = dep
        if isinstance(s, str):
            return self._sem(s), sum(1 for j in self._posting.get(s, ()) if j <= k)
        return self._sem(s), k

    def _post_of(self, me):
        """The post of the operation ``me = (stream, k)``: ``(sem, 1)`` for every descriptor
        and for an engine instruction some later operation waits for, else ``None``."""
        s, k = me
        if isinstance(s, str) and k not in self._posting.get(s, ()):
            return None
        return self._sem(s), 1

    def _sem(self, stream):
        if isinstance(stream, str):
            return ENGINES.index(stream)
        e, q = stream
        return len(ENGINES) + e * self.cfg.dma_queues + q

    # --- DMA --------------------------------------------------------------------------------
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
            reads, writes = [_DramRect(tensor, row0, col0, tile.parts, tile.elems)], [tile]
        else:
            d = dict(src=sb, dst=dram_addr, src_space=gdma.SBUF, dst_space=gdma.DRAM,
                     dims=((tile.elems, es, es), (tile.parts, c.sbuf_bytes_per_partition,
                                                  tensor.pitch)))
            reads, writes = [tile], [_DramRect(tensor, row0, col0, tile.parts, tile.elems)]

        def make(wait, post):
            desc = gdma.Descriptor(**d, src_dtype=code, dst_dtype=code, post=True,
                                   sem=post[0], inc=1)
            return ("dma", desc, eq, wait)
        self._emit("sp", eq, reads, writes, make)

    def load(self, tile, tensor, row0=0, col0=0, queue=None):
        """``tile[p, j] = tensor[row0 + p, col0 + j]`` by one DMA descriptor (queue: global
        index ``engine * dma_queues + queue``, default round-robin)."""
        self._dma(tile, tensor, row0, col0, True, queue)

    def store(self, tensor, tile, row0=0, col0=0, queue=None):
        """``tensor[row0 + p, col0 + j] = tile[p, j]`` by one DMA descriptor."""
        self._dma(tile, tensor, row0, col0, False, queue)

    # --- compute -----------------------------------------------------------------------------
    def matmul(self, out, stationary, moving, accumulate=False):
        """``out[m, n] (=|+=) sum_k stationary[k, m] * moving[k, n]`` on the tensor engine
        (``load_stationary`` + ``multiply_moving``); ``out`` a PSUM tile with
        ``parts = stationary.elems`` and ``elems = moving.elems``. The ``load_stationary`` is
        left out when the same tile, not written since, is already loaded."""
        if out.mem != PSUM or stationary.mem != SBUF or moving.mem != SBUF:
            raise ValueError("matmul out must be a PSUM tile, stationary and moving SBUF tiles")
        if stationary.parts != moving.parts or out.parts != stationary.elems \
                or out.elems != moving.elems:
            raise ValueError(f"matmul shapes: stationary [K={stationary.parts}, "
                             f"M={stationary.elems}], moving [K={moving.parts}, "
                             f"N={moving.elems}], out must be [M, N], not [{out.parts}, "
                             f"{out.elems}]")
        key = (stationary.ap(), self._writer.get(self._res(stationary)))
        if key != self._pe_loaded:          # the same weights, unchanged: no reload
            self._emit("pe", "pe", [stationary], [],
                       lambda w, p: Instr(op="load_stationary", wait=w, post=p,
                                          aps={"ap1": stationary.ap()}))
            self._pe_loaded = key
        self._emit("pe", "pe", [moving] + ([out] if accumulate else []), [out],
                   lambda w, p: Instr(op="multiply_moving", wait=w, post=p,
                                      flags=frozenset({"acc"} if accumulate else ()),
                                      aps={"ap0": out.ap(), "ap1": moving.ap()}))

    def transpose(self, out, tile):
        """``out[m, k] = tile[k, m]`` as raw bits (zero-extended codes) in PSUM: the tensor
        engine's bypass (``load_stationary`` of ``tile`` + ``transpose``)."""
        if out.mem != PSUM or tile.mem != SBUF or out.parts != tile.elems \
                or out.elems != tile.parts:
            raise ValueError(f"transpose out must be a PSUM tile [{tile.elems}, {tile.parts}] "
                             f"of the SBUF tile [{tile.parts}, {tile.elems}]")
        key = (tile.ap(), self._writer.get(self._res(tile)))
        if key != self._pe_loaded:
            self._emit("pe", "pe", [tile], [],
                       lambda w, p: Instr(op="load_stationary", wait=w, post=p,
                                          aps={"ap1": tile.ap()}))
            self._pe_loaded = key
        self._emit("pe", "pe", [], [out],
                   lambda w, p: Instr(op="transpose", wait=w, post=p, aps={"ap0": out.ap()}))

    def instr(self, ins, reads=(), writes=(), engine=None):
        """Append a ready-made :class:`rtl.isa.Instr` (its ``wait`` and ``post`` are replaced)
        to ``engine``'s program (default: the opcode's engine), with the resources it reads and
        writes: tiles, DRAM tensors, or any hashable key (e.g. ``("sbuf", region)``) for
        hand-written APs. ``dma_start`` is not accepted here (use :meth:`descriptor`)."""
        eng = engine or ENGINE_OF.get(ins.op)
        if ins.op == "load_stationary":
            self._pe_loaded = None
        if eng not in ENGINES or ins.op == "dma_start" or \
                ENGINE_OF.get(ins.op) not in (None, eng):
            raise ValueError(f"instr: {ins.op} cannot be issued on engine {eng!r} here")
        self._emit(eng, eng, list(reads), list(writes),
                   lambda w, p: Instr(op=ins.op, flags=ins.flags, wait=w, post=p, irq=ins.irq,
                                      aps=dict(ins.aps), imm=dict(ins.imm)))

    def descriptor(self, desc, reads=(), writes=(), queue=None):
        """One hand-made DMA descriptor (its ``post``, ``sem`` and ``inc`` are replaced) through
        ``dma_start`` on the sync engine, with the resources it reads and writes."""
        eq = self._queue(queue)

        def make(wait, post):
            kw = {f: getattr(desc, f) for f in ("src", "dst", "src_space", "dst_space", "dims",
                                                "op", "src_dtype", "dst_dtype", "rounding",
                                                "reserved")}
            return ("dma", gdma.Descriptor(**kw, post=True, sem=post[0], inc=1), eq, wait)
        self._emit("sp", eq, list(reads), list(writes), make)

    def op(self, opname, dst, srcs=(), flags=(), imm=None):
        """Any engine opcode through its APs: ``dst`` in ``ap0``, ``srcs`` in ``ap1``,
        ``ap2``: the path of the vector and scalar engines' operations (``tensor_copy``,
        ``activation``, ...), which the simulator runs once their hooks are registered."""
        eng = ENGINE_OF.get(opname)
        if eng is None:
            raise ValueError(f"op name must be an engine opcode of rtl.isa, not {opname!r}")
        aps = {"ap0": dst.ap()}
        for slot, s in zip(("ap1", "ap2"), srcs):
            aps[slot] = s.ap()
        self._emit(eng, eng, list(srcs), [dst],
                   lambda w, p: Instr(op=opname, wait=w, post=p, flags=frozenset(flags),
                                      aps=aps, imm=dict(imm or {})))

    def block_transpose(self, dst, src, sr=False):
        """``dst[j, i] = src[i, j]`` across partitions on the vector engine
        (``block_transpose``: one ``B x B`` block, ``B = min(32, partitions)``, both tiles from
        partition 0), with the formats' cast."""
        B = min(32, self.cfg.partitions)
        if (src.parts, src.elems, dst.parts, dst.elems) != (B, B, B, B):
            raise ValueError(f"block_transpose tiles must be {B} x {B} (B = min(32, "
                             f"partitions)), not {src.parts} x {src.elems} -> "
                             f"{dst.parts} x {dst.elems}")
        self._vec("block_transpose", dst, src, sr=sr)

    def copy(self, dst, src, sr=False):
        """``dst = src`` with the formats' cast (vector engine ``tensor_copy``): how a PSUM
        result reaches the SBUF, and then DRAM."""
        self._vec("tensor_copy", dst, src, sr=sr)

    # --- vector engine (docs/vector.md; ALU operations by name or code) ----------------------
    def _vec(self, opname, dst, src0=None, src1=None, *, src1_ap=None, op0=0, op1=0, imm0=0.0,
             imm1=0.0, rev0=False, rev1=False, sel0=False, sel1=False, sr=False):
        aps, reads = {"ap0": dst.ap()}, []
        if src0 is not None:
            aps["ap1"] = src0.ap()
            reads.append(src0)
        if src1 is not None:
            aps["ap2"] = src1_ap or src1.ap()
            reads.append(src1)
        imm = {"op0": _alu(op0), "op1": _alu(op1),
               "ctl": int(rev0) | int(rev1) << 1 | int(sel0) << 2 | int(sel1) << 3,
               "imm0": imm0, "imm1": imm1}
        imm = {k: v for k, v in imm.items() if _nonzero(v)}
        self._emit("dve", "dve", reads, [dst],
                   lambda w, p: Instr(op=opname, wait=w, post=p, aps=aps, imm=imm,
                                      flags=frozenset({"sr"} if sr else ())))

    def _operand(self, x, n):
        """``(imm, src1 tile, src1 AP, sel)`` of a stage operand: a number (the immediate) or a
        per-partition ``[parts, 1]`` tile (the src1 AP with step 0)."""
        if isinstance(x, Tile):
            return 0.0, x, x.bcast(n), True
        return x, None, None, False

    def tensor_tensor(self, dst, a, b, op, sr=False):
        """``dst = a op b`` element-wise (``op`` an ALU operation name of
        ``golden.vector.ALU_NAMES`` or its code)."""
        self._vec("tensor_tensor", dst, a, b, op0=op, sr=sr)

    def tensor_scalar(self, dst, src, op0, operand0=0.0, op1="bypass", operand1=0.0,
                      reverse0=False, reverse1=False, sr=False):
        """``dst = (src op0 operand0) op1 operand1``; an operand is a number (an FP32
        immediate) or a per-partition ``[parts, 1]`` tile (both tiles, if two: the same one).
        ``reverse``: the operand comes first (``operand - x``)."""
        n = src.elems
        i0, t0, a0, s0 = self._operand(operand0, n)
        i1, t1, a1, s1 = self._operand(operand1, n)
        if t0 is not None and t1 is not None and t0 != t1:
            raise ValueError("tensor_scalar: both operands from tiles must be the same tile "
                             "(one src1 AP)")
        t, a = (t0, a0) if t0 is not None else (t1, a1)
        self._vec("tensor_scalar", dst, src, t, src1_ap=a, op0=op0, op1=op1, imm0=i0, imm1=i1,
                  rev0=reverse0, rev1=reverse1, sel0=s0, sel1=s1, sr=sr)

    def tensor_reduce(self, dst, src, op="add", pre_op="bypass", pre_operand=0.0, sr=False):
        """``dst[p, 0] = op-reduction of (src pre_op pre_operand)[p, :]`` (``op`` add, max or
        min; the engine's interleaved order, docs/vector.md §1.5)."""
        i0, t0, a0, s0 = self._operand(pre_operand, src.elems)
        self._vec("tensor_reduce", dst, src, t0, src1_ap=a0, op0=pre_op, op1=op, imm0=i0,
                  sel0=s0, sr=sr)

    def memset(self, dst, value, sr=False):
        """``dst = value`` (FP32, encoded to the tile's format)."""
        self._vec("memset", dst, imm0=value, sr=sr)

    def iota(self, dst, op0="bypass", imm0=0.0, op1="bypass", imm1=0.0, sel0=False,
             sel1=False):
        """``dst[p, i] = (i op0 y0) op1 y1`` with ``y`` the immediate or, with ``sel``, the
        partition index ``p`` (e.g. ``op1="add", sel1=True``: ``i + p``)."""
        self._vec("iota", dst, op0=op0, op1=op1, imm0=imm0, imm1=imm1, sel0=sel0, sel1=sel1)

    def select(self, dst, mask, on_true, otherwise=0.0, sr=False):
        """``dst = on_true if mask != 0 else otherwise`` (an immediate)."""
        self._vec("select", dst, mask, on_true, imm0=otherwise, sr=sr)

    def max8(self, dst, src, indices=False):
        """``dst[p, :8]`` = the 8 largest of ``src[p, :]`` (or their indices), largest first."""
        self._vec("max8", dst, src, op1=int(indices))

    def find_index8(self, dst, data, vals, sr=False):
        """``dst[p, j]`` = the index of the first ``data[p, :]`` element equal to ``vals[p, j]``
        (``j < 8``; the widened FP32 patterns bit for bit: ``-0 != +0``, a NaN finds its own
        pattern), ``-1`` where none (``find_index8``; e.g. ``vals`` from :meth:`max8`)."""
        if vals.elems != 8 or dst.elems != 8:
            raise ValueError(f"find_index8 vals and dst must have 8 elements per partition, "
                             f"not {vals.elems} and {dst.elems}")
        self._vec("find_index8", dst, data, vals, sr=sr)

    # --- scalar engine ------------------------------------------------------------------------
    def load_table(self, name, queue=None):
        """Load function ``name``'s table into the scalar engine, unless it holds it: the image
        (``golden.isasim.table_words``, element-major over every partition) as a DRAM tensor,
        DMA to a temporary SBUF tile (on ``queue``, as :meth:`load`), ``act_table_load``, the
        tile freed."""
        from golden import activation as ga
        from golden.isasim import table_words
        if name not in ga.FUNCTION_IDS:
            raise ValueError(f"activation func must be one of {ga.FUNCTIONS}, not {name!r}")
        if self._act_table == name:
            return
        P = self.cfg.partitions
        img = table_words(ga.table(name), P)
        cols = img.shape[1]
        key = f"__table_{name}"
        t = self.tensors.get(key) or self.dram_tensor(key, dtype="fp32", data=img)
        tile = self.sbuf_tile(P, cols, "fp32", f"table_{name}")
        self.load(tile, t, queue=queue)
        fid = ga.FUNCTION_IDS[name]
        self._emit("act", "act", [tile], [],
                   lambda w_, p: Instr(op="act_table_load", wait=w_, post=p,
                                       aps={"ap1": tile.ap()}, imm={"func": fid}))
        self.free(tile)
        self._act_table = name

    def activation(self, dst, src, func, scale=1.0, bias=0.0, bias_tile=None, scale_tile=None,
                   reduce=None, sr=False):
        """``dst = f(src * scale + bias)`` on the scalar engine (``func`` a name of
        ``golden.activation.FUNCTIONS``; its table is loaded first when the engine holds
        another). ``bias_tile`` / ``scale_tile``: a per-partition ``[parts, 1]`` tile instead
        of the immediate (one AP slot: both from the same tile, if both). ``reduce``: ``None``,
        ``"reset"``, ``"reduce"`` or ``"reset_reduce"`` (the engine's accumulators)."""
        from golden import activation as ga
        self.load_table(func)
        per = bias_tile if bias_tile is not None else scale_tile
        if bias_tile is not None and scale_tile is not None and bias_tile != scale_tile:
            raise ValueError("activation: bias_tile and scale_tile share the one AP slot ap2")
        cmd = {None: 0, "reset": 1, "reduce": 2, "reset_reduce": 3}
        if reduce not in cmd:
            raise ValueError(f"activation reduce must be one of {list(cmd)}, not {reduce!r}")
        imm = {"func": ga.FUNCTION_IDS[func], "reduce_cmd": cmd[reduce],
               "bias_ap": int(bias_tile is not None), "scale_ap": int(scale_tile is not None),
               "scale": scale, "bias": bias}
        imm = {k: v for k, v in imm.items() if _nonzero(v)}
        aps = {"ap0": dst.ap(), "ap1": src.ap()}
        if per is not None:
            aps["ap2"] = per.ap()
        self._emit("act", "act", [src] + ([per] if per is not None else []), [dst],
                   lambda w, p: Instr(op="activation", wait=w, post=p, aps=aps, imm=imm,
                                      flags=frozenset({"sr"} if sr else ())))

    # --- N:M sparse weights -------------------------------------------------------------------
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

    def sparse_matmul(self, out, weights, moving, pattern, w_fmt, x_fmt, accumulate=False):
        """``out[m, n] (=|+=) sum_k W[k, m] X[k, n]`` on the tensor engine's N:M sparse mode,
        the weights kept **compressed** in SBUF (``load_stationary.sparse`` +
        ``multiply_moving.sparse``, docs/isa.md §6).

        ``weights``: an SBUF tile ``[K_phys, M]`` of (value, tag) pairs (:func:`sparse_pairs`;
        its dtype any of twice ``w_fmt``'s bytes, e.g. ``fp32`` for ``bf16`` values).
        ``moving``: an SBUF tile ``[K_phys, N]`` of 32-bit lanes, each the ``m/n`` logical
        elements of ``x_fmt`` its row meets (``golden.sparse.moving_lanes``; a 4-byte dtype).
        ``out``: a PSUM tile ``[M, N]``. ``pattern`` must be one of ``cfg.sparsity``;
        ``K_phys`` a multiple of its ``n``. The load is left out when the same weights, not
        written since, are loaded with the same pattern."""
        from golden.sparse import pattern_params, sparse_formats
        n, m = pattern_params(pattern, self.cfg)
        if out.mem != PSUM or weights.mem != SBUF or moving.mem != SBUF:
            raise ValueError("sparse_matmul out must be a PSUM tile, weights and moving SBUF "
                             "tiles")
        if w_fmt not in self.cfg.formats or ELEM_BYTES[weights.dtype] != 2 * ELEM_BYTES[w_fmt] \
                or self.cfg.fmt(w_fmt).width not in (8, 16):
            raise ValueError(f"sparse_matmul w_fmt must be an 8- or 16-bit format of the "
                             f"config and weights a tile of twice its bytes, not {w_fmt!r}, "
                             f"{weights.dtype}")
        if x_fmt not in sparse_formats(self.cfg, pattern) or ELEM_BYTES[moving.dtype] != 4:
            raise ValueError(f"sparse_matmul x_fmt must be one of "
                             f"{sparse_formats(self.cfg, pattern)} and moving a 4-byte tile, "
                             f"not {x_fmt!r}, {moving.dtype}")
        if weights.parts != moving.parts or weights.parts % n or out.parts != weights.elems \
                or out.elems != moving.elems:
            raise ValueError(f"sparse_matmul shapes: weights [K={weights.parts} (a multiple "
                             f"of n = {n}), M={weights.elems}], moving [K={moving.parts}, "
                             f"N={moving.elems}], out must be [M, N], not [{out.parts}, "
                             f"{out.elems}]")
        imm = {"sp_n": n, "sp_m": m}
        key = (weights.ap(), self._writer.get(self._res(weights)), pattern, w_fmt)
        if key != self._pe_loaded:
            self._emit("pe", "pe", [weights], [],
                       lambda w, p: Instr(op="load_stationary", wait=w, post=p,
                                          flags=frozenset({"sparse"}), imm=dict(imm),
                                          aps={"ap1": replace(weights.ap(), dtype=w_fmt)}))
            self._pe_loaded = key
        self._emit("pe", "pe", [moving] + ([out] if accumulate else []), [out],
                   lambda w, p: Instr(op="multiply_moving", wait=w, post=p,
                                      flags=frozenset({"sparse", "acc"} if accumulate
                                                      else {"sparse"}), imm=dict(imm),
                                      aps={"ap0": out.ap(),
                                           "ap1": replace(moving.ap(), dtype=x_fmt)}))

    def output(self, name, where):
        """Name where a result lives (a :class:`DramTensor` or a dict of tiles)."""
        self.outputs[name] = where

    # --- build -------------------------------------------------------------------------------
    def emitted(self):
        """``{engine: instructions emitted so far}`` (each operation and each extra wait is one
        instruction of its engine's program)."""
        return {e: len(lst) for e, lst in self._ops.items()}

    def build(self):
        """The :class:`KernelProgram`: descriptors placed after the tensors, every engine's
        program encoded."""
        img = bytearray(self.dram)
        top = -(-self._dram_top // gdma.DESC_BYTES) * gdma.DESC_BYTES
        programs, listing = {}, {}
        for e, lst in self._ops.items():
            enc = []
            for make, dep, me in lst:
                wait = self._wait_value(dep)
                x = Instr(op="nop", wait=wait) if make is None else make(wait, self._post_of(me))
                if isinstance(x, tuple):
                    _, desc, (de, q), wait = x
                    if top + gdma.DESC_BYTES > len(img):
                        raise ValueError(f"descriptors do not fit in dram_bytes = {len(img)}")
                    img[top:top + gdma.DESC_BYTES] = desc.pack()
                    x = Instr(op="dma_start", wait=wait, imm={
                        "engine": de, "queue": q, "count": 1,
                        "desc_addr": self.dram_base + top})
                    top += gdma.DESC_BYTES
                enc.append(x)
            programs[e] = b"".join(encode(i) for i in enc)
            listing[e] = "\n".join(format_instr(i) for i in enc)
        return KernelProgram(programs, img, self.dram_base, dict(self.tensors),
                             dict(self.outputs), listing, top)


def sparse_pairs(values, tags, fmt, cfg):
    """The SBUF form of compressed weights for :meth:`Kernel.sparse_matmul`: each kept value's
    code (an 8- or 16-bit ``fmt``) in the low half of an element twice its size, its position
    tag in the high half (docs/isa.md §6): ``uint32 [K_phys, M]`` words of ``2 * bytes(fmt)``
    significant bytes."""
    w = cfg.fmt(fmt).width
    if w not in (8, 16):
        raise ValueError(f"sparse_pairs fmt must be an 8- or 16-bit format, not {fmt!r}")
    v, t = np.asarray(values, np.uint32), np.asarray(tags, np.uint32)
    if v.shape != t.shape or (v >> np.uint32(w)).any() or (t >= (1 << min(w, 8))).any():
        raise ValueError(f"sparse_pairs values and tags must share a shape and fit {w} bits, "
                         f"not {v.shape}, {t.shape}")
    return v | (t << np.uint32(w))


def gemm_kernel(cfg, AT, B, *, dtype="bf16", evacuate=False, dram_bytes=1 << 20):
    """``C = A @ B`` from ``AT [K, M]`` (A transposed) and ``B [K, N]`` (element codes of
    ``dtype``), tiled over K (``pe_rows``), M (``pe_cols``) and N (``psum_bank_fp32``), the K
    tiles accumulated in PSUM (FP32).

    Loop order: M chunks (as many M tiles as PSUM banks allow) > N tiles > K tiles > M tiles of
    the chunk. Each B tile ``[K tile, N tile]`` is loaded once per chunk, into one of two SBUF
    buffers (double buffering), and serves every M tile of the chunk. The ``AT`` tiles are
    loaded once when they all fit in SBUF (half of it), otherwise per use into two buffers.
    Loads go over the first DMA engine's queues, stores over the second's. With ``evacuate``,
    the last chunk's last N tile runs as two spans (3/4, then 1/4) so that little is left to
    store after the last matmul (:func:`_tail_spans`).

    ``evacuate=False``: the result stays in PSUM, output ``"C"`` = ``{(m0, n0): Tile}``
    (needs ``ceil(M / pe_cols) * ceil(N / psum_bank_fp32) <= psum_banks``). ``True``: each
    PSUM tile is copied (``tensor_copy``, vector engine) to an FP32 SBUF tile and stored to the
    DRAM tensor ``"C"`` [M, N] fp32 (chunks of half the banks, so a chunk's matmuls overlap the
    previous chunk's copies).
    """
    k = Kernel(cfg, dram_bytes=dram_bytes)
    AT, B = np.asarray(AT), np.asarray(B)
    K, M = AT.shape
    K2, N = B.shape
    if K2 != K:
        raise ValueError(f"gemm_kernel AT [K, M] and B [K, N] must share K, not {K} and {K2}")
    at = k.dram_tensor("AT", dtype=dtype, data=AT)
    b = k.dram_tensor("B", dtype=dtype, data=B)
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    mts, nts, kts = list(range(0, M, TM)), list(range(0, N, TN)), list(range(0, K, TK))
    if not evacuate and len(mts) * len(nts) > cfg.psum_banks:
        raise ValueError(f"gemm_kernel without evacuate keeps C in PSUM: {len(mts) * len(nts)} "
                         f"output tiles > psum_banks = {cfg.psum_banks}")
    chunk = max(1, cfg.psum_banks // 2) if evacuate else len(mts)
    es = ELEM_BYTES[dtype]
    a_all = len(kts) * k._word(M * es) <= cfg.sbuf_bytes_per_partition // 2
    sb = [k.sbuf_tile(TK, TN, dtype, f"b{i}") for i in range(2)]
    # SBUF banks (one access per cycle each; the PE's reads win them): the B buffers in two
    # banks, the evacuation tiles away from them (the copies into them and the stores out of
    # them would wait on the PE's moving reads, and a slow store holds up the sync engine's
    # next B loads), A(k) in B(k)'s bank (the two DMA engines then share that bank while they
    # load both, but never the bank the PE streams). Each where there is room, else the default
    # placement. Default preset, K 256, M 128, N 1024 on the RTL: 169,154 cycles with the
    # round-robin placement; 163,210 with the A tiles in the other two banks (the evacuation
    # tiles then do not all fit there); 155,791 with this one (golden: 144,580).
    b_banks = [k.sbuf_bank(t) for t in sb]
    others = [b for b in range(cfg.sbuf_banks) if b not in b_banks]
    so = ([k.sbuf_tile(TM, TN, "fp32", f"o{i}", prefer=others) for i in range(4)] if evacuate
          else None)
    c = k.dram_tensor("C", (M, N), "fp32") if evacuate else None
    # AT resident: one tile [K tile, M] per K tile (one descriptor), loaded before its first use
    a_k = ([k.sbuf_tile(min(TK, K - k0), M, dtype, f"a{k0}", prefer=[b_banks[i % 2]] + others)
            for i, k0 in enumerate(kts)] if a_all else None)
    if not a_all:
        sa = [k.sbuf_tile(TK, TM, dtype, f"a{i}", prefer=[b_banks[i % 2]] + others)
              for i in range(2)]
    # a group's stores are emitted one per K step of the next group, after its loads, so the
    # sync engine's in-order stream does not stall the next B loads behind the evacuation
    pending = []                                        # (SBUF tile uid, emit its store)
    # queues: every load (A and B) on the first DMA engine, every store on the others. A(k)
    # and B(k) share a bank; on one engine they are written one descriptor after the other
    # instead of two engines contending for the bank (and for the shared R channel: an engine
    # that lost the bank holds up the other's read beats). Loads read DRAM, stores write it:
    # the two engines use AXI's two directions. One DMA engine: loads and stores on
    # alternate queues (:func:`split_queues`). Default preset, K 256, M 128, N 1024 on the RTL: 155,791 cycles with
    # round-robin queues, 148,483 with these (golden: 143,984; the RTL's first group had
    # lost ~520 cycles per K step to the two engines' writes into one bank).
    q = split_queues(cfg)

    def flush(n=1):
        for _ in range(min(n, len(pending))):
            pending.pop(0)[1]()

    tiles, bstep, astep, ostep, a_loaded = {}, 0, 0, 0, set()
    for c0 in range(0, len(mts), chunk):
        mc = mts[c0:c0 + chunk]
        spans = [(n0, min(TN, N - n0)) for n0 in nts]
        if evacuate and c0 + chunk >= len(mts):
            spans = spans[:-1] + _tail_spans(cfg, *spans[-1], es,
                                             sum(min(TM, M - m0) for m0 in mc), len(kts))
        for n0, nn in spans:
            ps = {m0: k.psum_tile(min(TM, M - m0), nn) for m0 in mc}
            for kk, k0 in enumerate(kts):
                kn = min(TK, K - k0)
                if a_all and kk not in a_loaded:
                    k.load(a_k[kk], at, k0, 0, queue=q("first"))
                    a_loaded.add(kk)
                tb = _sub(sb[bstep % 2], kn, nn)
                bstep += 1
                k.load(tb, b, k0, n0, queue=q("first"))
                if kk:
                    flush()
                for m0 in mc:
                    if a_all:
                        ta = a_k[kk].view(m0, min(TM, M - m0))
                    else:
                        ta = _sub(sa[astep % 2], kn, min(TM, M - m0))
                        astep += 1
                        k.load(ta, at, k0, m0, queue=q("first"))
                    k.matmul(ps[m0], ta, tb, accumulate=kk > 0)
            for m0 in mc:
                if evacuate:
                    to = _sub(so[ostep % len(so)], ps[m0].parts, nn)
                    ostep += 1
                    while any(u == to.uid for u, _ in pending):
                        flush()                     # its last store first (program order)
                    k.copy(to, ps[m0])
                    qs_ = q("rest")
                    pending.append((to.uid, lambda t=to, m=m0, n=n0, qq=qs_:
                                    k.store(c, t, m, n, queue=qq)))
                else:
                    tiles[(m0, n0)] = ps[m0]
    flush(len(pending))
    k.output("C", c if evacuate else tiles)
    return k.build()


def split_queues(cfg):
    """A round-robin queue picker for kernels that keep two DMA streams apart:
    ``q("first")`` cycles over the first DMA engine's queues, ``q("rest")`` over every other
    engine's (one engine: its even queues and its odd ones; one queue in all: both 0). Returns
    global queue indices (``engine * dma_queues + queue``, as :meth:`Kernel.load` takes)."""
    nq, nd = cfg.dma_queues, cfg.dma_engines
    lists = dict(zip(("first", "rest"), ([0], [0]) if nq * nd == 1 else (
        (list(range(nq)), list(range(nq, nq * nd))) if nd > 1
        else (list(range(0, nq, 2)), list(range(1, nq, 2))))))
    taken = {"first": 0, "rest": 0}

    def q(side):
        lst = lists[side]
        taken[side] += 1
        return lst[(taken[side] - 1) % len(lst)]
    return q


def _tail_spans(cfg, n0, nn, es, rows, k_steps):
    """The last N tile of the last chunk cut in two spans, three quarters then a quarter, so
    what is left to copy and store after the last matmul is a quarter tile's outputs; the
    earlier span's stores overlap the last span's matmuls (default preset, K 256, M 128,
    N 1024: golden 143,937 -> 139,165 cycles, RTL 148,483 -> 144,224; in golden, 7/8 + 1/8
    gives 141,210, 1/2 + 1/4 + 1/4 140,153). The cut is a whole number of SBUF words of both
    the operand and the FP32 output.

    Only when it pays: the store cycles it takes off the tail (3/4 of ``rows`` FP32 rows of
    ``nn``, over the AXI width) must be at least 4 x ``k_steps`` array latencies. The extra
    span's K steps each pay a post's drain plus descriptor and issue overheads; on small (K 16,
    M 8, N 128) a 48 + 16 cut took the RTL from 2,282 to 2,460 cycles for 144 store cycles
    saved, so it is not cut there."""
    from golden.isasim import pe_latency
    step = cfg.sbuf_word_bytes // min(es, 4)
    q = nn // 4 // step * step
    saved = (nn - q) * rows * 4 // (cfg.axi_data_bits // 8)
    if not q or saved < 4 * k_steps * pe_latency(cfg):
        return [(n0, nn)]
    return [(n0, nn - q), (n0 + nn - q, q)]


def _alu(op):
    """An ALU operation code from its ``golden.vector.ALU_NAMES`` name (or the code)."""
    from golden.vector import ALU_NAMES
    if isinstance(op, str):
        if op not in ALU_NAMES:
            raise ValueError(f"ALU operation must be one of {ALU_NAMES}, not {op!r}")
        return ALU_NAMES.index(op)
    if isinstance(op, bool) or not isinstance(op, int) or not 0 <= op < len(ALU_NAMES):
        raise ValueError(f"ALU operation must be a name or a code in [0, 15], not {op!r}")
    return op


def _nonzero(v):
    """Whether an immediate has a nonzero encoding (``-0.0`` does)."""
    if isinstance(v, float):
        return v != 0.0 or np.signbit(v)
    return bool(v)


def _sub(t, parts, elems):
    """The same buffer seen as a smaller tile (same uid: the same resource)."""
    return Tile(t.mem, parts, elems, t.dtype, t.offset, t.name, t.uid, t.bank)
