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

from rtl.config import LANE_BITS, CoreConfig, parse_sparse_pattern
from rtl.isa import E_SPARSE_TAG

__all__ = ["OP_LOAD", "OP_MATMUL", "OP_TRANSPOSE", "OP_READ", "OP_NAMES", "ERR_NONE",
           "ERR_SHAPE", "ERR_FORMAT", "ERR_PAIR", "ERR_OPCODE", "ERR_SPARSE", "ERR_ARCH",
           "TensorLayouts"]

#: Opcodes of the command stream.
OP_LOAD, OP_MATMUL, OP_TRANSPOSE, OP_READ = 0, 1, 2, 3
OP_NAMES = {OP_LOAD: "load_stationary", OP_MATMUL: "multiply_moving",
            OP_TRANSPOSE: "transpose", OP_READ: "read_psum"}
#: Error codes (``TensorEngine.err_code``; the first error since reset is kept).
#: ``ERR_SPARSE``: a sparse-tag error (architecture §11.2 ``E_SPARSE_TAG``): a tag ``>= m``,
#: two kept weights of a group at one position, a pattern not enabled, or a matmul whose
#: ``sp`` differs from its weights' pattern.
ERR_NONE, ERR_SHAPE, ERR_FORMAT, ERR_PAIR, ERR_OPCODE, ERR_SPARSE = 0, 1, 2, 3, 4, 5
#: Local error code -> architecture §11.2 status code.
ERR_ARCH = {ERR_SPARSE: E_SPARSE_TAG}


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
        ``k`` (contraction rows used; for a sparse ``load`` the physical rows whose tags are
        checked), ``m`` (columns loaded), ``n`` (moving beats / PSUM entries), ``bank``,
        ``acc`` (accumulate instead of overwrite), ``mx`` (``matmul`` of MX element codes with
        E8M0 scales); with sparsity enabled also ``sp``: 0 = dense, ``i + 1`` = pattern
        ``patterns[i]`` (a sparse ``load`` of kept values and tags, or a sparse ``matmul`` of
        packed moving beats); with a packed mode (:attr:`packed`) also ``pk``: the ``load`` /
        ``matmul`` is packed, ``P`` consecutive K elements per lane (``mx = 0``: double-rate
        FP8, ``P = fp8_pack``; ``mx = 1``: x4 MX, ``P = mx_pack``); ``k`` counts elements, up
        to :attr:`k_max` = ``P * pe_rows``.
    lanes_in : StructLayout
        A moving beat (and a dense stationary beat): ``codes``, ``pe_rows`` lanes of
        :attr:`lane_width` bits (lane k = partition k), a code zero-extended; with MX enabled
        also ``scales``, one E8M0 scale per ``mx_block`` rows (row k uses
        ``scales[k // mx_block]``; ignored by dense operations; row k of an x4 MX beat uses
        ``scales[mx_pack * k // mx_block]``, so a beat has ``ceil(mx_pack * pe_rows /
        mx_block)`` scales). A packed beat (``pk``) holds P codes per lane, element ``P*k + j``
        at bits ``[j * w, (j + 1) * w)`` of lane k (``w`` the element width). A *sparse* moving beat packs
        the ``CR = m / n`` logical elements ``g * m + (k % n) * CR + i`` (``g = k // n``) of
        row k at bits ``[i * w, (i + 1) * w)`` of lane k (``golden.sparse.moving_lanes``).
    lanes_st : StructLayout
        A stationary beat: :attr:`lanes_in` followed, with sparsity enabled, by ``tags``,
        ``pe_rows`` position tags of :attr:`tag_bits` bits (tag of lane k's kept weight in its
        group; ignored by dense loads). Without sparsity it *is* :attr:`lanes_in`.
    patterns : tuple of (n, m)
        The enabled N:M patterns (``cfg.sparsity``); ``sp = i + 1`` selects ``patterns[i]``.
    tag_bits : int
        Bits of a position tag: ``ceil(log2(max m))`` (0 without sparsity).
    lane_width : int
        Bits of a beat lane: :attr:`code_width`, at least 32 with sparsity (a packed lane).
    lanes_out : ArrayLayout
        A result beat: ``pe_cols`` FP32 words (lane m = PSUM partition m).
    fp32_index : int or None
        Index of fp32 in :attr:`pe_formats` (None when it is not enabled).
    fp32_split : bool
        FP32 runs in four passes (``cfg.fp32_passes == 4`` and fp32 enabled): a matmul or load
        with an FP32 operand issues each moving column four times (parts 0..3, see
        :class:`rtl.tensor.splitmul.SplitMultiplier`); every other pair issues it once.
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
        # packed modes (issue 13): FP8 at 2 and MX at 4 elements per PE step
        self.fp8_pack, self.mx_pack = cfg.fp8_pack, cfg.mx_pack
        self.packed = bool(self.fp8_pack or self.mx_pack)
        self.k_max = cfg.pe_rows * max(1, self.fp8_pack, self.mx_pack)
        self.cmd = data.StructLayout({
            "op": 2,
            "fmt": self.fmt_shape,
            "k": range(self.k_max + 1),
            "m": range(cfg.pe_cols + 1),
            "n": range(cfg.psum_bank_fp32 + 1),
            "bank": range(max(2, cfg.psum_banks)),
            "acc": 1,
            "mx": 1,
            **({"sp": range(len(cfg.sparsity) + 1)} if cfg.sparsity else {}),
            **({"pk": 1} if self.packed else {}),
        })
        self.mx = bool(cfg.mx_formats)
        self.mx_blocks = -(-cfg.pe_rows * max(1, self.mx_pack) // cfg.mx_block)
        self.sparse = bool(cfg.sparsity)
        self.pattern_names = tuple(cfg.sparsity)
        self.patterns = tuple(parse_sparse_pattern(p) for p in cfg.sparsity)
        self.tag_bits = max(((m - 1).bit_length() for _, m in self.patterns), default=0)
        self.lane_width = max(self.code_width, LANE_BITS) if self.sparse \
            else self.code_width
        beat = {"codes": data.ArrayLayout(self.lane_width, cfg.pe_rows)}
        if self.mx:
            beat["scales"] = data.ArrayLayout(8, self.mx_blocks)
        self.lanes_in = data.StructLayout(beat)
        self.lanes_st = data.StructLayout({**beat, "tags": data.ArrayLayout(
            self.tag_bits, cfg.pe_rows)}) if self.sparse else self.lanes_in
        # sparse moving elements: (pattern index, element width) pairs that fit a lane, and
        # the widths a PE's tag mux selects at (``sparse_widths``), the group bus width
        self.sparse_combos = tuple(
            (i, f.width) for i, (n, m) in enumerate(self.patterns)
            for f in sorted({f.width: f for f in cfg.dense_formats}.values(), key=lambda f: f.width)
            if f.width * m <= LANE_BITS * n)
        self.sparse_widths = tuple(sorted({w for _, w in self.sparse_combos}))
        self.bus_width = max((self.patterns[i][1] * w for i, w in self.sparse_combos),
                             default=0)
        self.lanes_out = data.ArrayLayout(32, cfg.pe_cols)
        # FP32 in four passes (``cfg.fp32_passes == 4``): the PE multiplier is 12 x 12 and a
        # moving column with an FP32 operand is issued as four consecutive parts
        names = [f.name for f in self.pe_formats]
        self.fp32_index = names.index("fp32") if "fp32" in names else None
        self.fp32_split = cfg.fp32_passes == 4 and self.fp32_index is not None
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

    def sparse_fmt_ok(self, pattern_index):
        """Indices of the dense formats a matmul of ``patterns[pattern_index]`` can move."""
        n, m = self.patterns[pattern_index]
        return tuple(i for i, f in enumerate(self.pe_formats[:len(self.cfg.formats)])
                     if f.width * m <= LANE_BITS * n)

    @property
    def fp8_indices(self):
        """Indices of the enabled dense 8-bit formats (double-rate FP8 operands)."""
        return tuple(i for i, f in enumerate(self.pe_formats[:len(self.cfg.formats)])
                     if f.width == 8)

    @property
    def mx_indices(self):
        """Indices of the element formats of the enabled MX formats."""
        names = {f.name for f in self.cfg.mx_element_formats.values()}
        return tuple(i for i, f in enumerate(self.pe_formats) if f.name in names)

    # --- packing (testbench / driver side) ------------------------------------------------
    def pack_cmd(self, op, *, fmt=0, k=0, m=0, n=0, bank=0, acc=0, mx=0, sp=0, pk=0):
        """The command as an int (``cmd`` layout bits); ``sp`` only with sparsity enabled,
        ``pk`` only with a packed mode (:attr:`packed`)."""
        fields = {"op": op, "fmt": fmt, "k": k, "m": m, "n": n, "bank": bank,
                  "acc": int(acc), "mx": int(mx)}
        if sp and not self.sparse:
            raise ValueError("sp given but the config has no sparse patterns")
        if self.sparse:
            fields["sp"] = sp
        if pk and not self.packed:
            raise ValueError("pk given but the config has no packed mode")
        if self.packed:
            fields["pk"] = int(pk)
        return self.cmd.const(fields).as_value().value

    def sp_index(self, pattern):
        """The ``sp`` field value of an enabled pattern name (``"4:16"``): index + 1."""
        if pattern not in self.pattern_names:
            raise ValueError(f"pattern must be one of {self.pattern_names}, not {pattern!r}")
        return self.pattern_names.index(pattern) + 1

    def pack_lanes(self, codes, scales=(), tags=()):
        """A beat of up to ``pe_rows`` lane words (codes, or packed sparse lanes; missing lanes
        zero), with MX up to ``mx_blocks`` scales and, for a sparse stationary beat, up to
        ``pe_rows`` tags, as an int (``lanes_st`` bits; a beat without tags is also a
        ``lanes_in`` beat)."""
        codes = [int(c) for c in codes]
        if len(codes) > self.rows:
            raise ValueError(f"a beat holds at most pe_rows = {self.rows} codes, not {len(codes)}")
        w = self.lane_width
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
        tags = [int(t) for t in tags]
        if tags and not self.sparse:
            raise ValueError("tags given but the config has no sparse patterns")
        if len(tags) > self.rows:
            raise ValueError(f"a beat holds at most pe_rows = {self.rows} tags, not {len(tags)}")
        base = self.lanes_in.size
        for i, t in enumerate(tags):
            if not 0 <= t < (1 << self.tag_bits):
                raise ValueError(f"tag must be in [0, {(1 << self.tag_bits) - 1}], not {t}")
            v |= t << (base + self.tag_bits * i)
        return v

    def unpack_out(self, word):
        """A result beat int -> list of ``pe_cols`` FP32 bit patterns."""
        return [(int(word) >> (32 * i)) & 0xFFFFFFFF for i in range(self.cols)]


def config_tag(cfg: CoreConfig) -> str:
    """Short content hash of a config (for module names of separately converted PEs)."""
    return hashlib.sha1(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()[:8]
