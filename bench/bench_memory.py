# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=memory``: the memory system's figures (amaranth.sim, every result checked
bit for bit against golden).

* ``tensor_util_with_dma``: 8 back-to-back BF16 tiles (K = rows, M = cols, N = one PSUM bank,
  each with its own LoadStationary) on the tensor engine fed from SBUF (stationary operands in
  bank 0, moving ones in bank 1, random access patterns) while a synthetic DMA writes one full
  SBUF word per cycle into bank 3 through a partition port. Utilization = MACs / (rows x cols x
  cycles from the first operand beat accepted to the last PSUM write), the tensor bench's
  definition. Goal >= 0.97 on the default preset.
* the same scenario on the small preset with the DMA on a different bank and on the moving
  operand's bank (the arbiter's cost when they collide: the tensor ports yield one cycle after
  ``yield_after`` cycles of DMA waiting);
* the SBUF arbiter's measured longest waits under saturating same-bank traffic (small preset,
  5 ports) next to the documented bounds; the latencies of SBUF, PSUM row ports and the AP
  reader.
"""

from __future__ import annotations

import time

NAME = "memory"


def run(cfg, seed=1):
    from rtl.config import get_preset
    from rtl.mem.ap import APGenerator
    from rtl.mem.apport import APReader
    from rtl.mem.sbuf import SBUF, YIELD_AFTER
    from rtl.tensor.psum import PsumUnit
    from tb.amsim import SimBench
    from tb.mem.scenarios import tensor_with_dma
    from tb.mem.traffic import run_traffic

    t0 = time.monotonic()
    m = {}
    r = tensor_with_dma(cfg, seed, wr_bank=3)
    m["tensor_util_with_dma"] = r["utilization"]
    m["tensor_window_cycles_with_dma"] = r["window"]
    m["dma_words_written"] = r["dma_words"]
    m["dma_stall_cycles"] = r["dma_stalls"]
    m["dma_words_per_cycle"] = r["dma_words"] / r["cycles"]
    m["sim_build_seconds"] = r["build_seconds"]
    m["sim_cycles_per_second"] = r["cycles"] / r["wall_seconds"]

    small = get_preset("small")
    for name, bank in (("other_bank", 3), ("same_bank", 1)):
        s = tensor_with_dma(small, seed, wr_bank=bank)
        m[f"small_tensor_util_dma_{name}"] = s["utilization"]
        m[f"small_dma_stall_fraction_{name}"] = s["dma_stalls"] / max(1, s["cycles"])

    ports = dict(row_ports=("tensor_st", "tensor_mv", "vector"), part_ports=("dma0", "dma1"),
                 priority=("tensor_st", "tensor_mv"), yield_after=YIELD_AFTER)
    sb = SimBench(SBUF(small, **ports))
    st = run_traffic(sb, seed=seed, n_requests=200, p_valid=1.0, p_hot=1.0)
    sig = sb.dut.signature
    for n, w in st["waits"].items():
        m[f"sbuf_max_wait_{n}"] = max(w)
        m[f"sbuf_wait_bound_{n}"] = sig.wait_bound(n)
    m["sbuf_yield_after"] = YIELD_AFTER
    m["sbuf_read_latency"] = SBUF.Signature(cfg, row_ports=("a",)).latency
    m["psum_row_read_latency"] = PsumUnit.Signature(cfg, row_ports=("a",)).row_latency
    m["ap_reader_latency"] = APReader.Signature(cfg, "sbuf", prefetch=True).latency
    m["ap_generator_overhead"] = APGenerator.Signature(cfg).overhead
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


if __name__ == "__main__":
    import json
    import sys
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
    sys.exit(0)
