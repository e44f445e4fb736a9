# SPDX-License-Identifier: Apache-2.0
"""Bit-exact numpy model of the tensor engine (``docs/tensor-engine.md``): dense matmul, PSUM
overwrite/accumulate, transpose and MX matmul.

Notation: stationary ``S[K, M]`` (K on partitions = PE rows), moving ``X[K, N]``, result
``R[M, N] = S.T @ X``. Every output element is the chain of fused multiply-adds, top to bottom::

    p = -0.0                                   # FP32 0x80000000, the additive identity
    for k in range(K):
        p = RNE_fp32(p + S[k, m] * X[k, n])    # exact product, one rounding
    R[m, n] = p

Functions are vectorized over ``M`` and ``N`` and loop over ``K``. FP32 results are ``np.uint32``
bit patterns; NaN results are the canonical ``0x7FC00000``. Invalid arguments raise
:class:`ValueError` (or :class:`TypeError` for wrong types) naming the argument and the allowed
range; a rejected operation changes nothing (see :class:`PsumModel`).
"""

from __future__ import annotations

import math

import numpy as np

from golden.arith import add_fp32, mul_exact
from golden.fma_chain import (FP32_NEG_ZERO, check_pair, check_tensor_cfg, fma_chain,
                              resolve_dense_format)
from golden.formats import check_codes, decode, decode_e8m0
from rtl.config import E8M0, MX_FORMAT_NAMES, FPFormat

__all__ = [
    "FP32_NEG_ZERO", "matmul", "psum_update", "transpose", "matmul_mx", "mx_product",
    "resolve_dense_format", "check_pair", "transpose_formats", "PsumModel",
    "matmul_fp8x2", "matmul_mx_x4", "packed_step", "round_fp32_exact",
]


# --- argument checking ---------------------------------------------------------------------------

def _check_2d(name, a, axes):
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [{axes}], not shape {a.shape}")


def _check_dim(what, value, hi, field):
    if not 1 <= value <= hi:
        raise ValueError(f"{what} must be in [1, {hi}] (cfg.{field}), not {value}")


def _check_codes2d(codes, fmt, name, axes):
    a = np.asarray(codes)
    if a.dtype.kind not in "ui":
        raise TypeError(f"{name} must be an array of unsigned integer codes, not dtype {a.dtype}")
    _check_2d(name, a, axes)
    return check_codes(a, fmt, name=name)


def _check_shapes(cfg, s, x, sname, xname):
    K, M = s.shape
    Kx, N = x.shape
    _check_dim(f"{sname} K (axis 0)", K, cfg.pe_rows, "pe_rows")
    _check_dim(f"{sname} M (axis 1)", M, cfg.pe_cols, "pe_cols")
    if Kx != K:
        raise ValueError(f"{xname} K (axis 0) must equal {sname} K = {K}, not {Kx}")
    _check_dim(f"{xname} N (axis 1)", N, cfg.psum_bank_fp32, "psum_bank_fp32")
    return K, M, N


def _check_bool(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {v!r}")
    return bool(v)


# --- dense matmul (contract §1) -------------------------------------------------------------------

def matmul(stationary_codes, fmt_s, moving_codes, fmt_x, cfg):
    """FP32 bits ``R[M, N]`` of ``S.T @ X`` computed by the PE array (contract §1).

    Parameters
    ----------
    stationary_codes : array of unsigned int, shape [K, M]
        Codes of ``fmt_s`` (weights; row k sits in PE row k). ``1 <= K <= cfg.pe_rows``,
        ``1 <= M <= cfg.pe_cols``.
    fmt_s, fmt_x : str or FPFormat
        Enabled dense formats (``cfg.formats``). fp32/tf32 pair only with fp32/tf32.
    moving_codes : array of unsigned int, shape [K, N]
        Codes of ``fmt_x``; ``1 <= N <= cfg.psum_bank_fp32``.
    cfg : CoreConfig

    Returns
    -------
    np.ndarray of uint32, shape [M, N]
        ``p = -0.0; for k < K: p = RNE_fp32(p + S[k,m] * X[k,n])`` (exact product, one rounding
        per step, NaN canonical). Rows ``k >= K`` of the array do not participate.
    """
    check_tensor_cfg(cfg)
    fs = resolve_dense_format(fmt_s, cfg, "fmt_s")
    fx = resolve_dense_format(fmt_x, cfg, "fmt_x")
    check_pair(fs, fx)
    s = _check_codes2d(stationary_codes, fs, "stationary_codes", "K, M")
    x = _check_codes2d(moving_codes, fx, "moving_codes", "K, N")
    K, M, N = _check_shapes(cfg, s, x, "stationary_codes", "moving_codes")
    return fma_chain(mul_exact(s[k][:, None], fs, x[k][None, :], fx) for k in range(K))


# --- PSUM (contract §2) ---------------------------------------------------------------------------

def psum_update(psum_bits, result_bits, accumulate):
    """New PSUM contents ``[M, N]``: ``result_bits`` (overwrite) or
    ``add_fp32(psum_bits, result_bits)`` (accumulate; RNE FP32 add, canonical NaN)."""
    acc = _check_bool("accumulate", accumulate)
    r = np.asarray(result_bits)
    old = np.asarray(psum_bits)
    for nm, a in (("psum_bits", old), ("result_bits", r)):
        if a.dtype.kind not in "ui":
            raise TypeError(f"{nm} must be an array of uint32 FP32 bit patterns, "
                            f"not dtype {a.dtype}")
    if old.shape != r.shape:
        raise ValueError(f"psum_bits must have the shape of result_bits {r.shape}, "
                         f"not {old.shape}")
    r = _bits(r, "result_bits")
    old = _bits(old, "psum_bits")
    if not acc:
        return r
    return add_fp32(old, r)


def _bits(a, name):
    a = np.asarray(a)
    if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF):
        raise ValueError(f"{name} must be in [0, 4294967295] (FP32 bit patterns)")
    return a.astype(np.uint32)


# --- transpose (contract §3) ----------------------------------------------------------------------

def transpose_formats(cfg):
    """Format names :func:`transpose` accepts: the enabled dense formats and the element formats
    of the enabled MX formats (every code the stationary registers can hold)."""
    check_tensor_cfg(cfg)
    names = list(cfg.formats)
    for mx in cfg.mx_formats:
        el = MX_FORMAT_NAMES[mx]
        if el not in names:
            names.append(el)
    return tuple(names)


def _resolve_transpose_format(fmt, cfg):
    allowed = transpose_formats(cfg)
    if isinstance(fmt, FPFormat):
        ok = fmt.name in allowed and cfg.fmt(fmt.name) == fmt
        nm = fmt.name
    elif isinstance(fmt, str):
        ok, nm = fmt in allowed, fmt
    else:
        raise TypeError(f"fmt must be a format name (str) or an rtl.config.FPFormat, "
                        f"not {fmt!r}")
    if not ok:
        raise ValueError(f"fmt must be one of {allowed} (cfg {cfg.name!r}), not {fmt!r}")
    return cfg.fmt(nm)


def transpose(codes, fmt, cfg):
    """``T.T`` as raw bits: ``uint32 [M, K]`` with ``out[m, k] = T[k, m]`` zero-extended (§3).

    ``codes`` is ``[K, M]`` of ``fmt`` (any of :func:`transpose_formats`), loaded as the
    stationary; the moving operand is the identity generated by the hardware (``N = K``). No
    arithmetic touches the bits, so NaN/Inf payloads and signed zeros pass unchanged.
    Limits: ``1 <= K <= cfg.pe_rows``, ``1 <= M <= cfg.pe_cols``, ``K <= cfg.psum_bank_fp32``.
    """
    check_tensor_cfg(cfg)
    f = _resolve_transpose_format(fmt, cfg)
    t = _check_codes2d(codes, f, "codes", "K, M")
    K, M = t.shape
    _check_dim("codes K (axis 0)", K, cfg.pe_rows, "pe_rows")
    _check_dim("codes M (axis 1)", M, cfg.pe_cols, "pe_cols")
    _check_dim("codes K (axis 0, = N of the output)", K, cfg.psum_bank_fp32, "psum_bank_fp32")
    return np.ascontiguousarray(t.T).astype(np.uint32)


# --- MX matmul (contract §4) ----------------------------------------------------------------------

def _resolve_mx(name, cfg, argname):
    if not isinstance(name, str):
        raise TypeError(f"{argname} must be an MX format name (str), not {name!r}")
    if name not in cfg.mx_formats:
        raise ValueError(f"{argname} must be one of the enabled MX formats {cfg.mx_formats} "
                         f"(cfg {cfg.name!r}), not {name!r}")
    return cfg.mx_element_formats[name]


def _scaled(codes, scales, fmt, block):
    """Exact float64 values ``element * 2**(scale - 127)`` [K, n] (NaN scale -> NaN)."""
    e = decode(codes, fmt).astype(np.float64)
    sc = decode_e8m0(scales).astype(np.float64)          # 2**-127 .. 2**127 exactly, or NaN
    sc = np.repeat(sc, block, axis=0)[:codes.shape[0]]  # the last block may be partial
    with np.errstate(invalid="ignore"):
        return e * sc                                    # exact: a power-of-two scaling


def mx_product(s_val, x_val):
    """Exact float64 products of scaled MX elements (NaN canonicalised to ``np.nan``).

    Exact: a scaled element has at most 4 significant bits and magnitude in
    ``[2**-143, 2**143]`` (fp8_e5m2 subnormal 2**-16 times 2**-127 up to 57344 times 2**127),
    so a product has at most 8 significant bits and magnitude in ``[2**-286, 2**286)``: inside
    float64's normal range (``2**-1022 .. 2**1024``).
    """
    with np.errstate(invalid="ignore", over="ignore"):
        p = s_val * x_val
    return np.where(np.isnan(p), np.nan, p)


def _scaled_operands(cfg, s, x, s_scales, x_scales, fs, fx, K, M, N):
    """The MX operands ``s`` ``[K, M]`` and ``x`` ``[K, N]`` (codes of ``fs``, ``fx``) with
    their E8M0 block scales (``ceil(K / mx_block)`` rows, checked) applied: ``(sv, xv)``."""
    blk = cfg.mx_block
    nblk = -(-K // blk)
    ss = _check_codes2d(s_scales, E8M0, "s_scales", "ceil(K / mx_block), M")
    xs = _check_codes2d(x_scales, E8M0, "x_scales", "ceil(K / mx_block), N")
    if ss.shape != (nblk, M):
        raise ValueError(f"s_scales must have shape {(nblk, M)}, not {ss.shape}")
    if xs.shape != (nblk, N):
        raise ValueError(f"x_scales must have shape {(nblk, N)}, not {xs.shape}")
    return _scaled(s, ss, fs, blk), _scaled(x, xs, fx, blk)


def matmul_mx(s_codes, s_scales, s_mx_format, x_codes, x_scales, x_mx_format, cfg):
    """FP32 bits ``R[M, N]`` of the MX matmul (contract §4).

    Parameters
    ----------
    s_codes : array of unsigned int, shape [K, M]
        Stationary element codes of ``s_mx_format``'s element format.
    s_scales : array of unsigned int, shape [ceil(K / cfg.mx_block), M]
        E8M0 scale codes, one per ``cfg.mx_block`` elements along K (0xFF is NaN); row k uses
        scale row ``k // cfg.mx_block``. The last block may be partial, so K is free (a
        32-element OCP block split across two K-tiles of one array carries the same scale in
        both and gives the same products).
    s_mx_format, x_mx_format : str
        Enabled MX formats (``cfg.mx_formats``: ``"mxfp8_e4m3"``, ``"mxfp8_e5m2"``, ``"mxfp4"``);
        any pair is allowed.
    x_codes, x_scales : arrays, shapes [K, N] and [ceil(K / cfg.mx_block), N]
        The moving operand, likewise.
    cfg : CoreConfig

    Returns
    -------
    np.ndarray of uint32, shape [M, N]
        ``p = -0.0; for k < K: p = RNE_fp32(p + (S[k,m] * 2**(ss-127)) * (X[k,n] * 2**(xs-127)))``:
        the scaled product is exact (float64, see :func:`mx_product`) even beyond FP32's range,
        and is added with one rounding (the same round-to-odd fused add as the dense MAC). A NaN
        scale makes its products NaN.
    """
    check_tensor_cfg(cfg)
    if not cfg.mx_formats:
        raise ValueError(f"matmul_mx needs cfg.mx_formats to be non-empty (cfg {cfg.name!r} "
                         f"has MX disabled)")
    fs = _resolve_mx(s_mx_format, cfg, "s_mx_format")
    fx = _resolve_mx(x_mx_format, cfg, "x_mx_format")
    s = _check_codes2d(s_codes, fs, "s_codes", "K, M")
    x = _check_codes2d(x_codes, fx, "x_codes", "K, N")
    K, M, N = _check_shapes(cfg, s, x, "s_codes", "x_codes")
    sv, xv = _scaled_operands(cfg, s, x, s_scales, x_scales, fs, fx, K, M, N)
    return fma_chain(mx_product(sv[k][:, None], xv[k][None, :]) for k in range(K))


# --- packed modes (issue 13): double-rate FP8 and x4 MX -----------------------------------------
#
# A PE step takes P consecutive K elements (P = cfg.fp8_pack = 2, or cfg.mx_pack = 4): row r
# holds S[P*r + j, m] and meets X[P*r + j, n], j < P. The step adds the EXACT sum of its P
# products to the partial sum and rounds once:
#
#     p = RNE_fp32(p + sum_j S[P*r + j, m] * X[P*r + j, n])
#
# Elements with P*r + j >= K do not participate. NaN if any term is NaN (a NaN operand, 0 * Inf,
# a NaN scale) or Infs of both signs meet; otherwise Inf if any term is Inf; an exact zero sum
# is -0 only when p and every product are zeros of negative sign, else +0.

def round_fp32_exact(sig, exp):
    """FP32 bits of ``RNE_fp32(sig * 2**exp)`` for Python ints ``sig`` (signed, nonzero) and
    ``exp`` (subnormals kept, overflow to +-Inf)."""
    neg = sig < 0
    a = -sig if neg else sig
    msb = exp + a.bit_length() - 1              # exponent of the leading bit
    lsb = max(msb - 23, -149)                   # exponent of the result's last kept bit
    sh = lsb - exp
    if sh <= 0:
        q = a << -sh
    else:
        q, rem = a >> sh, a & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    if q >> 24:                                  # rounding carried into a new bit
        q >>= 1
        lsb += 1
    if q >> 23:
        ef = lsb + 23 + 127
        bits = 0x7F800000 if ef >= 255 else (ef << 23) | (q & 0x7FFFFF)
    else:
        bits = q                                 # subnormal (lsb = -149) or zero
    return bits | (0x80000000 if neg else 0)


def packed_step(p_bits, *products):
    """One packed PE step: FP32 bits of ``RNE_fp32(p + sum(products))`` with the sum exact.

    ``p_bits`` is the FP32 partial sum (int), ``products`` exact float64 products (NaN for a
    NaN term). See the contract above for specials and the sign of a zero."""
    p = int(p_bits)
    nan = pinf = ninf = False
    terms = []
    e, man, sp = (p >> 23) & 0xFF, p & 0x7FFFFF, p >> 31
    neg_zero = False
    if e == 255:
        if man:
            nan = True
        elif sp:
            ninf = True
        else:
            pinf = True
    elif e == 0 and man == 0:
        neg_zero = bool(sp)
    else:
        sig = (man | (1 << 23)) if e else man
        terms.append((-sig if sp else sig, (e if e else 1) - 150))
    for q in products:
        q = float(q)
        if math.isnan(q):
            nan = True
        elif math.isinf(q):
            if q < 0:
                ninf = True
            else:
                pinf = True
        elif q == 0:
            neg_zero = neg_zero and math.copysign(1.0, q) < 0
        else:
            f, ex = math.frexp(q)
            terms.append((int(f * (1 << 53)), ex - 53))
            neg_zero = False
    if nan or (pinf and ninf):
        return 0x7FC00000
    if pinf or ninf:
        return 0xFF800000 if ninf else 0x7F800000
    if terms and any(t for t, _ in terms):
        emin = min(x for _, x in terms)
        total = sum(t << (x - emin) for t, x in terms)
        if total:
            return round_fp32_exact(total, emin)
    return 0x80000000 if neg_zero else 0


_STEP_UFUNCS = {}


def _packedfma_chain(planes, P):
    """The packed chain over exact product planes ``planes[k]`` ``[M, N]``: row r adds planes
    ``P*r .. P*r + P - 1`` (those that exist) exactly and rounds once."""
    p = np.full(planes[0].shape, FP32_NEG_ZERO, dtype=np.uint32)
    for r in range(0, len(planes), P):
        group = planes[r:r + P]
        f = _STEP_UFUNCS.setdefault(len(group), np.frompyfunc(packed_step, len(group) + 1, 1))
        p = f(p, *group).astype(np.uint32)
    return p


def _check_pack(cfg, what, P):
    if not P:
        raise ValueError(f"{what} is not available on cfg {cfg.name!r} (cfg.fp8_pack / "
                         f"cfg.mx_pack is 0: docs/tensor-engine.md, packed modes)")


def _check_packed_shapes(cfg, s, x, sname, xname, P):
    K, M = s.shape
    Kx, N = x.shape
    _check_dim(f"{sname} K (axis 0)", K, P * cfg.pe_rows, f"pe_rows * {P}")
    _check_dim(f"{sname} M (axis 1)", M, cfg.pe_cols, "pe_cols")
    if Kx != K:
        raise ValueError(f"{xname} K (axis 0) must equal {sname} K = {K}, not {Kx}")
    _check_dim(f"{xname} N (axis 1)", N, cfg.psum_bank_fp32, "psum_bank_fp32")
    return K, M, N


def matmul_fp8x2(stationary_codes, fmt_s, moving_codes, fmt_x, cfg):
    """FP32 bits ``R[M, N]`` of a double-rate FP8 matmul: ``K <= cfg.fp8_pack * pe_rows``.

    Both formats must be enabled 8-bit formats (fp8_e5m2, fp8_e4m3, fp8_e4m3fn, cfp8, any
    pair). PE row r meets elements ``2r`` and ``2r + 1``; each step rounds once after adding the
    exact sum of its two products (:func:`packed_step`).
    """
    check_tensor_cfg(cfg)
    P = cfg.fp8_pack
    _check_pack(cfg, "double-rate FP8", P)
    fs = resolve_dense_format(fmt_s, cfg, "fmt_s")
    fx = resolve_dense_format(fmt_x, cfg, "fmt_x")
    for nm, f in (("fmt_s", fs), ("fmt_x", fx)):
        if f.width != 8:
            raise ValueError(f"{nm} must be an 8-bit format {tuple(g.name for g in cfg.fp8_formats)}"
                             f" for double-rate FP8, not {f.name!r}")
    s = _check_codes2d(stationary_codes, fs, "stationary_codes", "K, M")
    x = _check_codes2d(moving_codes, fx, "moving_codes", "K, N")
    K, M, N = _check_packed_shapes(cfg, s, x, "stationary_codes", "moving_codes", P)
    planes = [mul_exact(s[k][:, None], fs, x[k][None, :], fx) for k in range(K)]
    return _packedfma_chain(planes, P)


def matmul_mx_x4(s_codes, s_scales, s_mx_format, x_codes, x_scales, x_mx_format, cfg):
    """FP32 bits ``R[M, N]`` of an x4 MX matmul: ``K <= cfg.mx_pack * pe_rows``.

    Arguments as :func:`matmul_mx` (one E8M0 scale per ``cfg.mx_block`` elements along K). PE
    row r meets elements ``4r .. 4r + 3`` (one block: ``mx_block`` is a multiple of 4); each
    step rounds once after adding the exact sum of its four scaled products.
    """
    check_tensor_cfg(cfg)
    P = cfg.mx_pack
    _check_pack(cfg, "x4 MX", P)
    fs = _resolve_mx(s_mx_format, cfg, "s_mx_format")
    fx = _resolve_mx(x_mx_format, cfg, "x_mx_format")
    s = _check_codes2d(s_codes, fs, "s_codes", "K, M")
    x = _check_codes2d(x_codes, fx, "x_codes", "K, N")
    K, M, N = _check_packed_shapes(cfg, s, x, "s_codes", "x_codes", P)
    sv, xv = _scaled_operands(cfg, s, x, s_scales, x_scales, fs, fx, K, M, N)
    planes = [mx_product(sv[k][:, None], xv[k][None, :]) for k in range(K)]
    return _packedfma_chain(planes, P)


# --- PSUM state model -----------------------------------------------------------------------------

class PsumModel:
    """PSUM contents and the tensor-engine operations that write them.

    Parameters
    ----------
    cfg : CoreConfig

    Members
    -------
    state : np.ndarray of uint32, shape [cfg.psum_banks, cfg.pe_cols, cfg.psum_bank_fp32]
        ``state[bank, m, n]``: FP32 bits. Starts all zero (+0.0) in the model; a testbench should
        overwrite an entry before relying on it.

    Every operation validates all its arguments before writing: a rejected operation raises
    ``ValueError``/``TypeError`` and leaves ``state`` unchanged (the hardware's "command
    rejected, nothing written"). Only ``m < M, n < N`` are written.
    """

    def __init__(self, cfg):
        check_tensor_cfg(cfg)
        self.cfg = cfg
        self.state = np.zeros((cfg.psum_banks, cfg.pe_cols, cfg.psum_bank_fp32), dtype=np.uint32)

    def _check_bank(self, bank):
        if isinstance(bank, bool) or not isinstance(bank, (int, np.integer)):
            raise TypeError(f"bank must be an integer, not {bank!r}")
        if not 0 <= bank < self.cfg.psum_banks:
            raise ValueError(f"bank must be in [0, {self.cfg.psum_banks - 1}] "
                             f"(cfg.psum_banks), not {bank}")
        return int(bank)

    def _write(self, bank, result, accumulate):
        M, N = result.shape
        view = self.state[bank, :M, :N]
        self.state[bank, :M, :N] = psum_update(view, result, accumulate)
        return self.state[bank, :M, :N].copy()

    def matmul(self, bank, accumulate, stationary_codes, fmt_s, moving_codes, fmt_x):
        """Dense matmul into ``bank``; returns the written region ``[M, N]``."""
        b = self._check_bank(bank)
        acc = _check_bool("accumulate", accumulate)
        r = matmul(stationary_codes, fmt_s, moving_codes, fmt_x, self.cfg)
        return self._write(b, r, acc)

    def transpose(self, bank, codes, fmt):
        """Transpose into ``bank`` (always overwrites); returns the written region ``[M, K]``."""
        b = self._check_bank(bank)
        r = transpose(codes, fmt, self.cfg)
        return self._write(b, r, False)

    def matmul_mx(self, bank, accumulate, s_codes, s_scales, s_mx_format, x_codes, x_scales,
                  x_mx_format):
        """MX matmul into ``bank``; returns the written region ``[M, N]``."""
        b = self._check_bank(bank)
        acc = _check_bool("accumulate", accumulate)
        r = matmul_mx(s_codes, s_scales, s_mx_format, x_codes, x_scales, x_mx_format, self.cfg)
        return self._write(b, r, acc)

    def matmul_sparse(self, bank, accumulate, values, tags, fmt_s, pattern, moving_codes,
                      fmt_x):
        """N:M sparse matmul (:func:`golden.sparse.matmul_sparse`) into ``bank``; returns the
        written region ``[M, N]``."""
        from golden.sparse import matmul_sparse
        b = self._check_bank(bank)
        acc = _check_bool("accumulate", accumulate)
        r = matmul_sparse(values, tags, fmt_s, pattern, moving_codes, fmt_x, self.cfg)
        return self._write(b, r, acc)

    def matmul_fp8x2(self, bank, accumulate, stationary_codes, fmt_s, moving_codes, fmt_x):
        """Double-rate FP8 matmul (:func:`matmul_fp8x2`) into ``bank``; returns ``[M, N]``."""
        b = self._check_bank(bank)
        acc = _check_bool("accumulate", accumulate)
        r = matmul_fp8x2(stationary_codes, fmt_s, moving_codes, fmt_x, self.cfg)
        return self._write(b, r, acc)

    def matmul_mx_x4(self, bank, accumulate, s_codes, s_scales, s_mx_format, x_codes, x_scales,
                     x_mx_format):
        """x4 MX matmul (:func:`matmul_mx_x4`) into ``bank``; returns ``[M, N]``."""
        b = self._check_bank(bank)
        acc = _check_bool("accumulate", accumulate)
        r = matmul_mx_x4(s_codes, s_scales, s_mx_format, x_codes, x_scales, x_mx_format,
                         self.cfg)
        return self._write(b, r, acc)

    def read(self, bank, m=None, n=None):
        """A copy of ``state[bank, :m, :n]`` (whole bank when ``m``/``n`` are None)."""
        b = self._check_bank(bank)
        return self.state[b, :m, :n].copy()

    _OPS = ("matmul", "transpose", "matmul_mx", "matmul_sparse", "matmul_fp8x2", "matmul_mx_x4")

    def apply(self, op):
        """Run one operation given as a mapping ``{"op": name, **keyword arguments}``, where
        ``name`` is ``"matmul"``, ``"transpose"``, ``"matmul_mx"`` or ``"matmul_sparse"`` and the keywords are those
        of the method of that name; returns what the method returns."""
        if not hasattr(op, "keys"):
            raise TypeError(f"op must be a mapping with an 'op' key, not {op!r}")
        kw = dict(op)
        name = kw.pop("op", None)
        if name not in self._OPS:
            raise ValueError(f"op['op'] must be one of {self._OPS}, not {name!r}")
        return getattr(self, name)(**kw)

    def run(self, ops):
        """Apply a sequence of operations in order; returns the list of written regions."""
        return [self.apply(op) for op in ops]
