# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's tensor engine operations: matmul, transpose, N:M sparse matmul."""

from __future__ import annotations

from dataclasses import replace

from golden.ap import ELEM_BYTES, PSUM, SBUF
from rtl.isa import Instr

from golden.kernel.checks import check_stationary_cols, check_tensor_formats, operation

__all__ = ["TensorOps"]


class TensorOps:
    """Tensor engine operations of :class:`golden.kernel.Kernel`."""

    @operation("matmul")
    def matmul(self, out, stationary, moving, accumulate=False):
        """``out[m, n] (=|+=) sum_k stationary[k, m] * moving[k, n]`` on the tensor engine
        (``load_stationary`` + ``multiply_moving``); ``out`` a PSUM tile with
        ``parts = stationary.elems`` and ``elems = moving.elems``. The ``load_stationary`` is
        left out when the same tile, not written since, is already loaded."""
        if out.mem != PSUM or stationary.mem != SBUF or moving.mem != SBUF:
            raise ValueError("matmul out must be a PSUM tile, stationary and moving SBUF tiles")
        check_stationary_cols(self.cfg, "stationary", stationary)
        if stationary.parts != moving.parts or out.parts != stationary.elems \
                or out.elems != moving.elems:
            raise ValueError(f"matmul shapes: stationary [K={stationary.parts}, "
                             f"M={stationary.elems}], moving [K={moving.parts}, "
                             f"N={moving.elems}], out must be [M, N], not [{out.parts}, "
                             f"{out.elems}]")
        check_tensor_formats(self.cfg, stationary, moving)
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

    @operation("transpose")
    def transpose(self, out, tile):
        """``out[m, k] = tile[k, m]`` as raw bits (zero-extended codes) in PSUM: the tensor
        engine's bypass (``load_stationary`` of ``tile`` + ``transpose``). For an ``fp32``
        tile the bits are the values; a narrower tile's codes land in the low bits of each
        FP32 entry, so widen it first (:meth:`copy` to an ``fp32`` tile, exact) to get values
        (docs/kernels.md §5)."""
        check_stationary_cols(self.cfg, "stationary", tile)
        if out.mem != PSUM or tile.mem != SBUF or out.parts != tile.elems \
                or out.elems != tile.parts:
            raise ValueError(f"transpose out must be a PSUM tile [{tile.elems}, {tile.parts}] "
                             f"of the SBUF tile [{tile.parts}, {tile.elems}]")
        check_tensor_formats(self.cfg, tile)
        key = (tile.ap(), self._writer.get(self._res(tile)))
        if key != self._pe_loaded:
            self._emit("pe", "pe", [tile], [],
                       lambda w, p: Instr(op="load_stationary", wait=w, post=p,
                                          aps={"ap1": tile.ap()}))
            self._pe_loaded = key
        self._emit("pe", "pe", [], [out],
                   lambda w, p: Instr(op="transpose", wait=w, post=p, aps={"ap0": out.ap()}))

    @operation("sparse_matmul")
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
        check_stationary_cols(self.cfg, "weights", weights)
        if weights.parts != moving.parts or weights.parts % n or out.parts != weights.elems \
                or out.elems != moving.elems:
            raise ValueError(f"sparse_matmul shapes: weights [K={weights.parts} (a multiple "
                             f"of n = {n}), M={weights.elems}], moving [K={moving.parts}, "
                             f"N={moving.elems}], out must be [M, N], not [{out.parts}, "
                             f"{out.elems}]")
        # the format pair rule (fp32/tf32 only with fp32/tf32) holds already: w_fmt has 8 or
        # 16 bits, and x_fmt packs m/n >= 2 elements into a 32-bit lane (at most 16 bits)
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

