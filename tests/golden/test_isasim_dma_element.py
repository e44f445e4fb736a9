# SPDX-License-Identifier: Apache-2.0
"""The golden ISA simulator's DMA follows ``cfg.dma_element_ops`` as the RTL core does
(``rtl/core/neuroncore.py`` builds every DMA engine from the config): with the element path a
cast (FP32 -> BF16, RNE) and an add descriptor (BF16 + BF16 into the BF16 destination) run;
without it both are refused with ``E_DESC`` and change nothing. The expected values come from
``ml_dtypes`` (round to nearest even), not from ``golden.dma``."""

import ml_dtypes
import numpy as np
import pytest

from golden import dma as gdma
from golden.asm import assemble
from golden.isasim import E_DESC, IsaSim
from rtl.config import SMALL

DRAM_BYTES = 1 << 12
DATA = 0x400                     # FP32 source, 4 x 8 elements
ADDEND = 0x600                   # BF16 addends, 4 x 8 elements
N = 8


def _inputs(seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((4, N)) * 3).astype(np.float32)
    b = (rng.standard_normal((4, N)) * 3).astype(np.float32).astype(ml_dtypes.bfloat16)
    return a, b


def _program(cfg, a, b):
    """DRAM image: descriptor 0 casts ``a`` (FP32, DRAM) to BF16 in SBUF partitions 0..3 at
    byte 0; descriptor 1 adds ``b`` (BF16, DRAM) into them."""
    sbp = cfg.sbuf_bytes_per_partition
    bf16 = gdma.DTYPE_CODES["bf16"]
    cast = gdma.Descriptor(src=DATA, dst=0, src_space=gdma.DRAM, dst_space=gdma.SBUF,
                           dims=((N, 4, 2), (4, 4 * N, sbp)),
                           src_dtype=gdma.DTYPE_CODES["fp32"], dst_dtype=bf16)
    add = gdma.Descriptor(src=ADDEND, dst=0, src_space=gdma.DRAM, dst_space=gdma.SBUF,
                          dims=((N, 2, 2), (4, 2 * N, sbp)), op=gdma.OP_ADD,
                          src_dtype=bf16, dst_dtype=bf16)
    dram = bytearray(DRAM_BYTES)
    dram[0:64], dram[64:128] = cast.pack(), add.pack()
    dram[DATA:DATA + a.nbytes] = a.tobytes()
    dram[ADDEND:ADDEND + b.nbytes] = b.tobytes()
    return dram


def _run(cfg, dram, count):
    sim = IsaSim(cfg, dram_bytes=dram)
    err = sim.run({"sp": assemble(f"dma_start count={count} desc_addr=0")})
    got = sim.sbuf[:4, :2 * N].copy().view(ml_dtypes.bfloat16)
    return sim, err, got


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cast_and_add_descriptors_run_with_the_element_path(seed):
    cfg = SMALL.replace(dma_element_ops=True)
    a, b = _inputs(seed)
    dram = _program(cfg, a, b)
    sim, err, got = _run(cfg, dram, 1)
    assert err is None, f"seed={seed}: {err}"
    want = a.astype(ml_dtypes.bfloat16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), f"seed={seed}"
    sim, err, got = _run(cfg, dram, 2)
    assert err is None, f"seed={seed}: {err}"
    want = (want.astype(np.float32) + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), f"seed={seed}"


@pytest.mark.parametrize("which", [0, 1])
def test_element_descriptors_are_refused_without_the_element_path(which):
    cfg = SMALL.replace(dma_element_ops=False)
    a, b = _inputs(0)
    dram = _program(cfg, a, b)
    if which:                       # the add descriptor alone
        dram[0:64] = dram[64:128]
    sim = IsaSim(cfg, dram_bytes=dram)
    sbuf = bytes(sim.mem.sbuf)
    err = sim.run({"sp": assemble("dma_start count=1 desc_addr=0")})
    assert err is not None and (err.code, err.source, err.index) == (E_DESC, "dma0.q0", 0), err
    assert bytes(sim.mem.sbuf) == sbuf


def test_the_copy_path_runs_either_way():
    """A plain BF16 copy is the same with and without the element path."""
    a, b = _inputs(3)
    out = []
    for eo in (False, True):
        cfg = SMALL.replace(dma_element_ops=eo)
        dram = _program(cfg, a, b)
        dram[0:64] = gdma.Descriptor(src=ADDEND, dst=0, src_space=gdma.DRAM,
                                     dst_space=gdma.SBUF,
                                     dims=((N, 2, 2), (4, 2 * N, cfg.sbuf_bytes_per_partition)),
                                     src_dtype=gdma.DTYPE_CODES["bf16"],
                                     dst_dtype=gdma.DTYPE_CODES["bf16"]).pack()
        sim, err, got = _run(cfg, dram, 1)
        assert err is None, err
        out.append(got.view(np.uint16))
    assert np.array_equal(out[0], out[1]) and np.array_equal(out[0], b.view(np.uint16))
