# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=memory``: the memory system's figures, every result checked bit for bit
against golden.

* ``tensor_util_with_dma`` (Verilator, ``tb/mem/harness.py``, the preset of the run): 8
  back-to-back BF16 tiles (K = rows, M = cols, N = one PSUM bank, each with its own
  LoadStationary) on the tensor engine fed from SBUF (stationary operands in bank 0, moving
  ones in bank 1, random access patterns) while the real DMA engine moves DRAM (cocotbext-axi
  ``AxiRam``, no pauses) into bank 3 of every partition at full rate. Utilization = MACs / (rows
  x cols x cycles from the first operand beat accepted to the last PSUM write), the tensor
  bench's definition. Goal >= 0.97 on the default preset. Next to it: the same tiles alone
  (``tensor_util_alone``) and with a synthetic writer that writes one SBUF word every cycle
  (``tensor_util_with_synthetic_writer``); the DMA's SBUF words per cycle inside the window.
* ``small_amsim_*`` (amaranth.sim, small preset): the synthetic writer on a different bank and
  on the moving operand's bank (the arbiter's cost when they collide: the tensor ports yield
  one cycle after ``yield_after`` cycles of DMA waiting);
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
    from tb.mem.build import run_bench
    from tb.mem.scenarios import tensor_with_dma
    from tb.mem.traffic import run_traffic

    t0 = time.monotonic()
    m = {}
    v = run_bench(cfg, seed)
    m["tensor_util_with_dma"] = v["dma"]["utilization"]
    m["tensor_window_cycles_with_dma"] = v["dma"]["window_cycles"]
    m["dma_words_per_cycle_in_window"] = v["dma"]["dma_words_per_cycle_in_window"]
    m["dma_sbuf_stall_cycles"] = v["dma"]["dma_stall_cycles"]
    m["tensor_util_alone"] = v["alone"]["utilization"]
    m["tensor_window_cycles_alone"] = v["alone"]["window_cycles"]
    m["tensor_util_with_synthetic_writer"] = v["synthetic"]["utilization"]
    m["synthetic_writer_words_per_cycle"] = v["synthetic"]["writer_words_per_cycle"]
    m["synthetic_writer_stall_cycles"] = v["synthetic"]["writer_stall_cycles"]
    m["verilator_build_seconds"] = v["verilator_build_seconds"]
    m["sim_cycles_per_second"] = v["synthetic"]["sim_cycles_per_second"]

    small = get_preset("small")
    for name, bank in (("other_bank", 3), ("same_bank", 1)):
        s = tensor_with_dma(small, seed, wr_bank=bank)
        m[f"small_amsim_tensor_util_synthetic_{name}"] = s["utilization"]
        m[f"small_amsim_writer_stall_fraction_{name}"] = s["dma_stalls"] / max(1, s["cycles"])

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
