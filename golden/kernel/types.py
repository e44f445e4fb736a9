# SPDX-License-Identifier: Apache-2.0
"""The kernel API's data: DRAM tensors, SBUF/PSUM tiles, the built program, and small helpers
the builders share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from golden.ap import ELEM_BYTES, PSUM
from rtl.isa import OPS_BY_NAME, APEnc

__all__ = ["ENGINE_OF", "DramTensor", "DramRect", "Tile", "KernelProgram", "sparse_pairs",
           "alu_code", "nonzero_imm", "sub_tile"]

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
class DramRect:
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
    unused byte of the image), ``operations`` (an engine name or ``"dma<e>.q<q>"`` -> the
    label of the kernel operation, e.g. ``"tensor_tensor #3"``, of each instruction or
    descriptor by index)."""
    programs: dict
    dram: bytearray
    dram_base: int
    tensors: dict
    outputs: dict
    listing: dict = field(default_factory=dict)
    free: int = 0           # first image byte after the tensors and descriptors
    operations: dict = field(default_factory=dict)

    def operation(self, source, index):
        """The label of the kernel operation that emitted instruction ``index`` of engine
        ``source`` (or descriptor ``index`` of DMA queue ``"dma<e>.q<q>"``), or ``None``."""
        labels = self.operations.get(source, ())
        return labels[index] if 0 <= index < len(labels) else None

    def locate(self, err):
        """``err`` (a :class:`golden.isasim.SimError` of a run of this program, or ``None``)
        with ``op`` set to the label of the operation that emitted the failing instruction,
        so that ``str(err)`` names it."""
        if err is None:
            return None
        from dataclasses import replace
        return replace(err, op=self.operation(err.source, err.index) or "")

    def instructions(self):
        return {e: len(p) // 128 for e, p in self.programs.items()}

    def _codes(self, sim, where):
        if isinstance(where, DramTensor):
            return where.read(sim.mem.dram, sim.mem.dram_base), where.dtype
        rows = max(r + t.parts for (r, _c), t in where.items())
        cols = max(c + t.elems for (_r, c), t in where.items())
        a = np.zeros((rows, cols), dtype=np.uint32)
        dts = {t.dtype for t in where.values()}
        for (r, c), t in where.items():
            if t.mem == PSUM:
                a[r:r + t.parts, c:c + t.elems] = sim.psum32[:t.parts, t.bank, :t.elems]
            else:
                a[r:r + t.parts, c:c + t.elems] = sim.read_ap(sim.check_ap(t.ap(), "ap0"))
        return a, (dts.pop() if len(dts) == 1 else None)

    def result(self, sim, name, codes=False):
        """Output ``name`` (or a :class:`DramTensor` of the kernel) from a finished
        :class:`golden.isasim.IsaSim`: a DRAM tensor ``[rows, cols]``, or a dict of tiles
        assembled at their ``(row, col)`` origins (PSUM: FP32). Values as a numpy array of the
        format (:func:`golden.kernel.data.value_dtype`: ``ml_dtypes.bfloat16`` for bf16,
        ``float32`` for fp32, ...), or with ``codes=True`` the element codes (``uint32``)."""
        from golden.kernel.data import codes_values
        if isinstance(name, DramTensor):
            where = name
        elif name in self.outputs:
            where = self.outputs[name]
        elif name in self.tensors:
            where = self.tensors[name]
        else:
            raise ValueError(f"result name must be an output or a tensor of the kernel "
                             f"({sorted(set(self.outputs) | set(self.tensors))}), not {name!r}")
        a, dtype = self._codes(sim, where)
        if codes:
            return a
        if dtype is None:
            raise ValueError(f"result {name!r}: its tiles mix formats; read it with codes=True")
        return codes_values(sim.cfg, dtype, a)

    def read_outputs(self, sim, codes=False):
        """Every output (:meth:`result`) by name: values, or codes with ``codes=True``."""
        return {name: self.result(sim, name, codes=codes) for name in self.outputs}

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


def alu_code(op):
    """An ALU operation code from its ``golden.vector.ALU_NAMES`` name (or the code)."""
    from golden.vector import ALU_NAMES
    if isinstance(op, str):
        if op not in ALU_NAMES:
            raise ValueError(f"ALU operation must be one of {ALU_NAMES}, not {op!r}")
        return ALU_NAMES.index(op)
    if isinstance(op, bool) or not isinstance(op, int) or not 0 <= op < len(ALU_NAMES):
        raise ValueError(f"ALU operation must be a name or a code in [0, 15], not {op!r}")
    return op


def nonzero_imm(v):
    """Whether an immediate has a nonzero encoding (``-0.0`` does)."""
    if isinstance(v, float):
        return v != 0.0 or np.signbit(v)
    return bool(v)


def sub_tile(t, parts, elems):
    """The same buffer seen as a smaller tile (same uid: the same resource)."""
    return Tile(t.mem, parts, elems, t.dtype, t.offset, t.name, t.uid, t.bank)
