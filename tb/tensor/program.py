# SPDX-License-Identifier: Apache-2.0
"""Build a tensor-engine program (command words, stationary and moving beats) together with the
golden PSUM contents and the expected read-out beats (``golden.tensor.PsumModel``).

Pure Python/numpy: used by the cocotb modules, the benchmark and the demo. Words are packed with
the RTL's own layouts (:class:`rtl.tensor.layouts.TensorLayouts`).
"""

from __future__ import annotations

import numpy as np

from golden.sparse import moving_lanes, pattern_params
from golden.tensor import PsumModel
from rtl.config import MX_FORMAT_NAMES
from rtl.tensor.layouts import TensorLayouts, OP_LOAD, OP_MATMUL, OP_TRANSPOSE, OP_READ

__all__ = ["Program", "rand_codes", "allowed_pairs"]


def rand_codes(rng, fmt, shape, p_wild=0.1, spread=3):
    """Codes of ``fmt``: mostly values near 1 (exponent within ``±spread``), a fraction
    ``p_wild`` uniformly random codes (NaN, Inf, subnormal, huge, zero...)."""
    w, M = fmt.width, fmt.man_bits
    sign = rng.integers(0, 2, shape, dtype=np.int64)
    man = rng.integers(0, 1 << M, shape, dtype=np.int64)
    top = (1 << fmt.exp_bits) - 2 if fmt.specials == "ieee" else (1 << fmt.exp_bits) - 1
    e = np.clip(fmt.bias + rng.integers(-spread, spread + 1, shape), 1, top)
    code = (sign << (w - 1)) | (e << M) | man
    if fmt.specials == "fn":      # keep S.1111.111 (NaN) out of the "tame" draws
        code = np.where((code & ((1 << (w - 1)) - 1)) == (1 << (w - 1)) - 1, code - 1, code)
    wild = rng.integers(0, 1 << w, shape, dtype=np.int64)
    pick = rng.random(shape) < p_wild
    return np.where(pick, wild, code).astype(np.uint32)


def allowed_pairs(cfg):
    """Every dense (fmt_s, fmt_x) pair the contract allows."""
    wide = {"fp32", "tf32"}
    return [(a, b) for a in cfg.formats for b in cfg.formats if (a in wide) == (b in wide)]


class Program:
    """A sequence of engine operations, their packed stream words and the golden results.

    Attributes
    ----------
    cmds, st, mv : list of int
        Command words, stationary beats, moving beats in stream order.
    reads : list of (bank, n, expected beats)
        Expected result beats of each ``read`` (list of ``pe_cols`` FP32 words each).
    macs : int
        Useful multiply-accumulates (sum over matmuls of K * M * N).
    errors : list of int
        Error codes the commands are expected to raise, in order.
    """

    def __init__(self, cfg, rng=None):
        self.cfg = cfg
        self.tl = TensorLayouts(cfg)
        self.model = PsumModel(cfg)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.cmds, self.st, self.mv = [], [], []
        self.reads = []
        self.macs = 0
        self.errors = []
        self._s = None          # (codes [R, M] incl. padding, fmt name, scales, K-agnostic)
        self._sp = None         # (pattern, tags) of a sparse load, None for dense weights

    # --- operations ---------------------------------------------------------------------------
    def load(self, codes, fmt, scales=None, pad_wild=True):
        """LoadStationary of ``codes [K, M]`` in ``fmt`` (a PE format name). Rows ``K..R-1``
        of the beats are filled with random codes (they must never matter). ``scales``
        ``[ceil(K / mx_block), M]`` for an MX load."""
        cfg, tl = self.cfg, self.tl
        codes = np.asarray(codes, dtype=np.uint32)
        K, M = codes.shape
        f = cfg.fmt(fmt)
        full = rand_codes(self.rng, f, (cfg.pe_rows, M), p_wild=0.5) if pad_wild else \
            np.zeros((cfg.pe_rows, M), dtype=np.uint32)
        full[:K] = codes
        sc = None
        if scales is not None:
            nb = tl.mx_blocks
            sc = np.zeros((nb, M), dtype=np.uint32)
            sc[:len(scales)] = scales
        for j in range(M):
            self.st.append(tl.pack_lanes(full[:, j], [] if sc is None else sc[:, j]))
        self.cmds.append(tl.pack_cmd(OP_LOAD, fmt=tl.fmt_index(fmt), m=M))
        self._s = (codes, fmt, None if scales is None else np.asarray(scales, np.uint32))
        self._sp = None

    def _packed_lanes(self, codes, f, P, p_wild):
        """Lanes ``[pe_rows, cols]`` of a packed tile ``codes [K, cols]``: lane k holds elements
        ``P*k + j`` at bits ``[j*w, (j+1)*w)``; slots at and beyond K hold random codes."""
        cfg = self.cfg
        K, n = codes.shape
        full = rand_codes(self.rng, f, (P * cfg.pe_rows, n), p_wild=p_wild)
        full[:K] = codes
        lanes = np.zeros((cfg.pe_rows, n), dtype=np.uint64)
        for j in range(P):
            lanes |= full[j::P].astype(np.uint64) << np.uint64(j * f.width)
        return lanes

    def load_packed(self, codes, fmt, P, scales=None):
        """Packed LoadStationary (``pk``): ``codes [K, M]``, K up to ``P * pe_rows``, P codes
        per lane; x4 MX (``scales`` given, ``[ceil(K / mx_block), M]``): row k's scale is block
        ``P * k // mx_block``. Unused slots get random codes (they must never matter)."""
        cfg, tl = self.cfg, self.tl
        codes = np.asarray(codes, dtype=np.uint32)
        K, M = codes.shape
        lanes = self._packed_lanes(codes, cfg.fmt(fmt), P, 0.5)
        sc = None
        if scales is not None:
            sc = np.zeros((tl.mx_blocks, M), dtype=np.uint32)
            sc[:len(scales)] = scales
        for j in range(M):
            self.st.append(tl.pack_lanes(lanes[:, j], [] if sc is None else sc[:, j]))
        self.cmds.append(tl.pack_cmd(OP_LOAD, fmt=tl.fmt_index(fmt), m=M, pk=1,
                                     mx=int(scales is not None)))
        self._s = (codes, fmt, None if scales is None else np.asarray(scales, np.uint32))
        self._sp = None

    def matmul_fp8x2(self, codes, fmt, *, bank=0, acc=False):
        """Double-rate FP8 MultiplyMoving (``pk``) of ``codes [K, N]`` (K up to
        ``fp8_pack * pe_rows``) with the last packed FP8 load."""
        cfg, tl = self.cfg, self.tl
        s, fmt_s, _ = self._s
        x = np.asarray(codes, dtype=np.uint32)
        K, N = x.shape
        self.model.matmul_fp8x2(bank, bool(acc), s[:K], fmt_s, x, fmt)
        lanes = self._packed_lanes(x, cfg.fmt(fmt), cfg.fp8_pack, 1.0)
        for j in range(N):
            self.mv.append(tl.pack_lanes(lanes[:, j]))
        self.cmds.append(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fmt), k=K, n=N, bank=bank,
                                     acc=acc, pk=1))
        self.macs += K * s.shape[1] * N

    def matmul_mx_x4(self, codes, scales, mx_fmt, *, bank=0, acc=False, s_mx_fmt=None):
        """x4 MX MultiplyMoving (``pk``, ``mx``): element ``codes [K, N]`` (K up to
        ``mx_pack * pe_rows``), E8M0 ``scales [ceil(K / mx_block), N]``, with the last packed
        MX load."""
        cfg, tl = self.cfg, self.tl
        s, fmt_s, s_sc = self._s
        x = np.asarray(codes, dtype=np.uint32)
        xs = np.asarray(scales, dtype=np.uint32)
        K, N = x.shape
        nb = -(-K // cfg.mx_block)
        self.model.matmul_mx_x4(bank, bool(acc), s[:K], s_sc[:nb], s_mx_fmt, x, xs, mx_fmt)
        el = MX_FORMAT_NAMES[mx_fmt]
        lanes = self._packed_lanes(x, cfg.fmt(el), cfg.mx_pack, 1.0)
        sc = np.full((tl.mx_blocks, N), 0xFF, dtype=np.uint32)    # padding blocks: NaN
        sc[:len(xs)] = xs
        for j in range(N):
            self.mv.append(tl.pack_lanes(lanes[:, j], sc[:, j]))
        self.cmds.append(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(el), k=K, n=N, bank=bank,
                                     acc=acc, mx=1, pk=1))
        self.macs += K * s.shape[1] * N

    def load_sparse(self, values, tags, fmt, pattern, *, expect_error=None):
        """Sparse LoadStationary of a compressed tile (``golden.sparse``: kept ``values`` and
        ``tags`` ``[K_phys, M]``; the command's ``k`` = K_phys rows are tag-checked). Rows
        ``K_phys..R-1`` get random codes and random tags (duplicates and out-of-range tags
        included: unchecked rows must not matter). ``expect_error``: the load is bad (its
        error code is expected, the weights are unusable; nothing is modelled)."""
        cfg, tl = self.cfg, self.tl
        values = np.asarray(values, dtype=np.uint32)
        tags = np.asarray(tags, dtype=np.uint32)
        K, M = values.shape
        full = rand_codes(self.rng, cfg.fmt(fmt), (cfg.pe_rows, M), p_wild=0.5)
        full[:K] = values
        ft = self.rng.integers(0, 1 << tl.tag_bits, (cfg.pe_rows, M)).astype(np.uint32)
        ft[:K] = tags
        for j in range(M):
            self.st.append(tl.pack_lanes(full[:, j], tags=ft[:, j]))
        self.cmds.append(tl.pack_cmd(OP_LOAD, fmt=tl.fmt_index(fmt), m=M, k=K,
                                     sp=tl.sp_index(pattern)))
        if expect_error is not None:
            self.errors.append(expect_error)
            self._s, self._sp = None, None
            return
        self._s = (values, fmt, None)
        self._sp = (pattern, tags)

    def matmul_sparse(self, codes, fmt, *, bank=0, acc=False):
        """Sparse MultiplyMoving of the logical moving tile ``codes [K_log, N]`` with the last
        (sparse) load: ``K_phys = K_log * n / m`` rows, beats of packed lanes
        (``golden.sparse.moving_lanes``); rows ``K_phys..R-1`` carry random lanes."""
        cfg, tl = self.cfg, self.tl
        s, fmt_s, _ = self._s
        pattern, tags = self._sp
        n, m = pattern_params(pattern, cfg)
        x = np.asarray(codes, dtype=np.uint32)
        K_log, N = x.shape
        K = K_log // m * n
        self.model.matmul_sparse(bank, bool(acc), s[:K], tags[:K], fmt_s, pattern, x, fmt)
        lanes = moving_lanes(x, fmt, pattern, cfg)
        full = self.rng.integers(0, 1 << 32, (cfg.pe_rows, N), dtype=np.uint64)
        full[:K] = lanes
        for j in range(N):
            self.mv.append(tl.pack_lanes(full[:, j]))
        self.cmds.append(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fmt), k=K, n=N, bank=bank,
                                     acc=acc, sp=tl.sp_index(pattern)))
        self.macs += K_log * s.shape[1] * N

    def matmul(self, codes, fmt, *, bank=0, acc=False, pad_wild=True):
        """MultiplyMoving of ``codes [K, N]`` in ``fmt`` with the last loaded stationary."""
        cfg, tl = self.cfg, self.tl
        s, fmt_s, _ = self._s
        x = np.asarray(codes, dtype=np.uint32)
        K, N = x.shape
        self.model.matmul(bank, bool(acc), s[:K], fmt_s, x, fmt)
        self._moving(x, cfg.fmt(fmt), pad_wild)
        self.cmds.append(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(fmt), k=K, n=N, bank=bank,
                                     acc=acc))
        self.macs += K * s.shape[1] * N

    def matmul_mx(self, codes, scales, mx_fmt, *, bank=0, acc=False, s_mx_fmt=None):
        """MX MultiplyMoving: element ``codes [K, N]`` of ``mx_fmt`` (e.g. ``"mxfp8_e4m3"``)
        with E8M0 ``scales [ceil(K / mx_block), N]``; the stationary must be an MX load."""
        cfg, tl = self.cfg, self.tl
        s, fmt_s, s_sc = self._s
        x = np.asarray(codes, dtype=np.uint32)
        xs = np.asarray(scales, dtype=np.uint32)
        K, N = x.shape
        self.model.matmul_mx(bank, bool(acc), s[:K], s_sc[:-(-K // cfg.mx_block)], s_mx_fmt, x, xs,
                             mx_fmt)
        el = MX_FORMAT_NAMES[mx_fmt]
        self._moving(x, cfg.fmt(el), True, xs)
        self.cmds.append(tl.pack_cmd(OP_MATMUL, fmt=tl.fmt_index(el), k=K, n=N, bank=bank,
                                     acc=acc, mx=1))
        self.macs += K * s.shape[1] * N

    def transpose(self, K, *, bank=0):
        """Transpose of the first ``K`` rows of the last loaded stationary into ``bank``."""
        s, fmt_s, _ = self._s
        self.model.transpose(bank, s[:K], fmt_s)
        self.cmds.append(self.tl.pack_cmd(OP_TRANSPOSE, k=K, bank=bank))

    def read(self, bank, n):
        """Read ``n`` PSUM entries of ``bank`` (all ``pe_cols`` lanes)."""
        st = self.model.state[bank]
        self.reads.append((bank, n, [[int(st[m, j]) for m in range(self.cfg.pe_cols)]
                                     for j in range(n)]))
        self.cmds.append(self.tl.pack_cmd(OP_READ, n=n, bank=bank))

    def raw_cmd(self, word, expect_error=None):
        """A raw command word (e.g. an invalid one); ``expect_error`` its error code."""
        self.cmds.append(int(word))
        if expect_error is not None:
            self.errors.append(expect_error)

    def _moving(self, x, f, pad_wild, scales=None):
        cfg, tl = self.cfg, self.tl
        K, N = x.shape
        full = rand_codes(self.rng, f, (cfg.pe_rows, N), p_wild=1.0) if pad_wild else \
            np.zeros((cfg.pe_rows, N), dtype=np.uint32)
        full[:K] = x
        sc = None
        if scales is not None:
            sc = np.full((tl.mx_blocks, N), 0xFF, dtype=np.uint32)   # padding blocks: NaN
            sc[:len(scales)] = scales
        for j in range(N):
            self.mv.append(tl.pack_lanes(full[:, j], [] if sc is None else sc[:, j]))

    # --- results ------------------------------------------------------------------------------
    def expected_beats(self):
        """Every expected result beat, in read order (lists of FP32 words)."""
        return [b for _, _, beats in self.reads for b in beats]
