# SPDX-License-Identifier: Apache-2.0
"""Per-cycle stall profile of the collective engine ring in amaranth.sim (docs/collectives.md
§14.4): why each rank's TX does not send, and why its pipeline does not issue, cycle by cycle.

``python -m tb.collective.stall all_reduce 16384`` profiles one FP32 case of
:func:`tb.multicore.program.engine_ring_case` on 4 ``default`` ranks (``--ranks``,
``--preset``; ``--dst`` moves the destination to another byte offset) and prints every rank's
counts. Each rank's SBUF is checked bit for bit against the multi-core golden simulator.

TX, each cycle the rank runs (:data:`TX_CAUSES`): ``sent``; ``no_credit`` (a flit offered,
the TX port out of credits); ``no_send`` (the flit at the head is written, not sent: a phase
that only writes); ``write_bank`` (the head must be written before it is sent and the SBUF
bank is busy: the engine's read and write ports on one single-ported bank); ``write_slots``
(the head is written one slot a cycle: its slots are not in one destination row); ``empty``
(no flit at the head: see why the pipeline did not issue ``latency`` cycles before).

Issue (:data:`ISSUE_CAUSES`): ``issued``; ``walk`` (no element: a phase or segment change,
or the walk is done); ``read_bank`` (the own element's row read waits for the bank);
``read_wait`` (its row read is in flight or not yet issued); ``rx_order`` (RX holds flits
of the tail, not yet taken); ``rx_empty``; ``pipe_full`` (the output queue is full: TX or the
write port is behind).
"""

from __future__ import annotations

import collections

import numpy as np

__all__ = ["TX_CAUSES", "ISSUE_CAUSES", "stall_profile"]

TX_CAUSES = ("sent", "no_credit", "no_send", "write_bank", "write_slots", "empty")
ISSUE_CAUSES = ("issued", "walk", "read_bank", "read_wait", "rx_order", "rx_empty",
                "pipe_full")


def _tx_cause(p, valid, ready):
    if valid:
        return "sent" if ready else "no_credit"
    if p["ov"] and not p["o_tx"]:
        return "no_send"
    if p["ov"] and p["o_wr"] and not p["wdone"]:
        return "write_bank" if p["wr_valid"] and not p["wr_ready"] else "write_slots"
    return "empty"


def _issue_cause(p):
    if p["go"]:
        return "issued"
    if not p["iw_valid"]:
        return "walk"
    if p["need_own"] and not p["own_valid"]:
        return "read_bank" if p["rd_valid"] and not p["rd_ready"] else "read_wait"
    if p["need_rx"] and p["rxv"] and not p["main_rx_ok"]:
        return "rx_order"
    if p["need_rx"] and not p["rxv"]:
        return "rx_empty"
    return "pipe_full"


def stall_profile(cfg, text, images, *, max_cycles=200_000):
    """Run the CC instruction ``text`` on every rank of an amaranth.sim
    :class:`tb.multicore.rig.EngineRing` of ``cfg`` from SBUF ``images`` (one per rank) and
    count, per rank and cycle while it runs, the TX and issue causes. Returns ``{"cycles",
    "statuses", "images", "tx": [Counter per rank], "issue": [Counter per rank]}``; a run
    longer than ``max_cycles`` raises ``TimeoutError``."""
    from golden.asm import assemble
    from tb.amsim import SimBench
    from tb.mem.rig import dump_sbuf, preload_sbuf
    from tb.multicore.rig import EngineRing, instr_fields
    n = cfg.ring_size
    rig = EngineRing(cfg)
    bench = SimBench(rig)
    fields = instr_fields(assemble(text), cfg)
    tx = [collections.Counter() for _ in range(n)]
    issue = [collections.Counter() for _ in range(n)]
    res = {}

    async def job(ctx):
        for r in range(n):
            preload_sbuf(ctx, rig.sbuf[r], images[r])
            ctx.set(rig.eng[r].instr.payload, fields)
            ctx.set(rig.eng[r].instr.valid, 1)
            ctx.set(rig.eng[r].done.ready, 1)
        await ctx.tick()
        for e in rig.eng:
            ctx.set(e.instr.valid, 0)
        got = [None] * n
        cyc = 0
        while any(g is None for g in got):
            if cyc >= max_cycles:
                raise TimeoutError(f"engines did not finish in {max_cycles} cycles: {got}")
            for r, e in enumerate(rig.eng):
                p = {k: ctx.get(v) for k, v in e.probe.items()}
                if p["running"]:
                    tx[r][_tx_cause(p, ctx.get(e.tx.valid), ctx.get(e.tx.ready))] += 1
                    issue[r][_issue_cause(p)] += 1
            await ctx.tick()
            cyc += 1
            for r, e in enumerate(rig.eng):
                if got[r] is None and ctx.get(e.done.valid):
                    got[r] = ctx.get(e.done.payload.status)
        res["cycles"], res["statuses"] = cyc + 1, got
        res["images"] = [dump_sbuf(ctx, s) for s in rig.sbuf]

    bench.run(job)
    return {**res, "tx": tx, "issue": issue}


def main(argv=None):
    import argparse

    from golden.collective.perf import bus_factor
    from rtl.config import PRESETS
    from tb.multicore.program import engine_ring_case, engine_ring_golden
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op", choices=("all_reduce", "reduce_scatter", "all_gather"))
    ap.add_argument("size", type=int, help="NCCL size S, bytes per core")
    ap.add_argument("--preset", default="default", choices=sorted(PRESETS))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--dst", type=lambda s: int(s, 0), default=None,
                    help="destination byte offset (default: right after the source)")
    a = ap.parse_args(argv)
    cfg = PRESETS[a.preset].replace(ring_size=a.ranks)
    text, images = engine_ring_case(cfg, a.op, a.size)
    if a.dst is not None:
        head, _, rest = text.partition("@")
        text = head + f"@{a.dst:#x}" + rest[rest.index("{"):]
    errs, want = engine_ring_golden(cfg, text, images)
    out = stall_profile(cfg, text, images)
    same = all(np.array_equal(g, w) for g, w in zip(out["images"], want))
    if any(errs) or any(out["statuses"]) or not same:
        raise SystemExit(f"{text}: golden errors {errs}, RTL statuses {out['statuses']}, "
                         f"SBUF equal to golden: {same}")
    cyc = out["cycles"]
    frac = a.size / cyc * bus_factor(a.op, a.ranks) / (cfg.link_bits / 8)
    print(f"{text}\n{cfg.name}, {a.ranks} ranks: {cyc} cycles, busbw / peak {frac:.4f}, "
          f"every rank bit for bit equal to golden")
    for r in range(a.ranks):
        print(f"rank {r} TX:    " + ", ".join(f"{c} {out['tx'][r][c]}" for c in TX_CAUSES))
        print(f"rank {r} issue: " + ", ".join(f"{c} {out['issue'][r][c]}"
                                              for c in ISSUE_CAUSES))


if __name__ == "__main__":
    main()
