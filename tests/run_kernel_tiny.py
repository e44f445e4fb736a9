# SPDX-License-Identifier: Apache-2.0
"""Tiny kernels for tests/test_run_kernel.py (``run_kernel("tests/run_kernel_tiny.py:...")``):
numpy inputs, outputs marked with ``k.output``, nothing else."""

import numpy as np

from golden.kernel import Kernel


def gemm_relu(cfg):
    """``Y = relu(A @ B) * 0.5`` in FP32 for one PE-array tile: DMA in, tensor engine, vector
    engine out of PSUM, DMA out."""
    rng = np.random.default_rng(1)
    K, M, N = cfg.pe_rows, cfg.pe_cols, 8
    k = Kernel(cfg)
    at = k.dram_tensor("AT", dtype="bf16", data=rng.normal(size=(K, M)).astype(np.float32))
    b = k.dram_tensor("B", dtype="bf16", data=rng.normal(size=(K, N)).astype(np.float32))
    y = k.dram_tensor("Y", (M, N), "fp32")
    ta, tb = k.sbuf_tile(K, M, "bf16"), k.sbuf_tile(K, N, "bf16")
    k.load(ta, at)
    k.load(tb, b)
    ps = k.psum_tile(M, N)
    k.matmul(ps, ta, tb)
    ty = k.sbuf_tile(M, N, "fp32")
    k.tensor_scalar(ty, ps, "max", 0.0, "multiply", 0.5)
    k.store(y, ty)
    k.output("Y", y)
    return k


def not_a_kernel(cfg):
    """Returns something else than a Kernel (the bad-spec test)."""
    return 42


def copy_wrong_shape(cfg):
    """A vector copy whose source has half the destination's elements, emitted as a raw
    instruction (``k.instr``: no build-time check), so it fails when it runs: ``E_SHAPE`` on
    the vector engine, instruction 0 of its queue, operation ``instr #1``."""
    from rtl.isa import Instr
    k = Kernel(cfg)
    y = k.dram_tensor("Y", (cfg.partitions, 8), "fp32")
    a, b = k.sbuf_tile(cfg.partitions, 8, "fp32"), k.sbuf_tile(cfg.partitions, 4, "fp32")
    k.instr(Instr(op="tensor_copy", aps={"ap0": a.ap(), "ap1": b.ap()}), reads=[b], writes=[a])
    k.store(y, a)
    k.output("Y", y)
    return k
