# SPDX-License-Identifier: Apache-2.0
"""DMA bandwidth and descriptor overhead (``bench/bench_dma.py``), every transfer also checked
against ``golden.dma`` byte for byte.

Bandwidth fraction = data beats / cycles, cycles from ``start`` to ``done`` of the harness
(descriptor check, all bursts, the last write response); one beat = ``axi_data_bits`` per
cycle is 1.0. No suffix: one descriptor of ``bytes``; ``_4k_one``: one 4 KiB descriptor;
``_4k`` / ``_1k``: ``bytes`` moved as 4 KiB / 1 KiB descriptors back to back on one queue. ``steady`` variants count from the first to the last destination write only.
Latency ``L``: the harness holds every read burst's address ``L`` cycles before cocotbext-axi's
``AxiRam`` sees it (read), or every write response ``L`` cycles (write), on top of the RAM's
own pipeline."""

from __future__ import annotations

import random

import cocotb

from golden import dma as G
from tb.dma.build import DESC_DEPTH
from tb.dma.driver import DMATB, golden_batch


async def _measure(tb, batch, mem, *, rd_delay=0, b_delay=0):
    dut = tb.dut
    dut.rd_delay.value = rd_delay
    dut.b_delay.value = b_delay
    tb.load(mem)
    want = mem.copy()
    golden_batch(tb.cfg, want, batch, rand=tb.sr)
    out = await tb.run_batch(batch, timeout=200000)
    assert tb.read_dram() == bytes(want.dram) and tb.read_sbuf() == bytes(want.sbuf), \
        tb.fail_text("bench", "data differs from golden")
    assert out["codes"] == [(0, 0)] * tb.cfg.dma_queues
    return out


@cocotb.test()
async def bench_dma(dut):
    tb = DMATB(dut, dram_base=0x100000, dram_bytes=int(tb_param(dut, "dram_bytes")))
    await tb.reset()
    cfg = tb.cfg
    W = cfg.sbuf_word_bytes
    rng = random.Random(tb.seed)
    total = int(tb.params["bytes"])
    # (suffix, descriptor bytes, descriptors): one large descriptor, one 4 KiB descriptor
    # alone, and streams of 4 KiB / 1 KiB descriptors back to back on one queue moving
    # ``total`` bytes (at most DESC_DEPTH descriptors)
    sizes = (("", total, 1), ("_4k_one", 4096, 1),
             ("_4k", 4096, max(1, min(DESC_DEPTH, total // 4096))),
             ("_1k", 1024, max(1, min(DESC_DEPTH, total // 1024))))
    for suffix, n, k in sizes:
        for name, ss, ds in (("read", G.DRAM, G.SBUF), ("write", G.SBUF, G.DRAM)):
            batch = [(0, G.Descriptor(src=(tb.dram_base if ss == G.DRAM else 0) + j * n,
                                      dst=(tb.dram_base if ds == G.DRAM else 0) + j * n,
                                      src_space=ss, dst_space=ds, dims=((n // 4, 4, 4),)))
                     for j in range(k)]
            for lat_name, lat in (("zero_latency", 0), ("latency64", 64)):
                mem = tb.random_memory(rng)
                out = await _measure(tb, batch, mem,
                                     rd_delay=lat if name == "read" else 0,
                                     b_delay=lat if name == "write" else 0)
                beats = k * n // W
                key = f"bw_fraction_{lat_name}" + ("" if name == "read" else "_write") + suffix
                tb.record(metric=key, value=beats / out["cycles"])
                tb.record(metric=key + "_steady",
                          value=beats / (out["t_last"] - out["t_first"] + 1))
                tb.record(metric="cycles_" + key, value=out["cycles"])
    # descriptor overhead: K descriptors of n words against one of K * n words
    K, n = 16, 4
    one = G.Descriptor(src=tb.dram_base, dst=0, dims=((K * n * W // 4, 4, 4),))
    many = [(0, G.Descriptor(src=tb.dram_base + j * n * W, dst=j * n * W,
                             dims=((n * W // 4, 4, 4),))) for j in range(K)]
    t1 = (await _measure(tb, [(0, one)], tb.random_memory(rng)))["cycles"]
    tk = (await _measure(tb, many, tb.random_memory(rng)))["cycles"]
    tb.record(metric="descriptor_overhead_cycles", value=(tk - t1) / (K - 1))
    tb.record(metric="cycles_one_descriptor", value=t1)
    tb.record(metric="cycles_16_descriptors", value=tk)
    if cfg.dma_element_ops:
        await _element_rates(tb, rng)


#: Element-path cases: (metric suffix, src space, dst space, op, src dtype, dst dtype).
ELEMENT_CASES = (("", G.SBUF, G.SBUF, G.OP_COPY, 0, 2),            # fp32 -> bf16 cast
                 ("_add_sbuf", G.SBUF, G.SBUF, G.OP_ADD, 2, 2),     # bf16 += bf16
                 ("_cast_dram_to_sbuf", G.DRAM, G.SBUF, G.OP_COPY, 0, 2),
                 ("_add_sbuf_to_dram", G.SBUF, G.DRAM, G.OP_ADD, 2, 0),
                 ("_add_dram_to_dram", G.DRAM, G.DRAM, G.OP_ADD, 2, 2))


async def _element_rates(tb, rng, n=256):
    """``element_elems_per_cycle*``: elements / cycles (start to done) of one element
    descriptor of ``n`` contiguous elements, RNE, no memory latency (docs/dma.md §4.2)."""
    half = tb.cfg.partitions * tb.cfg.sbuf_bytes_per_partition // 2
    for suffix, ss, ds, op, sdt, ddt in ELEMENT_CASES:
        es, ed = (G.ELEM_BYTES[G.DTYPES[c]] for c in (sdt, ddt))
        d = G.Descriptor(src=tb.dram_base if ss == G.DRAM else 0,
                         dst=(tb.dram_base + tb.dram_bytes // 2) if ds == G.DRAM else half,
                         src_space=ss, dst_space=ds, dims=((n, es, ed),), op=op,
                         src_dtype=sdt, dst_dtype=ddt)
        out = await _measure(tb, [(0, d)], tb.random_memory(rng))
        tb.record(metric="element_elems_per_cycle" + suffix, value=n / out["cycles"])


def tb_param(dut, name):
    from tb import env
    return env.params()[name]
