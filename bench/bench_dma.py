# SPDX-License-Identifier: Apache-2.0
"""``make bench BENCH=dma``: DMA bandwidth (fraction of ``axi_data_bits`` x clock) DRAM->SBUF
and SBUF->DRAM with zero and 64 cycles of memory latency, and the descriptor overhead (Verilator,
cocotbext-axi ``AxiRam`` as DRAM; ``tb/dma/tb_dma_bench.py`` says exactly what is measured)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from tb.dma.build import dma_sim

NAME = "dma"


def run(cfg, seed=1):
    t0 = time.monotonic()
    sim = dma_sim(cfg)
    total = cfg.partitions * cfg.sbuf_bytes_per_partition
    n = min(64 * 1024, total // 2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "metrics.jsonl"
        sim.run("tb.dma.tb_dma_bench", params={"seed": seed, "metrics": str(path), "bytes": n,
                                           "dram_bytes": max(2 * n, 8192)}, tag="bench")
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    m = {r["metric"]: r["value"] for r in rows}
    m["transfer_bytes"] = n
    m["verilator_build_seconds"] = sim.build_seconds
    m["bench_wall_seconds"] = time.monotonic() - t0
    return m


if __name__ == "__main__":
    from rtl.config import preset_from_env
    print(json.dumps(run(preset_from_env()), indent=2))
