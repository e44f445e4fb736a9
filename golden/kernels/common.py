# SPDX-License-Identifier: Apache-2.0
"""What the library kernels share: :class:`KernelCase` (a program with its expected output and
bound), the bit-exact GEMM reference, code conversions, random inputs and the tile ring."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from golden import tensor as gt
from golden.formats import convert_rne_bits, decode_bits
from golden.kernel import KernelProgram
from rtl.config import CoreConfig

__all__ = ["ONE", "KernelCase", "decode_f64", "encode_codes", "f32_bits", "tiled_chain",
           "gemm_reference", "tile_ring", "random_bf16", "random_fp32"]

ONE = 0x3F800000


@dataclass
class KernelCase:
    """A kernel ready to run: ``kp`` (the program), ``expected`` (output name -> element
    codes, the bit-exact golden composition), ``reference`` (output name -> float64 values),
    ``tolerance`` (output name -> float64 bound of ``|output - reference|``, elementwise),
    ``dtypes`` (output name -> format), ``flops`` (useful multiply-adds x 2)."""
    name: str
    cfg: CoreConfig
    kp: KernelProgram
    expected: dict
    reference: dict
    tolerance: dict
    dtypes: dict
    flops: int = 0
    info: dict = field(default_factory=dict)

    def check(self, outputs):
        """``{name: (bit mismatches, worst |out - ref| / tolerance)}`` for the outputs of a run
        (``KernelProgram.read_outputs(sim, codes=True)``)."""
        out = {}
        for name, want in self.expected.items():
            got = np.asarray(outputs[name], np.uint32)
            bad = int(np.count_nonzero(got != want))
            v = decode_f64(self.cfg, got, self.dtypes[name])
            with np.errstate(invalid="ignore", divide="ignore"):
                r = np.abs(v - self.reference[name]) / self.tolerance[name]
            out[name] = (bad, float(np.nanmax(np.where(np.isnan(v), np.inf, r))))
        return out


def decode_f64(cfg, codes, dtype):
    """float64 values of element codes of ``dtype``."""
    bits = np.asarray(codes, np.uint32)
    if dtype != "fp32":
        bits = decode_bits(bits, cfg.fmt(dtype)).astype(np.uint32)
    return bits.view(np.float32).astype(np.float64)


def encode_codes(cfg, bits, dtype):
    bits = np.asarray(bits, np.uint32)
    return bits if dtype == "fp32" else np.asarray(convert_rne_bits(bits, cfg.fmt(dtype)),
                                                   np.uint32)


def f32_bits(x):
    """FP32 bits of an exactly representable float."""
    return int(np.float32(x).view(np.uint32))


def tiled_chain(cfg, S, fs, X, fx):
    """``S.T @ X`` as the tiled GEMM runs it: per K tile of ``pe_rows`` the golden matmul,
    the tiles added into PSUM (``psum_update`` accumulate), in K order."""
    acc = None
    for k0 in range(0, S.shape[0], cfg.pe_rows):
        r = gt.matmul(S[k0:k0 + cfg.pe_rows], fs, X[k0:k0 + cfg.pe_rows], fx, cfg)
        acc = r if acc is None else gt.psum_update(acc, r, True)
    return acc


def gemm_reference(cfg, AT, B, dtype="bf16"):
    """``C = AT.T @ B`` as :func:`golden.kernels.gemm_kernel` computes it: per output tile
    (``pe_cols`` x ``psum_bank_fp32``) the K-tiled chain of :func:`tiled_chain`."""
    K, M = AT.shape
    N = B.shape[1]
    C = np.zeros((M, N), dtype=np.uint32)
    for m0 in range(0, M, cfg.pe_cols):
        for n0 in range(0, N, cfg.psum_bank_fp32):
            C[m0:m0 + cfg.pe_cols, n0:n0 + cfg.psum_bank_fp32] = tiled_chain(
                cfg, AT[:, m0:m0 + cfg.pe_cols], dtype, B[:, n0:n0 + cfg.psum_bank_fp32], dtype)
    return C


def tile_ring(k, keep=2):
    """Free SBUF tiles two uses later (double buffering through the first-fit allocator)."""
    pending = []

    def done(*tiles):
        pending.append(tiles)
        while len(pending) > keep:
            for t in pending.pop(0):
                k.free(t)
    return done


def random_bf16(rng, shape, scale=1.0):
    import ml_dtypes
    x = (rng.standard_normal(shape) * scale).astype(np.float32).astype(ml_dtypes.bfloat16)
    return x.view(np.uint16).astype(np.uint32)


def random_fp32(rng, shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32).view(np.uint32)


