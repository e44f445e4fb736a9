# SPDX-License-Identifier: Apache-2.0
"""The ``make sim`` kernels (issue 14, ``docs/kernels.md`` §8): each is a function
``(cfg, inputs...) -> KernelCase`` that builds the :class:`golden.kernel.KernelProgram` (per
engine programs, DRAM image, output locations) with the kernel API **and** computes the expected
output independently: the same arithmetic composed from ``golden.tensor``, ``golden.vector``,
``golden.activation`` (and ``golden.sparse``) calls directly, without the ISA simulator, plus a
float64 reference with an error bound.

Every kernel uses only opcodes the RTL decoders accept today (dense ``load_stationary`` /
``multiply_moving`` / ``transpose``, the vector opcodes 0x20-0x28, ``activation`` and
``act_table_load``, ``dma_start``). Inputs are element codes (``uint32`` arrays of the named
format); tensors the tensor engine contracts over K are given transposed (``*T``), as the
engine computes ``stationary.T @ moving`` (docs/kernels.md §5)."""

from __future__ import annotations

import math

import numpy as np

from golden.kernels.attention import attention_head, layer_norm
from golden.kernels.common import (ONE, KernelCase, decode_f64, encode_codes, f32_bits,
                                   gemm_reference, random_bf16, random_fp32, tiled_chain,
                                   tile_ring)
from golden.kernels.dp_step import MultiKernelCase, dp_step, dp_step_case, run_golden_multi
from golden.kernels.gemm import gemm_kernel, split_queues, tail_spans
from golden.kernels.mlp import mlp, sparse_mlp
from golden.kernels.suite import SUITE

__all__ = ["KernelCase", "gemm_reference", "gemm_kernel", "split_queues", "mlp",
           "attention_head", "layer_norm", "sparse_mlp", "KERNELS", "decode_f64",
           "random_inputs", "run_golden", "ONE", "encode_codes", "f32_bits", "tiled_chain",
           "tile_ring", "random_bf16", "random_fp32", "tail_spans", "MULTI_KERNELS",
           "MultiKernelCase", "dp_step", "dp_step_case", "run_golden_multi", "SUITE"]


def random_inputs(cfg, name, seed=0, **sizes):
    """Inputs of kernel ``name`` (a key of :data:`KERNELS`) for ``cfg``: random normal values;
    sizes default to what fits the small preset (or ``sizes``)."""
    rng = np.random.default_rng(seed)
    P, R, C, N = cfg.partitions, cfg.pe_rows, cfg.pe_cols, cfg.psum_bank_fp32
    if name == "mlp":
        D, F, T = sizes.get("D", 2 * R), sizes.get("F", 2 * C), sizes.get("T", N + N // 2)
        return (random_bf16(rng, (D, T)), random_bf16(rng, (D, F), 1 / math.sqrt(D)),
                random_fp32(rng, (F,), 0.1))
    if name == "sparse_mlp":
        D, F, T = sizes.get("D", 32), sizes.get("F", 2 * C), sizes.get("T", N)
        return (random_bf16(rng, (D, T)), random_bf16(rng, (D, F), 1 / math.sqrt(D)),
                random_fp32(rng, (F,), 0.1))
    if name == "attention_head":
        d, Lq = sizes.get("d", R), sizes.get("Lq", min(R, C))
        Lk, dv = sizes.get("Lk", min(R, C)), sizes.get("dv", C)
        return (random_bf16(rng, (d, Lq)), random_bf16(rng, (d, Lk)), random_bf16(rng, (Lk, dv)))
    if name == "layer_norm":
        T, D = sizes.get("T", P), sizes.get("D", 48)
        return (random_fp32(rng, (T, D), 2.0, 0.5), random_fp32(rng, (D,), 0.5, 1.0), random_fp32(rng, (D,), 0.3))
    if name in SUITE:
        return SUITE[name][1](cfg, rng, **sizes)
    raise ValueError(f"kernel name must be one of {sorted(KERNELS)}, not {name!r}")


#: The ``make sim`` kernels and the cycle-model suite (:mod:`golden.kernels.suite`) by name.
KERNELS = {"mlp": mlp, "attention_head": attention_head, "layer_norm": layer_norm,
           "sparse_mlp": sparse_mlp, **{n: f for n, (f, _inputs) in SUITE.items()}}


#: The multi-core kernels by name: each ``builder(cfg, seed=0, ranks=4, **sizes) ->``
#: :class:`MultiKernelCase` (one program per rank, every rank's expected codes composed
#: without a simulator; :func:`run_golden_multi` runs it on the multi-core golden simulator).
MULTI_KERNELS = {"dp_step": dp_step_case}


def run_golden(case, *, policy="timed"):
    """Run ``case`` on the golden ISA simulator: ``{"error", "cycles", "busy", "pe_utilization",
    "check", "instructions", "sim"}`` (``check``: :meth:`KernelCase.check`, ``None`` after an
    error). ``tb/core/timeline.py`` draws the engine-activity timeline of ``sim``."""
    from golden.isasim import IsaSim
    sim = IsaSim(case.cfg, dram_bytes=case.kp.dram)
    err = case.kp.locate(sim.run(case.kp.programs, policy=policy))
    st = sim.stats()
    return {"error": err, "cycles": st["cycles"], "busy": st["busy"],
            "pe_utilization": st["pe_utilization"],
            "check": None if err else case.check(case.kp.read_outputs(sim, codes=True)),
            "instructions": case.kp.instructions(), "sim": sim}

