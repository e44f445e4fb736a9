# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy model of the tensor engine's N:M structured-sparse matmul
(``docs/tensor-engine.md``, "Structured sparsity"; architecture §6.6).

A *logical* stationary tile ``S[K_log, M]`` with at most ``n`` nonzero weights in every group of
``m`` consecutive K elements is stored *compressed*: ``K_phys = K_log * n / m`` rows of kept
values ``V[K_phys, M]`` and position tags ``T[K_phys, M]``. Physical row ``k`` belongs to group
``g = k // n``; its weight in column ``j`` sits at logical row ``g * m + T[k, j]``. The PE array
holds ``V`` (one physical row per PE row) and every PE selects, by its tag, the moving element
its weight meets, so a sparse matmul over ``K_log`` costs what a dense matmul over ``K_phys``
costs. The chain runs over the *physical* rows, top to bottom::

    p = -0.0
    for k in range(K_phys):
        p = RNE_fp32(p + V[k, j] * X[(k // n) * m + T[k, j], col])
    R[j, col] = p

**Relation to the dense matmul of the decompressed tile.** When the tags of every group are in
increasing order (what :func:`compress` produces), the chain meets the kept weights in the same
order as the dense chain over ``decompress(V, T)``; the dense chain adds the extra terms
``0 * x`` of the pruned positions. For finite ``x`` those terms are signed zeros and
``RNE(p + ±0) = p`` unless ``p`` is ``-0``, where ``-0 + +0 = +0``. So both results are equal
bit for bit, **except** that a sparse ``-0`` may be a dense ``+0``, provided the moving values
at pruned positions are finite (``0 * Inf`` and ``0 * NaN`` are NaN in the dense chain and
absent from the sparse one). With tags in another order the sums are the same terms in another
order, equal only within the usual rounding bound.

Bad input raises :class:`ValueError` naming the group (``group g (physical rows a..b) of column
j``): a tag ``>= m``, two kept weights at the same position, a mask keeping more than ``n`` of a
group, a pattern the config does not enable.
"""

from __future__ import annotations

import numpy as np

from golden.arith import mul_exact
from golden.formats import check_codes, decode
from golden.fma_chain import check_pair, check_tensor_cfg, fma_chain, resolve_dense_format
from rtl.config import LANE_BITS, parse_sparse_pattern

__all__ = ["pattern_params", "tag_bits", "sparse_formats", "metadata_bits_per_kept",
           "compress", "decompress", "validate", "matmul_sparse", "moving_lanes",
           "pack_tags", "unpack_tags", "LANE_BITS"]



def tag_bits(m):
    """Bits of one position tag of a group of ``m``: ``ceil(log2(m))`` (at least 1)."""
    return max(1, (m - 1).bit_length())


def pattern_params(pattern, cfg):
    """``(n, m)`` of an enabled pattern name; ``ValueError`` naming ``cfg.sparsity`` otherwise."""
    check_tensor_cfg(cfg)
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a pattern name such as '4:16', not {pattern!r}")
    if pattern not in cfg.sparsity:
        raise ValueError(f"pattern must be one of the enabled patterns {cfg.sparsity} "
                         f"(cfg {cfg.name!r}), not {pattern!r}")
    return parse_sparse_pattern(pattern)


def sparse_formats(cfg, pattern):
    """Names of the enabled dense formats a sparse matmul of ``pattern`` can move: the m/n
    elements of a row must share one 32-bit lane (``width * m / n <= 32``)."""
    n, m = pattern_params(pattern, cfg)
    return tuple(f for f in cfg.formats if cfg.fmt(f).width * m <= LANE_BITS * n)


def metadata_bits_per_kept(pattern):
    """Tag bits stored per kept weight (``ceil(log2 m)``)."""
    return tag_bits(parse_sparse_pattern(pattern)[1])


def _codes2d(a, fmt, name, axes):
    a = np.asarray(a)
    if a.dtype.kind not in "ui":
        raise TypeError(f"{name} must be an array of unsigned integer codes, not dtype {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [{axes}], not shape {a.shape}")
    return check_codes(a, fmt, name=name).astype(np.uint32)


def _group_name(g, n, j):
    return f"group {g} (physical rows {g * n}..{g * n + n - 1}) of column {j}"


def _check_moving_fmt(fx, pattern, cfg):
    if fx.name not in sparse_formats(cfg, pattern):
        raise ValueError(f"fmt_x must be one of {sparse_formats(cfg, pattern)} for pattern "
                         f"{pattern!r} (m/n elements per 32-bit lane), not {fx.name!r}")


def validate(values, tags, pattern, cfg, fmt=None):
    """Check a compressed tile; returns ``(values, tags)`` as uint32 arrays.

    ``values[K_phys, M]`` (codes of ``fmt`` when given), ``tags[K_phys, M]``: ``K_phys`` a
    multiple of ``n`` in ``[n, pe_rows]``, ``M`` in ``[1, pe_cols]``, every tag ``< m``, the
    ``n`` tags of a group distinct. ``ValueError`` naming the group otherwise.
    """
    n, m = pattern_params(pattern, cfg)
    t = np.asarray(tags)
    if t.dtype.kind not in "ui":
        raise TypeError(f"tags must be an array of unsigned integers, not dtype {t.dtype}")
    v = np.asarray(values)
    if fmt is not None:
        v = _codes2d(v, resolve_dense_format(fmt, cfg), "values", "K_phys, M")
    elif v.dtype.kind not in "ui" or v.ndim != 2:
        raise ValueError(f"values must be a 2-D array of unsigned integer codes, not "
                         f"{v.dtype} of shape {v.shape}")
    if t.shape != v.shape:
        raise ValueError(f"tags must have the shape of values {v.shape}, not {t.shape}")
    K, M = v.shape
    if not (1 <= K <= cfg.pe_rows and K % n == 0):
        raise ValueError(f"values K_phys (axis 0) must be a multiple of n = {n} in "
                         f"[{n}, {cfg.pe_rows}] (cfg.pe_rows), not {K}")
    if not 1 <= M <= cfg.pe_cols:
        raise ValueError(f"values M (axis 1) must be in [1, {cfg.pe_cols}] (cfg.pe_cols), "
                         f"not {M}")
    t = t.astype(np.int64)
    for g in range(K // n):
        grp = t[g * n:(g + 1) * n]
        for j in range(M):
            col = grp[:, j]
            if (col >= m).any() or (col < 0).any():
                raise ValueError(f"{_group_name(g, n, j)}: tag must be in [0, {m - 1}] for "
                                 f"pattern {pattern!r}, not {col.tolist()}")
            if len(set(col.tolist())) != n:
                raise ValueError(f"{_group_name(g, n, j)}: two kept weights at the same "
                                 f"position, tags {col.tolist()}")
    return v.astype(np.uint32), t.astype(np.uint32)


def compress(codes, fmt, pattern, cfg, mask=None):
    """``(values[K_phys, M], tags[K_phys, M])`` of a logical tile ``codes[K_log, M]``.

    Without ``mask``: prune by magnitude. In every group of ``m`` rows of a column the ``n``
    largest magnitudes are kept, NaN counting as larger than any number (a NaN weight is never
    hidden by pruning) and Inf as larger than every finite value. **Tie rule:** among equal
    magnitudes (``+0`` and ``-0`` included) the lower position is kept.

    With ``mask`` (bool ``[K_log, M]``, True = keep): at most ``n`` per group (``ValueError``
    naming the group otherwise); a group keeping fewer is filled up with ``+0`` weights at its
    lowest unused positions (what ``decompress`` gives back there anyway).

    The kept weights of a group are listed in increasing position order (so the sparse chain
    adds them in the order of the dense chain, see the module docstring).
    """
    n, m = pattern_params(pattern, cfg)
    f = resolve_dense_format(fmt, cfg)
    c = _codes2d(codes, f, "codes", "K_log, M")
    K, M = c.shape
    if K % m or not 1 <= K // m * n <= cfg.pe_rows:
        raise ValueError(f"codes K_log (axis 0) must be a multiple of m = {m} in [{m}, "
                         f"{cfg.pe_rows * m // n}] (cfg.pe_rows * m / n), not {K}")
    if not 1 <= M <= cfg.pe_cols:
        raise ValueError(f"codes M (axis 1) must be in [1, {cfg.pe_cols}] (cfg.pe_cols), not {M}")
    G = K // m
    vals = np.zeros((G * n, M), dtype=np.uint32)
    tags = np.zeros((G * n, M), dtype=np.uint32)
    if mask is not None:
        mk = np.asarray(mask)
        if mk.dtype != np.bool_ or mk.shape != c.shape:
            raise ValueError(f"mask must be a bool array of shape {c.shape}, not "
                             f"{mk.dtype} {mk.shape}")
    else:
        x = decode(c, f).astype(np.float64)
        nan = np.isnan(x)
        mag = np.where(nan, np.inf, np.abs(x))
    pos = np.arange(m)
    for g in range(G):
        for j in range(M):
            if mask is not None:
                keep = np.flatnonzero(mk[g * m:(g + 1) * m, j])
                if len(keep) > n:
                    raise ValueError(f"mask group {g} (logical rows {g * m}..{g * m + m - 1}) "
                                     f"of column {j} keeps {len(keep)} values, more than "
                                     f"n = {n} of pattern {pattern!r}")
                fill = [p for p in pos if p not in set(keep.tolist())][:n - len(keep)]
                chosen = sorted(keep.tolist() + fill)
                v = [int(c[g * m + p, j]) if p in set(keep.tolist()) else 0 for p in chosen]
            else:
                order = np.lexsort((pos, -mag[g * m:(g + 1) * m, j],
                                    -nan[g * m:(g + 1) * m, j].astype(np.int64)))
                chosen = sorted(order[:n].tolist())
                v = [int(c[g * m + p, j]) for p in chosen]
            vals[g * n:(g + 1) * n, j] = v
            tags[g * n:(g + 1) * n, j] = chosen
    return vals, tags


def decompress(values, tags, fmt, pattern, cfg):
    """The logical tile ``codes[K_phys * m / n, M]``: each kept value at its position, code 0
    (``+0``) elsewhere. The compressed tile is validated first."""
    n, m = pattern_params(pattern, cfg)
    v, t = validate(values, tags, pattern, cfg, fmt)
    K, M = v.shape
    out = np.zeros((K // n * m, M), dtype=np.uint32)
    rows = (np.arange(K) // n * m)[:, None] + t.astype(np.int64)
    out[rows, np.arange(M)[None, :]] = v
    return out


def matmul_sparse(values, tags, fmt_s, pattern, moving_codes, fmt_x, cfg):
    """FP32 bits ``R[M, N]`` of the sparse matmul (chain over the physical rows, see the module
    docstring).

    Parameters
    ----------
    values, tags : arrays [K_phys, M]
        Compressed stationary tile (``validate``), values in ``fmt_s``.
    fmt_s, fmt_x : str or FPFormat
        Enabled dense formats; ``fmt_x`` one of :func:`sparse_formats`; the dense pair rule
        (fp32/tf32 only with fp32/tf32) applies.
    pattern : str
        An enabled pattern (``cfg.sparsity``).
    moving_codes : array [K_phys * m / n, N]
        The logical moving tile.
    cfg : CoreConfig
    """
    n, m = pattern_params(pattern, cfg)
    fs = resolve_dense_format(fmt_s, cfg, "fmt_s")
    fx = resolve_dense_format(fmt_x, cfg, "fmt_x")
    check_pair(fs, fx)
    _check_moving_fmt(fx, pattern, cfg)
    v, t = validate(values, tags, pattern, cfg, fs)
    x = _codes2d(moving_codes, fx, "moving_codes", "K_log, N")
    K, M = v.shape
    if x.shape[0] != K // n * m:
        raise ValueError(f"moving_codes K_log (axis 0) must be K_phys * m / n = {K // n * m}, "
                         f"not {x.shape[0]}")
    N = x.shape[1]
    if not 1 <= N <= cfg.psum_bank_fp32:
        raise ValueError(f"moving_codes N (axis 1) must be in [1, {cfg.psum_bank_fp32}] "
                         f"(cfg.psum_bank_fp32), not {N}")

    def products():
        for k in range(K):
            rows = (k // n) * m + t[k].astype(np.int64)           # [M]
            yield mul_exact(v[k][:, None], fs, x[rows, :], fx)    # [M, N]
    return fma_chain(products())


def moving_lanes(moving_codes, fmt, pattern, cfg):
    """The moving beats' lanes ``uint32[K_phys, N]`` of a logical moving tile
    ``[K_phys * m / n, N]``: row ``k`` (group ``g = k // n``, ``r = k % n``) carries the
    ``CR = m / n`` logical elements ``g * m + r * CR + i`` packed at bits ``[i * w, (i+1) * w)``
    (``w`` the format width), right-aligned in its 32-bit lane."""
    n, m = pattern_params(pattern, cfg)
    f = resolve_dense_format(fmt, cfg, "fmt")
    _check_moving_fmt(f, pattern, cfg)
    x = _codes2d(moving_codes, f, "moving_codes", "K_log, N")
    if x.shape[0] % m:
        raise ValueError(f"moving_codes K_log (axis 0) must be a multiple of m = {m}, "
                         f"not {x.shape[0]}")
    cr, w = m // n, f.width
    K = x.shape[0] // cr
    lanes = np.zeros((K, x.shape[1]), dtype=np.uint64)
    for i in range(cr):
        lanes |= x[i::cr].astype(np.uint64) << np.uint64(i * w)
    return lanes.astype(np.uint32)


def pack_tags(tags, pattern):
    """The stored form of a tag tile ``[K_phys, M]``: per partition (row), the tags of
    consecutive columns packed LSB first, ``32 // tag_bits(m)`` per uint32 word
    (``uint32[K_phys, ceil(M / per_word)]``); column ``j`` is in word ``j // per_word`` at bit
    ``(j % per_word) * tag_bits``."""
    _, m = parse_sparse_pattern(pattern)
    b = tag_bits(m)
    t = np.asarray(tags).astype(np.uint64)
    if t.ndim != 2 or (t >= (1 << b)).any():
        raise ValueError(f"tags must be a 2-D array of {b}-bit tags, not {t.shape}")
    per = 32 // b
    K, M = t.shape
    words = np.zeros((K, -(-M // per)), dtype=np.uint64)
    for j in range(M):
        words[:, j // per] |= t[:, j] << np.uint64((j % per) * b)
    return words.astype(np.uint32)


def unpack_tags(words, pattern, M):
    """Inverse of :func:`pack_tags`: ``uint32[K_phys, M]``."""
    _, m = parse_sparse_pattern(pattern)
    b = tag_bits(m)
    per = 32 // b
    w = np.asarray(words).astype(np.uint64)
    out = np.zeros((w.shape[0], M), dtype=np.uint32)
    for j in range(M):
        out[:, j] = (w[:, j // per] >> np.uint64((j % per) * b)) & np.uint64((1 << b) - 1)
    return out
