# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's allocator: DRAM tensors, SBUF tiles (banks, first fit, free) and PSUM
tiles."""

from __future__ import annotations

import numpy as np

from golden.ap import ELEM_BYTES, PSUM, SBUF
from golden.kernel.data import check_tensor_codes, data_codes
from golden.kernel.types import DramTensor, Tile


__all__ = ["Allocator"]


class Allocator:
    """DRAM, SBUF and PSUM allocation of :class:`golden.kernel.Kernel`."""

    def _word(self, n):
        W = self.cfg.sbuf_word_bytes
        return -(-n // W) * W

    def dram_tensor(self, name, shape=None, dtype="bf16", data=None, *, codes=None):
        """A DRAM tensor ``[rows, cols]`` of ``dtype``, zero unless given values or codes.

        Parameters
        ----------
        name : str
        shape : tuple, optional
            ``(rows, cols)``; taken from ``data`` or ``codes`` when they are given.
        dtype : str
            Element format (a :data:`golden.ap.ELEM_BYTES` name).
        data : array of float, optional
            Values (``float32``, ``float64``, or the ``ml_dtypes`` type that is exactly
            ``dtype``), converted to ``dtype`` by round to nearest even
            (:mod:`golden.kernel.data`). Integer arrays raise ``TypeError``.
        codes : array of int, optional
            Element codes of ``dtype`` instead, each in ``[0, 2**bits)``.
        """
        if name in self.tensors:
            raise ValueError(f"dram_tensor name {name!r} is already used")
        if dtype not in ELEM_BYTES:
            raise ValueError(f"dram_tensor dtype must be one of {sorted(ELEM_BYTES)}, "
                             f"not {dtype!r}")
        if data is not None and codes is not None:
            raise ValueError(f"dram_tensor {name!r} takes data= (values) or codes=, not both")
        if data is not None:
            data = data_codes(self.cfg, name, dtype, data)
        elif codes is not None:
            data = check_tensor_codes(name, dtype, codes)
        if data is not None:
            if shape is not None and tuple(shape) != data.shape:
                raise ValueError(f"dram_tensor {name!r} shape {tuple(shape)!r} must be the "
                                 f"shape of its {'codes' if codes is not None else 'data'} "
                                 f"{data.shape!r} (or None)")
            shape = data.shape
        if shape is None or len(shape) != 2 or min(shape) < 1:
            raise ValueError(f"dram_tensor {name!r} shape must be (rows >= 1, cols >= 1), "
                             f"not {shape!r}")
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
            what = f"{name!r} " if name else ""
            raise ValueError(f"sbuf_tile {what}of {elems} {dtype} ({size} bytes per partition) "
                             f"does not fit the SBUF: {used} of {c.sbuf_bytes_per_partition} "
                             f"bytes per partition in use, the largest free run "
                             f"{self._largest_free()} bytes (tiles that fit a bank are spread "
                             f"over the {c.sbuf_banks} banks: allocate the big ones first)")
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

    def _largest_free(self):
        """The longest run of free bytes per partition in the SBUF."""
        best, off = 0, 0
        for a, b in sorted(self._live.values()):
            best, off = max(best, a - off), max(off, b)
        return max(best, self.cfg.sbuf_bytes_per_partition - off)

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
        what = f"psum_tile {name!r}" if name else "psum_tile"
        for field, v, hi, rule in (("bank", bank, c.psum_banks - 1, "psum_banks - 1"),
                                   ("n", n, c.psum_bank_fp32, "psum_bank_fp32: FP32 entries "
                                    "of a bank"),
                                   ("parts", parts, c.partitions, "partitions")):
            lo = 0 if field == "bank" else 1
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{what} {field} must be in [{lo}, {hi}] ({rule}), not {v!r}")
        return Tile(PSUM, parts, n, "fp32", bank * c.psum_bank_bytes, name or f"psum{bank}",
                    -1 - bank, bank)

