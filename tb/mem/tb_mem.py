# SPDX-License-Identifier: Apache-2.0
"""cocotb tests and bench of the real DMA engine on the real SBUF next to the SBUF-fed tensor
engine (``tb/mem/harness.py``).

* ``test_dma_sbuf_with_tensor``: rounds of back-to-back tensor tiles (operands in SBUF banks 0
  and 1 behind random access patterns) while the DMA runs a batch of random copies in every
  direction (SBUF sources in banks 0-1, the tensor's banks, so the DMA loses arbitration to it;
  SBUF destinations in bank 2) plus two whole-bank transfers (DRAM -> bank 3 of every partition,
  bank 0 of every partition -> DRAM), under random AXI pauses: every result beat against
  ``golden/tensor.py``, all of SBUF and the DRAM window byte for byte against ``golden/dma.py``,
  queue codes, completions and semaphore posts.
* ``bench``: utilization of 8 back-to-back BF16 tiles alone, with the synthetic full-rate
  writer on bank 3, and with the real DMA moving DRAM -> bank 3 at full rate (results and SBUF
  checked); metrics as JSON in ``params["out"]``.

Parameters: ``seed``, ``depths``, ``rounds``, ``per_round``, ``tiles``, ``out``."""

from __future__ import annotations

import json
import random

import cocotb
import numpy as np

from golden import dma as G
from tb.dma.driver import golden_batch
from tb.mem.driver import DmaFedTB, bank_fill, dram_layout, random_dma_batch
from tb.mem.program import fed_program
from tb.mem.scenarios import b2b_program
from tb.tensor.driver import compare


def _check_memories(tb, want, image_got, what):
    got_sbuf = image_got.tobytes()
    got_dram = tb.read_dram()
    for name, got, exp in (("SBUF", got_sbuf, bytes(want.sbuf)),
                           ("DRAM", got_dram, bytes(want.dram))):
        if got != exp:
            a = np.frombuffer(got, np.uint8)
            b = np.frombuffer(exp, np.uint8)
            bad = np.flatnonzero(a != b)
            raise AssertionError(tb.fail_text(what, f"{name}: {len(bad)} bytes differ from "
                                                    f"golden, first at {bad[:8].tolist()}: got "
                                                    f"{a[bad[:8]].tolist()} want "
                                                    f"{b[bad[:8]].tolist()}"))


async def run_checked(tb, prog, fp, batch, what, *, syn_bank=None, dram=None):
    """Load ``fp``'s image and a DRAM image, run ``fp`` with ``batch``, check everything
    against golden; returns the run's counters."""
    cfg = tb.cfg
    rng = random.Random(f"{tb.seed}:{what}")
    dram = dram if dram is not None else rng.randbytes(tb.dram_bytes)
    tb.load_sbuf(fp.image)
    tb.ram.write(tb.dram_base, dram)
    mem = G.Memory(cfg, dram_base=tb.dram_base, dram_bytes=tb.dram_bytes, dram=dram,
                   sbuf=fp.image.tobytes())
    codes, done, _sems = golden_batch(cfg, mem, batch)
    out = await tb.run(fp.cmds, batch, syn_bank=syn_bank)
    compare(out["beats"], prog, tb.seed, what)
    assert not out["err"] and not out["ap_err"], tb.fail_text(
        what, f"tensor feed error {out['err_code']} / {out['ap_err_code']:#x}")
    assert out["codes"] == codes, tb.fail_text(what, f"DMA queue codes {out['codes']}, "
                                                     f"golden {codes}")
    assert out["completed"] == done, tb.fail_text(what, f"completed {out['completed']}, "
                                                        f"golden {done}")
    posts = sum(1 for _q, d in batch if d.post)
    assert out["sem_posts"] == posts, tb.fail_text(what, f"{out['sem_posts']} semaphore posts,"
                                                         f" want {posts}")
    image = tb.read_sbuf_image()
    if syn_bank is not None:
        # the synthetic writer's bank holds its counter values: compare the rest
        BB = cfg.sbuf_bank_bytes
        sl = slice(syn_bank * BB, (syn_bank + 1) * BB)
        want = np.frombuffer(bytes(mem.sbuf), np.uint8).reshape(image.shape).copy()
        want[:, sl] = image[:, sl]
        mem.sbuf = bytearray(want.tobytes())
    _check_memories(tb, mem, image, what)
    return out


@cocotb.test()
async def test_dma_sbuf_with_tensor(dut):
    tb = DmaFedTB(dut)
    await tb.reset()
    cfg = tb.cfg
    rounds = int(tb.params.get("rounds", 3))
    per = int(tb.params.get("per_round", 8))
    tiles = int(tb.params.get("tiles", 3))
    _bytes, src_hi, big_lo, _slots = dram_layout(cfg)
    moved = 0
    for r in range(rounds):
        rng = random.Random(tb.seed * 1000 + r)
        nrng = np.random.default_rng([tb.seed, r])
        prog = b2b_program(cfg, nrng, tiles=tiles)
        fp = fed_program(cfg, prog, nrng, st_bank=0, mv_bank=1)
        batch = random_dma_batch(cfg, rng, per, dram_base=tb.dram_base)
        # whole banks: DRAM -> bank 3 of every partition, bank 0 (the stationary operands the
        # tensor engine is reading) -> DRAM
        src = tb.dram_base + rng.randrange(0, src_hi - cfg.partitions * cfg.sbuf_bank_bytes + 1,
                                           cfg.sbuf_word_bytes)
        batch.insert(rng.randrange(len(batch) + 1),
                     bank_fill(cfg, src=src, bank=3, queue=rng.randrange(cfg.dma_queues),
                               post=True, sem=1))
        # first, so that it runs while the tensor engine streams its operands
        batch.insert(0, bank_fill(cfg, src=tb.dram_base + big_lo, bank=0, dram_to_sbuf=False,
                                  queue=rng.randrange(cfg.dma_queues)))
        level = rng.choice((0.0, 0.2, 0.5))
        tb.set_backpressure(rng, level)
        what = f"round {r} (axi pause {level})"
        out = await run_checked(tb, prog, fp, batch, what)
        moved += out["dma_wr"] + out["dma_rd"]
        tb.log.info(f"{what}: {out['cycles']} cycles, tensor window "
                    f"{out['t_last_we'] - out['t_first'] + 1}, DMA SBUF writes {out['dma_wr']} "
                    f"reads {out['dma_rd']} refused {out['dma_stall']}")
    assert moved > rounds * cfg.partitions * cfg.sbuf_bank_bytes // cfg.sbuf_word_bytes, \
        tb.fail_text("totals", f"only {moved} SBUF words moved by the DMA")


@cocotb.test()
async def bench(dut):
    tb = DmaFedTB(dut)
    await tb.reset()
    cfg = tb.cfg
    tiles = int(tb.params.get("tiles", 8))
    R, C = cfg.pe_rows, cfg.pe_cols
    res = {}
    tb.set_backpressure(random.Random(0), 0.0)
    for name in ("alone", "synthetic", "dma"):
        nrng = np.random.default_rng([tb.seed, 7])
        prog = b2b_program(cfg, nrng, tiles=tiles)
        fp = fed_program(cfg, prog, nrng, st_bank=0, mv_bank=1)
        batch, syn = [], None
        if name == "synthetic":
            syn = 3
        elif name == "dma":
            # enough whole-bank DRAM -> bank 3 descriptors to outlast the tensor window
            per = cfg.partitions * cfg.sbuf_bank_bytes // cfg.sbuf_word_bytes
            n = -(-(len(prog.mv) + len(prog.st) + 200) // per) + 1
            batch = [bank_fill(cfg, src=tb.dram_base, bank=3, queue=k % cfg.dma_queues)
                     for k in range(n)]
        out = await run_checked(tb, prog, fp, batch, f"bench {name}", syn_bank=syn)
        window = out["t_last_we"] - out["t_first"] + 1
        r = {"utilization": prog.macs / (R * C * window), "window_cycles": window,
             "cycles": out["cycles"], "run_seconds": out["run_seconds"],
             "sim_cycles_per_second": out["cycles"] / max(out["run_seconds"], 1e-9)}
        if name == "synthetic":
            r["writer_words"] = out["syn_wr"]
            r["writer_stall_cycles"] = out["syn_stall"]
            r["writer_words_per_cycle"] = out["syn_wr"] / out["cycles"]
        if name == "dma":
            inwin = out["dma_wr_last"] - out["dma_wr_first"]
            r["dma_words_in_window"] = inwin
            r["dma_words_per_cycle_in_window"] = inwin / window
            r["dma_words"] = out["dma_wr"]
            r["dma_stall_cycles"] = out["dma_stall"]
        res[name] = r
        tb.log.info(f"{name}: {r}")
    with open(tb.params["out"], "w") as fh:
        json.dump(res, fh, indent=2)
