# SPDX-License-Identifier: Apache-2.0
"""Generation of the activation tables (deterministic): per function a binade map of segments,
each a degree-6 polynomial fitted at Chebyshev nodes in float64 (relative weights) and rounded
to FP32 coefficient by coefficient, each later coefficient refitted to the rounded earlier
ones (``docs/scalar.md`` §3). :func:`table` is the cached table of a function,
:func:`build_table` builds one afresh.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from golden.activation.references import reference
from golden.activation.table_format import (FUNCTION_IDS, FUNCTIONS, NCOEF, NEG_ZERO, PRE_DIRECT,
                                            PRE_EVEN, PRE_LOG, PRE_PLAIN, SYM_EVEN, SYM_NONE,
                                            SYM_ODD, ActTable)
from golden.formats import FP32_QNAN

__all__ = ["table", "build_table"]


def _b(v):
    return int(np.float32(v).view(np.uint32))


_NODES = 64
_TOL = 2.0 ** -27                 # relative fit error a segment must reach (float64 evaluation)
_MB_MAX = 8
_R = 0.3480                       # |r| bound of the exp reduction (ln2/2 plus rounding margin)


def _cheb(lo, hi, n=_NODES):
    j = np.arange(n)
    u = np.cos((2 * j + 1) * np.pi / (2 * n))
    return np.concatenate([[lo, hi], 0.5 * (lo + hi) + 0.5 * (hi - lo) * u])


def _fit(g, lo, hi, centre, zero_c0=False):
    """FP32 coefficient bits (7,) of a degree-6 fit of ``g`` on [lo, hi] in ``t = z - centre``
    (relative weights), its max relative error on a dense grid (float64 evaluation) and that of
    the unrounded fit."""
    with np.errstate(all="ignore"):
        return _fit_impl(g, lo, hi, centre, zero_c0)


def _fit_impl(g, lo, hi, centre, zero_c0):
    z = _cheb(lo, hi)
    y = g(z)
    t = z - centre
    h = max(abs(lo - centre), abs(hi - centre)) or 1.0
    w = 1.0 / np.maximum(np.abs(y), 1e-300)
    u = t / h
    V = np.vander(u, NCOEF, increasing=True)
    coef = np.zeros(NCOEF)
    fixed = 1 if zero_c0 else 0
    a0, *_ = np.linalg.lstsq(V[:, fixed:] * w[:, None], y * w, rcond=None)
    exact = np.zeros(NCOEF)
    exact[fixed:] = a0 / h ** np.arange(fixed, NCOEF)
    resid = y.copy()
    for j in range(fixed, NCOEF):
        a, *_ = np.linalg.lstsq(V[:, j:] * w[:, None], resid * w, rcond=None)
        c = float(np.float32(a[0] / h ** j))
        coef[j] = c if np.isfinite(c) else 0.0
        resid = resid - coef[j] * t ** j
    naive = np.array([float(np.float32(c)) for c in exact])
    if np.max(np.abs(y - np.polyval(naive[::-1], t)) * w) < np.max(np.abs(resid) * w):
        coef = naive                     # refitting did not pay (an already exact fit)
    zz = np.linspace(lo, hi, 401)
    yy = g(zz)
    pp = np.polyval(coef[::-1], zz - centre)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(pp - yy) / np.maximum(np.abs(yy), 1e-300)
    err = float(np.nanmax(rel))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel0 = np.abs(np.polyval(exact[::-1], zz - centre) - yy) / np.maximum(np.abs(yy), 1e-300)
    bits = np.array([_b(c) for c in coef], dtype=np.uint32)
    return bits, err, float(np.nanmax(rel0))


def _const(c0=0.0, c1=0.0, c2=0.0, neg0=False):
    bits = np.zeros(NCOEF, np.uint32)
    bits[0], bits[1], bits[2] = _b(c0), _b(c1), _b(c2)
    if neg0:
        bits[0] = NEG_ZERO
    return bits


class _Builder:
    def __init__(self):
        self.centre, self.coef, self.var_r, self.scale, self.mulx = [], [], [], [], []
        self.worst = 0.0

    def add(self, coef, centre=0.0, var_r=False, scale=False, mulx=False, err=0.0):
        self.centre.append(_b(centre))
        self.coef.append(np.asarray(coef, np.uint32))
        self.var_r.append(var_r)
        self.scale.append(scale)
        self.mulx.append(mulx)
        self.worst = max(self.worst, err)
        return len(self.centre) - 1

    def binade(self, g, b, sgn, zero_at_0):
        """Segments of binade ``b`` (biased exponent of z), for z of sign ``sgn``; returns
        (mb, first segment)."""
        lo0, hi0 = 2.0 ** (b - 127), 2.0 ** (b - 126)
        for mb in range(_MB_MAX + 1):
            n = 1 << mb
            fits = []
            ok = True
            for j in range(n):
                lo = lo0 + (hi0 - lo0) * j / n
                hi = lo0 + (hi0 - lo0) * (j + 1) / n
                a, bnd = (lo, hi) if sgn > 0 else (-hi, -lo)
                cands = []
                if mb == 0 and zero_at_0:
                    cands.append((0.0, True))
                mid = 0.5 * (a + bnd)
                root = None
                for e_ in (a, bnd):
                    if g(np.array([e_]))[0] == 0.0:
                        root = e_
                cands.append((root, True) if root is not None else (mid, False))
                best = None
                for centre, zc0 in cands:
                    bits, err, err0 = _fit(g, a, bnd, centre, zero_c0=zc0)
                    if best is None or err0 < best[3]:
                        best = (bits, centre, err, err0)
                    if err0 <= _TOL:
                        break
                fits.append(best)
                if best[3] > _TOL and mb < _MB_MAX:
                    ok = False
                    break
            if ok:
                first = None
                for bits, centre, err, _ in fits:
                    s = self.add(bits, centre, err=err)
                    first = s if first is None else first
                return mb, first
        raise AssertionError("unreachable")

    def arrays(self):
        return (np.array(self.centre, np.uint32), np.array(self.coef, np.uint32).reshape(-1, NCOEF),
                np.array(self.var_r, bool), np.array(self.scale, bool), np.array(self.mulx, bool))


def _direct(name, fid, g, *, sym, bmin, bmax, halves, zero_at_0, tiny, big, spec, exp=None,
            pre=PRE_DIRECT, q2=0, log_add=False, neg_nan=False, tiny_odd=False):
    """A table with a binade map (``halves``: signs of z covered, (+1,) or (+1, -1)).

    ``tiny``/``big``: per half a callable ``(builder, sgn) -> segment``. ``exp``: optional
    ``(kmin, kmax, seg_fn)`` with ``seg_fn(builder, k, where)`` (``where`` in below/k/above)."""
    bd = _Builder()
    mb = [[0] * (bmax - bmin) for _ in range(2)]
    base = [[0] * (bmax - bmin) for _ in range(2)]
    tinys, bigs = [0, 0], [0, 0]
    for hi_, sgn in enumerate(halves):
        for b in range(bmin, bmax):
            mb[hi_][b - bmin], base[hi_][b - bmin] = bd.binade(g, b, sgn, zero_at_0)
        tinys[hi_] = tiny(bd, sgn)
        bigs[hi_] = big(bd, sgn) if big is not None else 0
    if len(halves) == 1:
        mb[1], base[1], tinys[1], bigs[1] = mb[0], base[0], tinys[0], bigs[0]
    exp_base, kmin, kmax = 0, 0, 0
    if exp is not None:
        kmin, kmax, seg_fn = exp
        exp_base = seg_fn(bd, kmin - 1, "below")
        for k in range(kmin, kmax + 1):
            seg_fn(bd, k, "k")
        seg_fn(bd, kmax + 1, "above")
    centre, coef, var_r, scale, mulx = bd.arrays()
    return ActTable(name=name, fid=fid, sym=sym, pre=pre, exp_en=exp is not None, bmin=bmin,
                    bmax=bmax, q2=q2, log_add=log_add, neg_nan=neg_nan,
                    mb=tuple(map(tuple, mb)), base=tuple(map(tuple, base)), tiny=tuple(tinys),
                    big=tuple(bigs), exp_base=exp_base, kmin=kmin, kmax=kmax, centre=centre,
                    coef=coef, var_r=var_r, scale=scale, mulx=mulx,
                    spec={k: int(v) for k, v in spec.items()}, tiny_odd=tiny_odd), bd.worst


def _spec(name):
    """Specials from the float64 reference: f(+inf), f(-inf), f(+0), f(-0), canonical NaN."""
    v = reference(name, np.array([np.inf, -np.inf, 0.0, -0.0]))
    out = {}
    for key, val in zip(("+inf", "-inf", "+0", "-0"), v):
        out[key] = FP32_QNAN if np.isnan(val) else _b(val)
    return out


def _tiny_fit(g, bmin, zero_at_0):
    """The segment below binade ``bmin``: ``c0 + c1 * z`` (Taylor-like: ``c0 = f(0)``)."""
    def mk(bd, sgn):
        hi = 2.0 ** (bmin - 127) * sgn
        lo = hi * 2.0 ** -40
        f_hi, f_lo = (float(v) for v in g(np.array([hi, lo])))
        c0 = 0.0 if zero_at_0 else f_lo
        c1 = f_hi / hi if zero_at_0 else (f_hi - f_lo) / (hi - lo)
        return bd.add(_const(c0, c1))
    return mk


def _lin(c0=0.0, c1=0.0, c2=0.0, neg0=False):
    def mk(bd, sgn):
        return bd.add(_const(c0, c1, c2, neg0=neg0))
    return mk


def _kfit(G, scale, mulx=False):
    def mk(bd, k):
        rr = (-_R, _R)
        bits, err, _ = _fit(lambda r: G(k, r), rr[0], rr[1], 0.0)
        return bd.add(bits, 0.0, var_r=True, scale=scale, mulx=mulx, err=err)
    return mk


def _logistic_k(kind):
    """Exp segments of sigmoid / silu / softplus: ``k < 0`` scaled by 2^k, ``k >= 0`` unscaled."""
    ln2 = math.log(2.0)

    def seg_fn(bd, k, where):
        mulx = kind == "silu"
        if where == "above":
            if kind == "sigmoid":
                return bd.add(_const(1.0))
            return bd.add(_const(0.0, 1.0))                       # silu, softplus: y = x
        if where == "below":
            return _kfit(lambda k_, r: np.exp(r), True, mulx)(bd, k)
        if k < 0:
            if kind == "softplus":
                G = lambda k_, r: np.log1p(2.0 ** k_ * np.exp(r)) / 2.0 ** k_  # noqa: E731
            else:
                G = lambda k_, r: np.exp(r) / (1.0 + 2.0 ** k_ * np.exp(r))     # noqa: E731
            return _kfit(G, True, mulx)(bd, k)
        if kind == "softplus":
            G = lambda k_, r: k_ * ln2 + r + np.log1p(2.0 ** -k_ * np.exp(-r))  # noqa: E731
        else:
            G = lambda k_, r: 1.0 / (1.0 + 2.0 ** -k_ * np.exp(-r))            # noqa: E731
        return _kfit(G, False, mulx)(bd, k)
    return seg_fn


def build_table(name):
    """Build the table of function ``name`` afresh (no cache): ``(ActTable, worst)``, ``worst``
    the largest relative fit error of its fitted segments (float64 evaluation of the rounded
    coefficients). :func:`table` is the cached table."""
    fid = FUNCTION_IDS[name]
    spec = _spec(name)

    def f(z):
        return reference(name, z)
    if name in ("identity", "relu", "square", "sign", "abs"):
        sym = {"identity": SYM_NONE, "relu": SYM_NONE, "square": SYM_EVEN, "sign": SYM_ODD,
               "abs": SYM_EVEN}[name]
        pos = {"identity": (0, 1, 0), "relu": (0, 1, 0), "square": (0, 0, 1), "sign": (1, 0, 0),
               "abs": (0, 1, 0)}[name]
        neg = {"identity": (0, 1, 0), "relu": (0, 0, 0)}.get(name, pos)

        def big(bd, sgn):
            return bd.add(_const(*(pos if sgn > 0 else neg)))
        return _direct(name, fid, f, sym=sym, bmin=0, bmax=0,
                       halves=(1,) if sym != SYM_NONE else (1, -1), zero_at_0=True,
                       tiny=big, big=big, spec=spec)
    if name == "exp":
        return _direct(name, fid, f, sym=SYM_NONE, bmin=0, bmax=0, halves=(1, -1),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec,
                       exp=(0, 0, lambda bd, k, w: _kfit(lambda k_, r: np.exp(r), True)(bd, k)))
    if name in ("tanh", "erf"):
        bmax = 131 if name == "tanh" else 129
        return _direct(name, fid, f, sym=SYM_ODD, bmin=97, bmax=bmax, halves=(1,),
                       zero_at_0=True, tiny=_tiny_fit(f, 97, True), big=_lin(1.0), spec=spec)
    if name in ("gelu", "gelu_tanh"):
        return _direct(name, fid, f, sym=SYM_NONE, bmin=97, bmax=131, halves=(1, -1),
                       zero_at_0=True, tiny=_tiny_fit(f, 97, True),
                       big=lambda bd, s: bd.add(_const(0.0, 1.0) if s > 0 else _const(neg0=True)),
                       spec=spec, tiny_odd=True)
    if name in ("sigmoid", "silu", "softplus"):
        z0 = name == "silu"
        return _direct(name, fid, f, sym=SYM_NONE, bmin=97, bmax=127, halves=(1, -1),
                       zero_at_0=z0, tiny=_tiny_fit(f, 97, z0), big=None, spec=spec,
                       exp=(-26, 26, _logistic_k(name)), tiny_odd=z0)
    if name == "log":
        return _direct(name, fid, np.log, sym=SYM_NONE, bmin=126, bmax=128, halves=(1,),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec, pre=PRE_LOG,
                       log_add=True, neg_nan=True)
    if name in ("sqrt", "rsqrt"):
        g = np.sqrt if name == "sqrt" else (lambda z: 1.0 / np.sqrt(z))
        return _direct(name, fid, g, sym=SYM_NONE, bmin=127, bmax=129, halves=(1,),
                       zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec, pre=PRE_EVEN,
                       q2=1 if name == "sqrt" else -1, neg_nan=True)
    if name == "reciprocal":
        return _direct(name, fid, lambda z: 1.0 / z, sym=SYM_ODD, bmin=127, bmax=128,
                       halves=(1,), zero_at_0=False, tiny=_lin(), big=_lin(), spec=spec,
                       pre=PRE_PLAIN, q2=-2)
    raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")


@lru_cache(maxsize=None)
def _table_and_fit(name):
    return build_table(name)


def table(name):
    """The :class:`ActTable` of function ``name`` (deterministic, cached)."""
    if name not in FUNCTION_IDS:
        raise ValueError(f"function must be one of {FUNCTIONS}, not {name!r}")
    return _table_and_fit(name)[0]
