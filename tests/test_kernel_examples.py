# SPDX-License-Identifier: Apache-2.0
"""The tutorial's example kernels (``docs/examples/*.py``) on the golden ISA simulator, each
against an independent float64 numpy reference with a stated bound (the inputs rounded to
their formats by ``ml_dtypes``, the 2:4 pruning redone here in numpy), and the ``python run``
code blocks of ``docs/kernels.md`` executed in order. The same kernels on the RTL are
``make sim KERNEL=docs/examples/<file>.py:<function>``."""

import importlib.util
import math
import pathlib
import re

import ml_dtypes
import numpy as np
import pytest

from golden.isasim import IsaSim
from rtl.config import PRESETS, SMALL

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
BF16 = ml_dtypes.bfloat16
U24 = 2.0 ** -24                   # FP32 unit roundoff
TABLE = 2.0 ** -21                 # an activation table's relative error (4 FP32 ulps)


def _module(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(cfg, kernel):
    """``(outputs as float64, sim)`` of ``kernel`` run on the golden simulator."""
    kp = kernel.build()
    sim = IsaSim(cfg, dram_bytes=kp.dram)
    err = kp.locate(sim.run(kp.programs))
    assert err is None, str(err)
    return {n: np.asarray(v, np.float64) for n, v in kp.read_outputs(sim).items()}, sim


def _f64(a, dtype):
    return np.asarray(a).astype(dtype).astype(np.float64)


def _silu(z):
    return z / (1.0 + np.exp(-z))


def _check(out, ref, tol, what):
    ratio = np.abs(out - ref) / tol
    assert ratio.max() <= 1.0, f"{what}: |out - ref| / bound = {ratio.max():.3g}"
    return ratio.max()


CFGS = [pytest.param(SMALL, id="small"), pytest.param(PRESETS["default"], id="default")]


@pytest.mark.parametrize("cfg", CFGS)
def test_first(cfg):
    """``y = silu(w.T @ x)``: bound = the FP32 chain ``1.2 (K + 2) u |w|.T |x|`` (SiLU's slope
    is at most 1.1) + the table's ``2^-21 |y|``."""
    m = _module("first")
    out, _ = _run(cfg, m.first(cfg))
    w, x = (_f64(a, BF16) for a in m.inputs(cfg))
    z = w.T @ x
    ref = _silu(z)
    tol = 1.1 * 1.2 * (w.shape[0] + 2) * U24 * (np.abs(w).T @ np.abs(x)) \
        + TABLE * np.abs(ref) + 1e-37
    _check(out["y"], ref, tol, "first")


@pytest.mark.parametrize("cfg", CFGS)
def test_softmax_odd_free_size(cfg):
    """Row softmax, F = 96: bound ``((F + 4) u + 2 * 2^-21) * y`` (the FP32 sum of F positive
    terms, the exp and reciprocal tables, two roundings)."""
    m = _module("softmax")
    assert m.F == 96
    out, _ = _run(cfg, m.softmax(cfg))
    x = _f64(m.inputs(cfg), BF16)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    tol = ((m.F + 4) * U24 + 2 * TABLE) * ref
    _check(out["y"], ref, tol, "softmax")
    np.testing.assert_allclose(out["y"].sum(axis=1), 1.0, rtol=(m.F + 8) * U24 * 4)


@pytest.mark.parametrize("cfg", CFGS)
def test_residual_gelu_fp8(cfg):
    """``YT = XT + gelu(W.T @ XT)``, fp8 in, bf16 out: bound = bf16's rounding ``2^-8 |y|`` +
    the FP32 chain (GELU's slope is at most 1.13) + the table and the fp32 add."""
    m = _module("gelu_fp8")
    xt8, w8 = m.inputs(cfg)
    out, _ = _run(cfg, m.residual_gelu_fp8(cfg))
    xt, w = xt8.astype(np.float64), w8.astype(np.float64)
    z = w.T @ xt
    g = 0.5 * z * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    ref = xt + g
    chain = 1.13 * 1.2 * (w.shape[0] + 2) * U24 * (np.abs(w).T @ np.abs(xt))
    tol = (2.0 ** -8 * np.abs(ref) + chain + (TABLE + U24) * np.abs(g) + U24 * np.abs(ref)
           + 1e-37)
    _check(out["YT"], ref, tol, "residual_gelu_fp8")
    assert xt.shape[1] % cfg.psum_bank_fp32 and xt.shape[0] > cfg.pe_rows   # tiled over K and N


def _prune_2_4(w):
    """The 2 largest magnitudes of every 4 rows of each column kept (ties: the lower row)."""
    K, M = w.shape
    g = w.reshape(K // 4, 4, M)
    order = np.argsort(-np.abs(g), axis=1, kind="stable")
    keep = np.zeros(g.shape, bool)
    np.put_along_axis(keep, order[:, :2], True, axis=1)
    return (g * keep).reshape(K, M)


@pytest.mark.parametrize("cfg", CFGS)
def test_sparse_gemm_silu(cfg):
    """``Y = silu(prune_2:4(W).T @ X)``: the pruning redone in numpy; bound as :func:`test_first`
    over the kept products."""
    m = _module("sparse_gemm")
    out, _ = _run(cfg, m.sparse_gemm_silu(cfg))
    w, x = (_f64(a, BF16) for a in m.inputs(cfg))
    ws = _prune_2_4(w)
    z = ws.T @ x
    ref = _silu(z)
    tol = 1.1 * 1.2 * (w.shape[0] // 2 + 2) * U24 * (np.abs(ws).T @ np.abs(x)) \
        + TABLE * np.abs(ref) + 1e-37
    _check(out["Y"], ref, tol, "sparse_gemm_silu")
    _, _, values, _ = m.compressed(cfg)
    assert values.shape[0] * 2 == w.shape[0] and np.count_nonzero(ws) <= values.size


def _run_blocks():
    text = (ROOT / "docs" / "kernels.md").read_text()
    return re.findall(r"^```python run\n(.*?)^```", text, flags=re.S | re.M)


def test_docs_blocks_run():
    """Every ```` ```python run ```` block of docs/kernels.md, in order, in one namespace (the
    tutorial's steps build on each other); the first is the code of docs/examples/first.py."""
    blocks = _run_blocks()
    assert len(blocks) >= 4
    first = (EXAMPLES / "first.py").read_text()
    assert blocks[0].strip() in first, \
        "docs/kernels.md's first block must be docs/examples/first.py's code"
    ns = {"__name__": "kernels_md"}
    for i, b in enumerate(blocks):
        exec(compile(b, f"docs/kernels.md block {i}", "exec"), ns)
