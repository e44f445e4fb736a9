# SPDX-License-Identifier: Apache-2.0
"""amaranth.sim rigs of the ring link layer, checked cycle by cycle against the golden model
(:mod:`golden.collective.link`).

:class:`LinkRig` is one link: a :class:`rtl.collective.link.LinkTX`, the forward
:class:`rtl.collective.delay.DelayLine` (flits), a :class:`rtl.collective.link.LinkRX` and the
reverse delay line (credits). The testbench itself carries each cycle's TX output into the
forward wire and the RX credit return into the reverse wire, through a fault injector
(:mod:`tb.collective.program`), so that one injected fault reaches the RTL and the golden model
alike. :func:`run_link` drives random flits with random gaps into both TX inputs and takes the
RX outputs with random back-pressure, and compares every port output with
:class:`golden.collective.link.TxModel` / :class:`RxModel` each cycle.

:class:`RingRig` joins ``n`` ports in a unidirectional ring (rank r's TX to rank r+1's RX, the
TX of rank n-1 the dateline); :func:`run_ring` injects flits that travel ``hops`` links and
forwards them at every rank on the way (same VC index in, TX picks the VC out), checking the
RTL against ``n`` golden links cycle by cycle and the VC each flit arrives on against
:func:`golden.collective.link.vc_path`.
"""

from __future__ import annotations

from collections import deque

from amaranth.hdl import Elaboratable, Module

from golden.collective.link import (HEADER_FIELDS, DelayModel, RxModel, TxModel, is_dateline,
                                    tx_vc)
from rtl.collective.delay import DelayLine
from rtl.collective.link import LinkPort, LinkRX, LinkTX
from rtl.config import LINK_CHUNK_BITS, LINK_STREAM_BITS, LINK_VCS

__all__ = ["LinkRig", "RingRig", "random_payload", "run_link", "run_ring", "LinkTrace"]


class LinkRig(Elaboratable):
    """One link of ``cfg``: ``tx`` (a dateline port with ``dateline``), ``fwd``, ``rx``, ``rev``.
    ``fwd.o`` drives ``rx``'s wire and ``rev.o`` ``tx.credit``; the testbench drives the wires'
    inputs. With ``port=True`` ``tx`` and ``rx`` are the two halves of one
    :class:`rtl.collective.link.LinkPort` in loopback (its own TX feeding its own RX)."""

    def __init__(self, cfg, *, dateline=False, port=False):
        self.cfg, self.dateline = cfg, dateline
        if port:
            self.port = LinkPort(cfg, dateline=dateline)
            self.tx, self.rx = self.port.tx, self.port.rx
        else:
            self.port = None
            self.tx = LinkTX(cfg, dateline=dateline)
            self.rx = LinkRX(cfg)
        self.fwd = DelayLine(cfg.link_flit_bits, cfg.link_latency)
        self.rev = DelayLine(LINK_VCS, cfg.link_latency, in_memory=False)

    def elaborate(self, platform):
        m = Module()
        if self.port is not None:
            m.submodules.port = self.port
        else:
            m.submodules.tx, m.submodules.rx = self.tx, self.rx
        m.submodules.fwd, m.submodules.rev = self.fwd, self.rev
        m.d.comb += [self.rx.w_valid.eq(self.fwd.o_valid), self.rx.w_flit.eq(self.fwd.o),
                     self.tx.credit.eq(self.rev.o)]
        return m


class RingRig(Elaboratable):
    """``cfg.ring_size`` ranks, each with the TX of its link to the next rank and the RX of the
    link from the previous one: ``links[r]`` is the :class:`LinkRig` from rank r to r+1, its TX
    the dateline when ``dateline`` and r = n-1 (``dateline=False``: no port switches VC)."""

    def __init__(self, cfg, *, dateline=True):
        n = cfg.ring_size
        self.cfg = cfg
        self.links = [LinkRig(cfg, dateline=dateline and is_dateline(r, n)) for r in range(n)]

    def elaborate(self, platform):
        m = Module()
        for r, link in enumerate(self.links):
            m.submodules[f"link{r}"] = link
        return m


def random_payload(rng, cfg, **fixed):
    """A random TX payload (dict of :data:`golden.collective.link.HEADER_FIELDS`)."""
    p = {"data": int.from_bytes(rng.bytes(cfg.link_bits // 8), "little"),
         "src": int(rng.integers(cfg.ring_size)), "last": int(rng.integers(2)),
         "stream": int(rng.integers(1 << LINK_STREAM_BITS)),
         "chunk": int(rng.integers(1 << LINK_CHUNK_BITS))}
    p.update(fixed)
    return p


def _payload(view_const):
    return {k: int(getattr(view_const, k)) for k in HEADER_FIELDS}


class LinkTrace:
    """What one run saw: ``sent[vc]`` (payloads in the order the TX took them, by outgoing VC),
    ``got[vc]`` (payloads the RX delivered) and ``got_cycle[vc]`` (when), ``err_cycle``
    ({"tx"/"rx": first cycle its ``err`` was high}), ``info`` and ``code`` ({"tx"/"rx":
    ``err_info``, ``err_code``}), ``cycles``."""

    def __init__(self):
        self.sent = [[] for _ in range(LINK_VCS)]
        self.got = [[] for _ in range(LINK_VCS)]
        self.got_cycle = [[] for _ in range(LINK_VCS)]
        self.err_cycle, self.info, self.code = {}, {}, {}
        self.cycles = 0


class _Side:
    """The golden twin of one link, stepped in lockstep with the RTL."""

    def __init__(self, cfg, dateline):
        self.tx, self.rx = TxModel(cfg, dateline), RxModel(cfg)
        self.fwd, self.rev = DelayModel(cfg.link_latency), DelayModel(cfg.link_latency)


async def _wires(ctx, link, side, t, fault_fwd, fault_rev):
    """Carry this cycle's TX output and RX credit return into both wires (RTL and golden),
    through the injectors; check the registered outputs against golden first."""
    wv, wf = ctx.get(link.tx.w_valid), ctx.get(link.tx.w_flit.as_value())
    assert wv == side.tx.w_valid, f"cycle {t}: tx w_valid {wv}, golden {side.tx.w_valid}"
    if wv:
        assert wf == side.tx.w_flit, f"cycle {t}: tx flit {wf:#x}, golden {side.tx.w_flit:#x}"
    c = ctx.get(link.rx.credit)
    assert c == side.rx.credit_out, f"cycle {t}: rx credit {c}, golden {side.rx.credit_out}"
    if fault_fwd is not None:
        wv, wf = fault_fwd(t, wv, wf)
    if fault_rev is not None:
        c = fault_rev(t, c)
    ctx.set(link.fwd.i_valid, wv)
    ctx.set(link.fwd.i, wf if wv else 0)
    ctx.set(link.rev.i, c)
    ctx.set(link.rev.i_valid, 1)
    return (wv, wf if wv else 0), c


def _check_err(ctx, link, side, t, trace, key):
    port = link.tx if key == "tx" else link.rx
    model = side.tx if key == "tx" else side.rx
    e, info, code = ctx.get(port.err), ctx.get(port.err_info), ctx.get(port.err_code)
    assert (e, info, code) == (model.err, model.info, model.err_code), \
        f"cycle {t}: {key} err/info/code {(e, info, code)}, golden " \
        f"{(model.err, model.info, model.err_code)}"
    if e and key not in trace.err_cycle:
        trace.err_cycle[key], trace.info[key], trace.code[key] = t, info, code


def run_link(bench, rig, queues, *, rng, p_valid=1.0, p_ready=1.0, expect=0, watchdog=0,
             fault_fwd=None, fault_rev=None, cycles=None, idle_after=0):
    """Stream ``queues[v]`` (lists of payloads) into ``rig.tx.i[v]`` and take ``rig.rx.o``,
    in amaranth.sim ``bench`` (a :class:`tb.amsim.SimBench` of ``rig``), comparing every
    output with the golden model each cycle. A sender offers its next payload with
    probability ``p_valid`` per cycle and holds it until taken (stream rule); each RX output
    is ready with probability ``p_ready``. The run ends ``idle_after`` cycles after both
    queues are sent and every sent flit is delivered, or ``idle_after`` cycles after the first
    error, or after ``cycles``
    (default: a bound from the traffic and the latencies). Returns a :class:`LinkTrace`."""
    cfg = rig.cfg
    side = _Side(cfg, rig.dateline)
    trace = LinkTrace()
    pending = [deque(q) for q in queues]
    n_total = sum(len(q) for q in queues)
    bound = cycles if cycles is not None else \
        int(40 + 4 * cfg.link_latency + n_total * 8 / max(0.05, p_valid * p_ready))

    async def job(ctx):
        offer = [None] * LINK_VCS
        quiet = 0
        for t in range(bound):
            trace.cycles = t
            await _wires(ctx, rig, side, t, fault_fwd, fault_rev)
            fv, ff = side.fwd.out if side.fwd.out else (0, 0)
            for v in range(LINK_VCS):
                if offer[v] is None and pending[v] and rng.random() < p_valid:
                    offer[v] = pending[v].popleft()
                ctx.set(rig.tx.i[v].valid, offer[v] is not None)
                if offer[v] is not None:
                    ctx.set(rig.tx.i[v].payload, offer[v])
            valid = [int(o is not None) for o in offer]
            payload = list(offer)
            o_ready = [int(rng.random() < p_ready) for _ in range(LINK_VCS)]
            for v in range(LINK_VCS):
                ctx.set(rig.rx.o[v].ready, o_ready[v])
            for s in (rig.tx, rig.rx):
                ctx.set(s.watchdog, watchdog)
            ctx.set(rig.rx.expect, expect)
            # golden comb outputs of this cycle, against the RTL's
            g_ready, g = side.tx.ready(valid)
            outs = side.rx.out()
            for v in range(LINK_VCS):
                r = ctx.get(rig.tx.i[v].ready)
                assert r == g_ready[v], f"cycle {t}: tx i[{v}].ready {r}, golden {g_ready[v]}"
                ov = ctx.get(rig.rx.o[v].valid)
                assert ov == outs[v][0], f"cycle {t}: rx o[{v}].valid {ov}, golden {outs[v][0]}"
                if ov:
                    got = _payload(ctx.get(rig.rx.o[v].payload))
                    assert got == outs[v][1], f"cycle {t}: rx o[{v}] {got}, golden {outs[v][1]}"
            _check_err(ctx, rig, side, t, trace, "tx")
            _check_err(ctx, rig, side, t, trace, "rx")
            if g is not None and not side.tx.err:
                trace.sent[tx_vc(g, side.tx.dateline)].append(offer[g])
            for v in range(LINK_VCS):
                if valid[v] and g_ready[v]:
                    offer[v] = None
            # step golden, then the RTL
            side.tx.tick(valid, payload, side.rev.out, watchdog)
            taken = side.rx.tick(fv, ff, o_ready, expect, watchdog)
            for v in range(LINK_VCS):
                if taken[v] is not None:
                    trace.got[v].append(taken[v])
                    trace.got_cycle[v].append(t)
            side.fwd.tick((ctx.get(rig.fwd.i_valid), ctx.get(rig.fwd.i))
                          if ctx.get(rig.fwd.i_valid) else 0)
            side.rev.tick(ctx.get(rig.rev.i))
            await ctx.tick()
            done = not any(pending) and all(o is None for o in offer) and \
                sum(map(len, trace.got)) == sum(map(len, trace.sent))
            if done or trace.err_cycle:
                quiet += 1
                if quiet > idle_after:
                    break
            else:
                quiet = 0
        trace.cycles = t + 1

    bench.run(job)
    return trace


def run_ring(bench, rig, flows, *, rng, p_valid=1.0, p_ready=1.0, cycles=2000):
    """Traffic around a :class:`RingRig`: ``flows[r]`` is the list of ``(hops, payload)`` rank r
    injects on VC0 (``payload["src"]`` becomes r, ``payload["stream"]`` the hop count). At
    every rank a flit that has travelled its hops (``(rank - src) mod n == stream``) is
    delivered, taken with probability ``p_ready`` per cycle; any other is forwarded on the VC
    index it arrived on; a rank injects only while it has nothing to forward on VC0. Every
    link is checked against golden each cycle and must stay free of errors. Returns
    ``(delivered, cycles)``: ``delivered[r]`` lists ``(vc, payload)`` in arrival order; the
    run stops when everything is delivered or after ``cycles``."""
    cfg = rig.cfg
    n = cfg.ring_size
    links = rig.links
    sides = [_Side(cfg, lk.dateline) for lk in links]
    inject = [deque(dict(p, src=r, stream=h) for h, p in flows[r]) for r in range(n)]
    total = sum(len(f) for f in flows)
    delivered = [[] for _ in range(n)]
    result = {"cycles": cycles}

    def here(rank, p):
        return (rank - p["src"]) % n == p["stream"]

    async def job(ctx):
        offer = [[None] * LINK_VCS for _ in range(n)]     # rank r's TX inputs
        count = 0
        for t in range(cycles):
            for r in range(n):
                await _wires(ctx, links[r], sides[r], t, None, None)
                for s in (links[r].tx, links[r].rx):
                    ctx.set(s.watchdog, 0)
                ctx.set(links[r].rx.expect, 0)
            # rank r receives on link r-1 and sends on link r
            heads = [sides[(r - 1) % n].rx.out() for r in range(n)]
            o_ready = [[0] * LINK_VCS for _ in range(n)]           # by link
            fwd = [[False] * LINK_VCS for _ in range(n)]
            for r in range(n):
                for v in range(LINK_VCS):
                    ok, p = heads[r][v]
                    if ok and here(r, p):
                        o_ready[(r - 1) % n][v] = int(rng.random() < p_ready)
                    elif ok and (offer[r][v] is None or offer[r][v] is p):
                        offer[r][v], fwd[r][v] = p, True
                    if offer[r][v] is None and v == 0 and inject[r] and \
                            rng.random() < p_valid:
                        offer[r][v] = inject[r].popleft()
            valid = [[int(offer[r][v] is not None) for v in range(LINK_VCS)] for r in range(n)]
            ready = []
            for r in range(n):
                tx = links[r].tx
                for v in range(LINK_VCS):
                    ctx.set(tx.i[v].valid, valid[r][v])
                    if valid[r][v]:
                        ctx.set(tx.i[v].payload, offer[r][v])
                g_ready, _ = sides[r].tx.ready(valid[r])
                ready.append(g_ready)
                for v in range(LINK_VCS):
                    got = ctx.get(tx.i[v].ready)
                    assert got == g_ready[v], f"cycle {t}: rank {r} tx i[{v}].ready {got}"
                    if fwd[r][v] and valid[r][v] and g_ready[v]:
                        o_ready[(r - 1) % n][v] = 1      # forwarded: RX pop = TX take
            for r in range(n):
                rx, nxt = links[r].rx, (r + 1) % n
                outs = sides[r].rx.out()
                for v in range(LINK_VCS):
                    ctx.set(rx.o[v].ready, o_ready[r][v])
                    ov = ctx.get(rx.o[v].valid)
                    assert ov == outs[v][0], f"cycle {t}: link {r} rx o[{v}].valid {ov}"
                    if ov:
                        assert _payload(ctx.get(rx.o[v].payload)) == outs[v][1], \
                            f"cycle {t}: link {r} rx o[{v}] payload"
                    if ov and o_ready[r][v] and here(nxt, outs[v][1]):
                        delivered[nxt].append((v, outs[v][1]))
                        count += 1
                for key in ("tx", "rx"):
                    tr = LinkTrace()
                    _check_err(ctx, links[r], sides[r], t, tr, key)
                    assert not tr.err_cycle, f"cycle {t}: link {r} {key} error {tr.info}"
            for r in range(n):
                s, lk = sides[r], links[r]
                fv, ff = s.fwd.out if s.fwd.out else (0, 0)
                s.tx.tick(valid[r], offer[r], s.rev.out, 0)
                s.rx.tick(fv, ff, o_ready[r], 0, 0)
                s.fwd.tick((1, ctx.get(lk.fwd.i)) if ctx.get(lk.fwd.i_valid) else 0)
                s.rev.tick(ctx.get(lk.rev.i))
                for v in range(LINK_VCS):
                    if valid[r][v] and ready[r][v]:
                        offer[r][v] = None
            await ctx.tick()
            if count == total:
                result["cycles"] = t + 1
                break

    bench.run(job)
    return delivered, result["cycles"]
