# SPDX-License-Identifier: Apache-2.0
"""Kernels the whole core runs (``make sim``, the core benchmark, ``tests/test_core.py``): each
case builds a :class:`golden.kernel.KernelProgram` (per-engine programs, DRAM image) and the
expected outputs, computed without the ISA simulator (``golden.tensor`` / ``golden.vector`` /
``golden.activation`` called directly), so RTL and golden simulator are both checked against
an independent composition."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.kernel import gemm_kernel
from golden.tensor import add_fp32, matmul

__all__ = ["KernelCase", "KERNELS", "build_case", "bf16_codes", "gemm_reference"]


@dataclass
class KernelCase:
    """``program`` (KernelProgram), ``expected`` ({output name: uint32 codes}), ``flops``
    (multiply-adds x 2 of the tensor engine), ``dram_bytes`` (bytes the DMA moves)."""
    name: str
    program: object
    expected: dict
    flops: int = 0
    dram_bytes: int = 0


def bf16_codes(rng, shape, scale=2.0):
    """bf16 codes (uint32) of random normal values, truncated from FP32 (finite)."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint32)


def gemm_reference(cfg, AT, B, dtype="bf16"):
    """``C = AT.T @ B`` as the tiled kernel computes it: per output tile, the matmul of the first
    K tile, then the FP32 PSUM accumulate (``add_fp32``) of each next K tile's matmul."""
    K, M = AT.shape
    N = B.shape[1]
    TK, TM, TN = cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    C = np.zeros((M, N), dtype=np.uint32)
    for m0 in range(0, M, TM):
        for n0 in range(0, N, TN):
            acc = None
            for k0 in range(0, K, TK):
                r = matmul(AT[k0:k0 + TK, m0:m0 + TM], dtype, B[k0:k0 + TK, n0:n0 + TN],
                           dtype, cfg)
                acc = r if acc is None else add_fp32(acc, r)
            C[m0:m0 + TM, n0:n0 + TN] = acc
    return C


def _gemm(cfg, rng, K=None, M=None, N=None, dram_bytes=1 << 20):
    """Tiled GEMM from DRAM: bf16 A^T [K, M] and B [K, N] loaded by DMA (double-buffered),
    FP32 accumulation in PSUM over the K tiles, evacuated by the vector engine and stored to
    DRAM as C [M, N] fp32."""
    K = K or 4 * cfg.pe_rows
    M = M or 2 * cfg.pe_cols
    N = N or 2 * cfg.psum_bank_fp32
    AT, B = bf16_codes(rng, (K, M)), bf16_codes(rng, (K, N))
    kp = gemm_kernel(cfg, AT, B, evacuate=True, dram_bytes=dram_bytes)
    return KernelCase("gemm", kp, {"C": gemm_reference(cfg, AT, B)}, flops=2 * K * M * N,
                      dram_bytes=2 * (K * M + K * N) + 4 * M * N)


#: name -> builder(cfg, rng, **params) -> KernelCase
KERNELS = {"gemm": _gemm}


def build_case(name, cfg, seed=0, **params):
    """The :class:`KernelCase` ``name`` (one of :data:`KERNELS`) for ``cfg``."""
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, not {name!r}")
    return KERNELS[name](cfg, np.random.default_rng(seed), **params)
