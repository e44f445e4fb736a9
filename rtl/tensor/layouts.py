# SPDX-License-Identifier: Apache-2.0
"""Payload layouts and derived constants of the tensor engine, all computed from a config.

One :class:`TensorLayouts` object per :class:`~rtl.config.CoreConfig` gives the PE formats
(``pe_formats``: the enabled dense formats, then the MX element formats not already among them),
the lane code width, the command / data-beat / result layouts and the opcodes. The RTL, the
testbench packer and the golden-model driver all read them from here; nothing restates a width.
"""

from __future__ import annotations

import hashlib
import json

from amaranth.hdl import unsigned
from amaranth.lib import data

from rtl.config import CoreConfig

__all__ = ["OP_LOAD", "OP_MATMUL", "OP_TRANSPOSE", "OP_READ", "OP_NAMES", "ERR_NONE",
           "ERR_SHAPE", "ERR_FORMAT", "ERR_PAIR", "ERR_OPCODE", "TensorLayouts"]

#: Opcodes of the command stream.
OP_LOAD, OP_MATMUL, OP_TRANSPOSE, OP_READ = 0, 1, 2, 3
OP_NAMES = {OP_LOAD: "load_stationary", OP_MATMUL: "multiply_moving",
            OP_TRANSPOSE: "transpose", OP_READ: "read_psum"}
#: Error codes (``TensorEngine.err_code``; the first error since reset is kept).
ERR_NONE, ERR_SHAPE, ERR_FORMAT, ERR_PAIR, ERR_OPCODE = 0, 1, 2, 3, 4


class TensorLayouts:
    """Layouts of one tensor-engine configuration.

    Parameters
    ----------
    cfg : CoreConfig

    Attributes
    ----------
    pe_formats : tuple of FPFormat
        Formats a PE multiplier accepts; a format *index* (``fmt`` fields) indexes this tuple.
    code_width : int
        Lane width of the stationary / moving beats (widest PE format).
    fmt_shape : Shape
        Shape of a format index.
    cmd : StructLayout
        Command: ``op``, ``fmt`` (stationary format for ``load``, moving format for ``matmul``),
        ``k`` (contraction rows used), ``m`` (columns loaded), ``n`` (moving beats / PSUM entries),
        ``bank``, ``acc`` (accumulate instead of overwrite), ``mx`` (``matmul`` of MX element
        codes with E8M0 scales).
    lanes_in : StructLayout
        A stationary or moving beat: ``codes``, ``pe_rows`` codes (lane k = partition k),
        zero-extended; with MX enabled also ``scales``, one E8M0 scale per ``mx_block`` rows
        (row k uses ``scales[k // mx_block]``; ignored by dense operations).
    lanes_out : ArrayLayout
        A result beat: ``pe_cols`` FP32 words (lane m = PSUM partition m).
    """

    def __init__(self, cfg: CoreConfig):
        if not isinstance(cfg, CoreConfig):
            raise TypeError(f"TensorLayouts cfg must be a CoreConfig, not {cfg!r}")
        self.cfg = cfg
        fmts = list(cfg.dense_formats)
        for f in cfg.mx_element_formats.values():
            if f not in fmts:
                fmts.append(f)
        self.pe_formats = tuple(fmts)
        self.code_width = max(f.width for f in self.pe_formats)
        self.fmt_shape = unsigned(max(1, (len(self.pe_formats) - 1).bit_length()))
        self.rows, self.cols = cfg.pe_rows, cfg.pe_cols
        self.cmd = data.StructLayout({
            "op": 2,
            "fmt": self.fmt_shape,
            "k": range(cfg.pe_rows + 1),
            "m": range(cfg.pe_cols + 1),
            "n": range(cfg.psum_bank_fp32 + 1),
            "bank": range(max(2, cfg.psum_banks)),
            "acc": 1,
            "mx": 1,
        })
        self.mx = bool(cfg.mx_formats)
        self.mx_blocks = -(-cfg.pe_rows // cfg.mx_block)
        beat = {"codes": data.ArrayLayout(self.code_width, cfg.pe_rows)}
        if self.mx:
            beat["scales"] = data.ArrayLayout(8, self.mx_blocks)
        self.lanes_in = data.StructLayout(beat)
        self.lanes_out = data.ArrayLayout(32, cfg.pe_cols)
        self.psum_depth = cfg.psum_banks * cfg.psum_bank_fp32

    # --- format helpers -------------------------------------------------------------------
    def fmt_index(self, fmt):
        """Index of ``fmt`` (name or FPFormat) in :attr:`pe_formats`; ValueError otherwise."""
        name = fmt if isinstance(fmt, str) else getattr(fmt, "name", None)
        for i, f in enumerate(self.pe_formats):
            if f.name == name:
                return i
        raise ValueError(f"fmt must be one of {[f.name for f in self.pe_formats]}, not {fmt!r}")

    @property
    def dense_indices(self):
        """Indices of the enabled dense formats (valid for ``matmul``)."""
        return tuple(range(len(self.cfg.formats)))

    @property
    def wide_indices(self):
        """Indices of fp32/tf32, which pair only with each other (contract §1)."""
        return tuple(i for i, f in enumerate(self.pe_formats[:len(self.cfg.formats)])
                     if f.name in ("fp32", "tf32"))

    @property
    def mx_indices(self):
        """Indices of the element formats of the enabled MX formats."""
        names = {f.name for f in self.cfg.mx_element_formats.values()}
        return tuple(i for i, f in enumerate(self.pe_formats) if f.name in names)

    # --- packing (testbench / driver side) ------------------------------------------------
    def pack_cmd(self, op, *, fmt=0, k=0, m=0, n=0, bank=0, acc=0, mx=0):
        """The command as an int (``cmd`` layout bits)."""
        return self.cmd.const({"op": op, "fmt": fmt, "k": k, "m": m, "n": n, "bank": bank,
                               "acc": int(acc), "mx": int(mx)}).as_value().value

    def pack_lanes(self, codes, scales=()):
        """A beat of up to ``pe_rows`` codes (missing lanes zero) and, with MX, up to
        ``mx_blocks`` scales, as an int."""
        codes = [int(c) for c in codes]
        if len(codes) > self.rows:
            raise ValueError(f"a beat holds at most pe_rows = {self.rows} codes, not {len(codes)}")
        w = self.code_width
        v = 0
        for i, c in enumerate(codes):
            if not 0 <= c < (1 << w):
                raise ValueError(f"lane code must be in [0, {(1 << w) - 1}], not {c}")
            v |= c << (i * w)
        scales = [int(x) for x in scales]
        if scales and not self.mx:
            raise ValueError("scales given but the config has no MX formats")
        if len(scales) > (self.mx_blocks if self.mx else 0):
            raise ValueError(f"a beat holds at most {self.mx_blocks} scales, not {len(scales)}")
        base = w * self.rows
        for i, x in enumerate(scales):
            if not 0 <= x < 256:
                raise ValueError(f"scale code must be in [0, 255], not {x}")
            v |= x << (base + 8 * i)
        return v

    def unpack_out(self, word):
        """A result beat int -> list of ``pe_cols`` FP32 bit patterns."""
        return [(int(word) >> (32 * i)) & 0xFFFFFFFF for i in range(self.cols)]


def config_tag(cfg: CoreConfig) -> str:
    """Short content hash of a config (for module names of separately converted PEs)."""
    return hashlib.sha1(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
