# SPDX-License-Identifier: Apache-2.0
"""Kernels the whole core runs (``make sim``, the core benchmark, ``tests/test_core.py``): the
:mod:`golden.kernels` cases (MLP, attention head, layer norm, sparse MLP: each a
:class:`golden.kernels.KernelCase` with its program, the expected output composed from the
golden modules directly, and a float64 bound) plus a tiled GEMM from DRAM. The core runs the
same binary programs; its outputs must equal ``expected`` bit for bit."""

from __future__ import annotations

import numpy as np

from golden import kernels as gk
from golden.kernels import gemm_kernel

__all__ = ["KERNELS", "CYCLE_KERNELS", "build_case", "gemm_case", "dram_traffic", "kernel_label",
           "cycle_errors"]


def gemm_case(cfg, seed=0, K=None, M=None, N=None, dram_bytes=1 << 20):
    """Tiled GEMM from DRAM: bf16 A^T [K, M] and B [K, N] loaded by DMA (double-buffered),
    FP32 accumulation in PSUM over the K tiles, evacuated by the vector engine and stored to
    DRAM as C [M, N] fp32. Float64 bound: one FP32 rounding per product-sum step of a K tile
    and per K-tile accumulate, ``(K + K / pe_rows + 1) * 2**-24 * (|A|^T |B|)``."""
    rng = np.random.default_rng(seed)
    K = K or 4 * cfg.pe_rows
    M = M or 2 * cfg.pe_cols
    N = N or 2 * cfg.psum_bank_fp32
    AT = gk.random_bf16(rng, (K, M))
    B = gk.random_bf16(rng, (K, N))
    kp = gemm_kernel(cfg, AT, B, evacuate=True, dram_bytes=dram_bytes)
    a, b = gk.decode_f64(cfg, AT, "bf16"), gk.decode_f64(cfg, B, "bf16")
    steps = K + -(-K // cfg.pe_rows) + 1
    tol = steps * 2.0 ** -24 * (np.abs(a).T @ np.abs(b)) + 2.0 ** -149
    return gk.KernelCase("gemm", cfg, kp, {"C": gk.gemm_reference(cfg, AT, B)}, {"C": a.T @ b},
                         {"C": tol}, {"C": "fp32"}, flops=2 * K * M * N)


def _golden(name):
    def build(cfg, seed=0, dram_bytes=1 << 20, **sizes):
        return gk.KERNELS[name](cfg, *gk.random_inputs(cfg, name, seed, **sizes),
                                dram_bytes=dram_bytes)
    return build


#: name -> builder(cfg, seed, **params) -> golden.kernels.KernelCase (the make-sim kernels and
#: the cycle-model suite, golden/kernels/suite.py)
KERNELS = {"gemm": gemm_case, **{n: _golden(n) for n in gk.KERNELS}}

#: The kernels the golden cycle model is measured on (bench ``golden_cycle_error``,
#: ``tests/test_core.py``): every engine, odd free sizes; ``[{"name", **params}]``.
CYCLE_KERNELS = [{"name": n} for n in ("mlp", "attention_head", "layer_norm", "sparse_mlp",
                                        "gemm", "softmax_rows", "row_reduce", "rms_norm",
                                        "act_chain", "pe_transpose", "dma_copy", "gemm_fp8")] + [
    {"name": "softmax_rows", "F": 33}, {"name": "layer_norm", "D": 33}]


def build_case(name, cfg, seed=0, **params):
    """The :class:`golden.kernels.KernelCase` ``name`` (one of :data:`KERNELS`) for ``cfg``."""
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, not {name!r}")
    return KERNELS[name](cfg, seed, **params)


def kernel_label(spec):
    """``name`` or ``name_F33``: a cycle-model kernel with its non-default parameters."""
    return "_".join([spec["name"], *(f"{k}{v}" for k, v in spec.items()
                                      if k not in ("name", "seed"))])


def cycle_errors(cfg, specs, recs):
    """``[(label, RTL cycles, golden estimate, signed error)]`` of the kernels ``specs`` whose
    RTL records (``tb/core/tb_core_kernels.py``) are ``recs``, on ``cfg`` (the config the RTL
    ran, narrowed by ``integration_cfg``). The estimate is the golden ISA simulator's cycles of
    the same program; the error is ``(estimate - RTL) / RTL``."""
    from golden.kernels import run_golden
    if len(specs) != len(recs):
        raise ValueError(f"cycle_errors needs one RTL record per kernel, not {len(recs)} for "
                         f"{len(specs)}")
    rows = []
    for spec, r in zip(specs, recs):
        if r.get("kernel") != spec["name"]:
            raise ValueError(f"cycle_errors: record of {r.get('kernel')!r} for kernel "
                             f"{spec['name']!r}")
        p = {k: v for k, v in spec.items() if k != "name"}
        est = run_golden(build_case(spec["name"], cfg, **p))["cycles"]
        rows.append((kernel_label(spec), r["cycles"], est, (est - r["cycles"]) / r["cycles"]))
    return rows


def dram_traffic(kp):
    """Bytes the kernel's DMA descriptors move to or from DRAM (each descriptor counted once,
    as often as ``dma_start`` names it)."""
    from golden import dma as gdma
    from rtl import isa
    total = 0
    raw = kp.programs.get("sp", b"")
    for i in range(0, len(raw), isa.INSTR_BYTES):
        ins = isa.decode(raw[i:i + isa.INSTR_BYTES])
        if ins.op != "dma_start":
            continue
        for j in range(ins.imm["count"]):
            a = ins.imm["desc_addr"] + 64 * j - kp.dram_base
            d = gdma.Descriptor.unpack(bytes(kp.dram[a:a + 64]))
            es = [gdma.ELEM_BYTES[gdma.DTYPES[c]] for c in (d.src_dtype, d.dst_dtype)]
            total += d.count * (es[0] * (d.src_space == gdma.DRAM)
                                + es[1] * (d.dst_space == gdma.DRAM))
    return total
