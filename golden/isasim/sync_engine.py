# SPDX-License-Identifier: Apache-2.0
"""Sync engine hook of the golden ISA simulator (``dma_start``: the descriptors it queues)
and the DMA data timing on the shared AXI channels."""

from __future__ import annotations

from golden import dma as gdma
from golden.isasim.errors import E_AXI, E_DESC, Fault
from golden.isasim.hooks import register_op

__all__ = ["dma_data", "desc_bursts"]


def dma_data(sim, t0, desc, *, write_free=0, times=None):
    """Cycle the data of ``desc`` is all moved when its first address beat can go at ``t0``.
    ``write_free``: the cycle the engine's destination side is free (the previous
    descriptor's last write); ``times`` (a dict), if given, receives ``reads_issued`` (the
    cycle of the last source request) and ``writes_end`` (the last destination beat)."""
    lat = sim.timing.dram_latency
    out = sim.cfg.dma_outstanding
    rd = desc_bursts(sim.cfg, desc, 0) if desc.src_space == gdma.DRAM else None
    wr = desc_bursts(sim.cfg, desc, 1) if desc.dst_space == gdma.DRAM else None
    ready = []                                  # per row: the cycle its data is in the FIFO
    if rd is not None:
        t = t0
        for k, n in enumerate(rd):
            if k >= out:                        # dma_outstanding bursts in flight
                t = max(t, ready[k - out])
            st = sim.axi["r"].book(t + lat, n)
            ready.append(st + n)
            t += 1
        issued = t - 1
    else:                                       # SBUF side: one word per cycle
        side = desc_bursts(sim.cfg, desc, 0)
        t = t0 + 2
        for n in side:
            t += n
            ready.append(t)
        issued = t - 2
    if times is not None:
        times["reads_issued"] = issued
        times["reads_done"] = ready[-1] if ready else t0
    if wr is None:
        # SBUF destination: written as the words arrive (one per cycle)
        end = max(ready[-1] if ready else t0, t0 + sum(desc_bursts(sim.cfg, desc, 1)),
                  write_free + sum(desc_bursts(sim.cfg, desc, 1))) + 1
        if times is not None:
            times["writes_end"] = end
        return end
    # a row's write burst is booked once the row's data is in (in the core the DMA's SBUF
    # reads lose arbitration to the engines: the make-sim kernels' estimates are closer so
    # than with the W beats right behind the reads, the isolated bench's long SBUF -> DRAM
    # rows are then estimated slow)
    end = max(t0, write_free)
    for k, n in enumerate(wr):
        r = ready[min(k, len(ready) - 1)] if ready else t0
        st = sim.axi["w"].book(max(r, end), n)
        end = st + n
    if times is not None:
        times["writes_end"] = end
    return end + lat


def desc_bursts(cfg, d, side):
    """AXI beats (words) of each contiguous run of side ``side`` (0 source, 1 destination)."""
    W = cfg.sbuf_word_bytes
    rows = d.count // d.slots[0][0]
    es = gdma.ELEM_BYTES[gdma.DTYPES[d.src_dtype if side == 0 else d.dst_dtype]]
    base = d.src if side == 0 else d.dst
    run = d.slots[0][0] * es
    return [-(-((base % W) + run) // W)] * rows


def _dma_start(sim, ins):
    c = sim.cfg
    e, q = ins.imm.get("engine", 0), ins.imm.get("queue", 0)
    n, addr = ins.imm.get("count", 0), ins.imm.get("desc_addr", 0)
    if addr % gdma.DESC_BYTES:
        raise Fault(E_DESC, 0, f"desc_addr {addr:#x} must be a multiple of {gdma.DESC_BYTES}")
    if e >= c.dma_engines or q >= c.dma_queues:
        raise Fault(E_DESC, 0, f"DMA engine {e} / queue {q} must be < {c.dma_engines} / "
                               f"{c.dma_queues}")
    lo, hi = addr, addr + n * gdma.DESC_BYTES
    if n and (lo < sim.mem.dram_base or hi > sim.mem.dram_limit):
        raise Fault(E_AXI, 0, f"descriptors [{lo:#x}, {hi:#x}) outside the DRAM window "
                              f"[{sim.mem.dram_base:#x}, {sim.mem.dram_limit:#x})")
    raw = bytes(sim.mem.dram[lo - sim.mem.dram_base:hi - sim.mem.dram_base])
    sim.pending_descs = [gdma.Descriptor.unpack(raw[k * 64:(k + 1) * 64]) for k in range(n)]


def _t_dma_start(sim, ins, issue):
    # one 64-byte burst per descriptor on the shared R channel, read and queued one at a time;
    # the sync engine runs one dma_start at a time (rtl/core/sync_engine.py: it takes the next
    # from its sequencer once the last one is done)
    n = ins.imm.get("count", 0)
    beats = -(-gdma.DESC_BYTES // sim.cfg.sbuf_word_bytes)
    st = sim.engine_state.setdefault("sp", {"free": 0})
    start = max(issue, st["free"])
    done = start + 1
    for _ in range(n):
        done = sim.axi["r"].book(done + sim.timing.dram_latency, beats) + beats + 1
    s = sim.dma_streams[(ins.imm.get("engine", 0), ins.imm.get("queue", 0))]
    # the dma_start's own Event is the next one on the timeline
    s.prog.extend((d, done, len(sim.timeline)) for d in sim.pending_descs)
    sim.pending_descs = []
    st["free"] = done
    return start, done


def _dma_start_access(sim, ins):
    addr, n = ins.imm.get("desc_addr", 0), ins.imm.get("count", 0)
    return [("r", "dram", None, addr, addr + n * gdma.DESC_BYTES - 1)] if n else []


register_op("dma_start", _dma_start, _t_dma_start, _dma_start_access)


