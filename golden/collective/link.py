# SPDX-License-Identifier: Apache-2.0
"""The ring link layer, bit-exact and cycle-exact (docs/collectives.md §2-§6).

Written from docs/collectives.md, never from the RTL (``rtl/collective/``):

* the flit: :func:`pack_flit` / :func:`unpack_flit` with the fields of
  :func:`rtl.config.link_flit_fields` and the CRC-32C of :func:`crc32c` over every field below
  the ``crc`` field (the little-endian bytes of that integer);
* the rules: credits per virtual channel, a sequence number per (sending port, VC), the
  dateline (:func:`tx_vc`, :func:`is_dateline`), the error kinds of
  :data:`rtl.config.LINK_FAULTS` reported with ``E_LINK``;
* a cycle-level model of one link: :class:`TxModel` (the sending port), :class:`DelayModel`
  (the wire, ``link_latency`` cycles each way), :class:`RxModel` (the receiving port) and
  :class:`LinkModel` joining them; every cycle has the same inputs and outputs as the RTL
  ports, so that a future multi-core simulator can run the links cycle by cycle, and the
  figures :func:`hop_latency`, :func:`credit_round_trip`, :func:`link_rate`.
"""

from __future__ import annotations

from collections import deque

from rtl.config import (LINK_CRC_BITS, LINK_CRC_POLY, LINK_FAULTS, LINK_VCS, CoreConfig,
                        link_flit_fields)
from rtl.isa import E_LINK

__all__ = ["crc_reflected", "crc32c", "flit_offsets", "covered_bits", "flit_crc", "pack_flit",
           "unpack_flit", "crc_ok", "HEADER_FIELDS", "tx_vc", "is_dateline", "vc_path",
           "hop_latency", "credit_round_trip", "link_rate", "TxModel", "RxModel", "DelayModel",
           "LinkModel"]

#: What a sender gives a TX port with each flit (``vc``, ``seq``, ``pad`` and ``crc`` are the
#: port's); what an RX port delivers.
HEADER_FIELDS = ("src", "last", "stream", "chunk", "data")


# --- CRC ---------------------------------------------------------------------------------------

def crc_reflected(data, poly, *, width=32, init=None, xorout=None):
    """The reflected CRC of ``data`` (bytes), one bit at a time, least significant bit of each
    byte first (the Rocksoft model with refin = refout = true; ``poly`` in reflected form).
    ``init`` and ``xorout`` default to all ones."""
    mask = (1 << width) - 1
    crc = mask if init is None else init
    for byte in bytes(data):
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (poly if crc & 1 else 0)
    return crc ^ (mask if xorout is None else xorout)


def crc32c(data):
    """CRC-32C (Castagnoli, iSCSI; RFC 3720 appendix B.4): reflected polynomial
    :data:`rtl.config.LINK_CRC_POLY`, init and final XOR 0xFFFFFFFF."""
    return crc_reflected(data, LINK_CRC_POLY, width=LINK_CRC_BITS)


# --- the flit ----------------------------------------------------------------------------------

def flit_offsets(cfg):
    """``{field: (lsb, width)}`` of a flit of ``cfg``."""
    out, pos = {}, 0
    for name, w in link_flit_fields(cfg):
        out[name] = (pos, w)
        pos += w
    return out


def covered_bits(cfg):
    """Bits the CRC covers: every field below ``crc`` (a whole number of bytes)."""
    return flit_offsets(cfg)["crc"][0]


def flit_crc(cfg, flit):
    """The CRC-32C of the covered part of ``flit`` (an int; its ``crc`` field is ignored)."""
    n = covered_bits(cfg)
    return crc32c((flit & ((1 << n) - 1)).to_bytes(n // 8, "little"))


def pack_flit(cfg, *, data=0, src=0, vc=0, last=0, stream=0, chunk=0, seq=0, pad=0, crc=None):
    """The flit (an int of ``cfg.link_flit_bits``) with these fields; ``crc=None`` computes it.
    A field value must fit its width (``ValueError`` otherwise)."""
    offs = flit_offsets(cfg)
    vals = {"data": data, "src": src, "vc": vc, "last": last, "stream": stream,
            "chunk": chunk, "seq": seq, "pad": pad}
    flit = 0
    for name, v in vals.items():
        if name not in offs:
            if v:
                raise ValueError(f"flit field {name!r} must be 0 in this format, not {v!r}")
            continue
        lsb, w = offs[name]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < (1 << w):
            raise ValueError(f"flit field {name!r} must be in [0, {(1 << w) - 1}], not {v!r}")
        flit |= v << lsb
    c = flit_crc(cfg, flit) if crc is None else crc
    return flit | (c << offs["crc"][0])


def unpack_flit(cfg, flit):
    """``{field: value}`` of ``flit`` (every field of the format, ``crc`` included)."""
    return {name: (flit >> lsb) & ((1 << w) - 1) for name, (lsb, w) in flit_offsets(cfg).items()}


def crc_ok(cfg, flit):
    """Whether the ``crc`` field of ``flit`` is the CRC-32C of the rest."""
    return unpack_flit(cfg, flit)["crc"] == flit_crc(cfg, flit)


# --- virtual channels and the dateline ---------------------------------------------------------

def is_dateline(rank, ring_size, direction=+1):
    """Whether the link leaving ``rank`` in ``direction`` (+1: to ``rank + 1``, -1: to
    ``rank - 1``, modulo ``ring_size``) is that direction's dateline: the wrap-around link
    ``ring_size - 1 -> 0`` (+1) or ``0 -> ring_size - 1`` (-1)."""
    if direction not in (+1, -1):
        raise ValueError(f"direction must be +1 or -1, not {direction!r}")
    if not 0 <= rank < ring_size:
        raise ValueError(f"rank must be in [0, {ring_size - 1}], not {rank!r}")
    return rank == (ring_size - 1 if direction > 0 else 0)


def tx_vc(vc, dateline):
    """The VC a flit that came in on ``vc`` leaves on: VC1 once it crosses the dateline, and
    VC1 stays VC1."""
    return vc | int(bool(dateline))


def vc_path(src, hops, ring_size, direction=+1):
    """The VC of each of the ``hops`` links a flit injected at ``src`` (on VC0) crosses."""
    vc, out, r = 0, [], src
    for _ in range(hops):
        vc = tx_vc(vc, is_dateline(r, ring_size, direction))
        out.append(vc)
        r = (r + direction) % ring_size
    return out


# --- figures -----------------------------------------------------------------------------------

def hop_latency(cfg):
    """Cycles from a flit taken by the TX port to the same flit offered by the RX port when
    nothing stalls: TX register 1 + wire ``link_latency`` + RX buffer 1."""
    return cfg.link_latency + 2


def credit_round_trip(cfg):
    """Cycles from a flit taken (a credit spent) to that credit usable again, when the
    receiver takes the flit at once: the hop, RX credit register 1, the reverse wire
    ``link_latency``, the TX credit counter 1."""
    return 2 * cfg.link_latency + 4


def link_rate(cfg):
    """Flits per cycle of one VC with a receiver that never stalls."""
    return min(1.0, cfg.link_credits / credit_round_trip(cfg))


# --- cycle-level model -------------------------------------------------------------------------

def _check_watchdog(watchdog):
    if isinstance(watchdog, bool) or not isinstance(watchdog, int) or \
            not 0 <= watchdog < (1 << 32):
        raise ValueError(f"watchdog must be in [0, {(1 << 32) - 1}], not {watchdog!r}")


class TxModel:
    """The sending port of one link, one :meth:`tick` per cycle.

    State: a credit counter per VC (``link_credits`` at reset), a sequence counter per VC, the
    round-robin pointer, the registered wire output (``w_valid``, ``w_flit``), a watchdog
    counter per VC (cycles with credits outstanding and none returned), and the first error
    (``err``, ``info``: a value of ``LINK_FAULTS``).

    Parameters
    ----------
    cfg : CoreConfig
    dateline : bool
        This link is its direction's dateline: every flit leaves on VC1.
    """

    def __init__(self, cfg, dateline=False):
        if not isinstance(cfg, CoreConfig):
            raise TypeError(f"TxModel cfg must be a CoreConfig, not {cfg!r}")
        self.cfg, self.dateline = cfg, bool(dateline)
        C = cfg.link_credits
        self.credit = [C] * LINK_VCS
        self.seq = [0] * LINK_VCS
        self.rr = LINK_VCS - 1
        self.w_valid, self.w_flit = 0, 0
        self.wd = [0] * LINK_VCS
        self.err, self.info = 0, 0

    def ready(self, valid):
        """``(ready per input, granted input or None)`` this cycle, for input valids
        ``valid``: the first eligible input after the last one served (an input is eligible
        when valid and its outgoing VC has a credit); after an error every input is ready
        (drained, nothing sent)."""
        if self.err:
            return [1] * LINK_VCS, None
        for k in range(1, LINK_VCS + 1):
            v = (self.rr + k) % LINK_VCS
            if valid[v] and self.credit[tx_vc(v, self.dateline)] > 0:
                return [int(j == v) for j in range(LINK_VCS)], v
        return [0] * LINK_VCS, None

    def tick(self, valid, payload, credit_in, watchdog):
        """One cycle: inputs ``valid[v]``, ``payload[v]`` (dicts of :data:`HEADER_FIELDS`),
        the returned credits ``credit_in`` (bit v: one credit of VC v) and the watchdog
        limit (0 = off). Returns the ready list of the cycle."""
        _check_watchdog(watchdog)
        cfg, C = self.cfg, self.cfg.link_credits
        ready, g = self.ready(valid)
        before = list(self.credit)
        sent = [0] * LINK_VCS
        new_err = 0
        if g is not None:
            vo = tx_vc(g, self.dateline)
            p = payload[g]
            self.w_flit = pack_flit(cfg, data=p["data"], src=p["src"], vc=vo, last=p["last"],
                                    stream=p["stream"], chunk=p["chunk"], seq=self.seq[vo])
            self.seq[vo] = (self.seq[vo] + 1) % (1 << cfg.link_seq_bits)
            sent[vo] = 1
        self.w_valid = int(g is not None)
        for v in range(LINK_VCS):
            back = credit_in >> v & 1
            if back and not sent[v] and self.credit[v] == C:
                new_err = new_err or LINK_FAULTS["credit_overflow"]
            else:
                self.credit[v] += back - sent[v]
        for v in range(LINK_VCS):
            if before[v] != C and not credit_in >> v & 1 and not self.err \
                    and watchdog:
                if self.wd[v] + 1 >= watchdog:
                    new_err = new_err or LINK_FAULTS["credit_timeout"]
                self.wd[v] += 1
            else:
                self.wd[v] = 0
        if new_err and not self.err:
            self.err, self.info = 1, new_err
        if g is not None:
            self.rr = g
        return ready

    @property
    def err_code(self):
        return E_LINK if self.err else 0


class DelayModel:
    """The wire: what goes in at cycle ``t`` comes out at cycle ``t + latency`` (``0`` before)."""

    def __init__(self, latency):
        self.q = deque([0] * latency, maxlen=latency)

    @property
    def out(self):
        return self.q[0]

    def tick(self, value):
        self.q.append(value)


class RxModel:
    """The receiving port of one link, one :meth:`tick` per cycle.

    State: a FIFO of ``link_credits`` flits per VC, the expected sequence number per VC, the
    registered credit return (``credit_out``, bit v: a flit of VC v was taken), the silence
    watchdog and the first error (``err``, ``info``). After an error nothing is delivered, no
    flit is stored and no credit is returned.
    """

    def __init__(self, cfg):
        if not isinstance(cfg, CoreConfig):
            raise TypeError(f"RxModel cfg must be a CoreConfig, not {cfg!r}")
        self.cfg = cfg
        self.fifo = [deque() for _ in range(LINK_VCS)]
        self.exp = [0] * LINK_VCS
        self.credit_out = 0
        self.wd = 0
        self.err, self.info = 0, 0

    def out(self):
        """``[(valid, payload or None)]`` per VC this cycle (payload: dict of
        :data:`HEADER_FIELDS`)."""
        return [(0, None) if self.err or not f else (1, f[0]) for f in self.fifo]

    def tick(self, w_valid, w_flit, o_ready, expect, watchdog):
        """One cycle: the wire (``w_valid``, ``w_flit``), the consumers' ``o_ready[v]``,
        ``expect`` (a flit is awaited: the silence watchdog runs) and the watchdog limit.
        Returns the flits taken this cycle, ``[payload or None]`` per VC."""
        _check_watchdog(watchdog)
        cfg = self.cfg
        outs = self.out()
        taken = [p if ok and o_ready[v] else None for v, (ok, p) in enumerate(outs)]
        full = [len(f) == cfg.link_credits for f in self.fifo]
        new_err = 0
        if w_valid and not self.err:
            f = unpack_flit(cfg, w_flit)
            v = f["vc"]
            if not crc_ok(cfg, w_flit):
                new_err = LINK_FAULTS["crc"]
            elif f["seq"] != self.exp[v]:
                new_err = LINK_FAULTS["seq"]
            elif full[v]:
                new_err = LINK_FAULTS["overflow"]
            else:
                self.fifo[v].append({k: f[k] for k in HEADER_FIELDS})
                self.exp[v] = (self.exp[v] + 1) % (1 << cfg.link_seq_bits)
        if expect and not w_valid and not self.err and watchdog:
            if self.wd + 1 >= watchdog:
                new_err = LINK_FAULTS["silent"]
            self.wd += 1
        else:
            self.wd = 0
        self.credit_out = 0
        for v in range(LINK_VCS):
            if taken[v] is not None:
                self.fifo[v].popleft()
                self.credit_out |= 1 << v
        if new_err and not self.err:
            self.err, self.info = 1, new_err
        return taken

    @property
    def err_code(self):
        return E_LINK if self.err else 0


class LinkModel:
    """One link: a :class:`TxModel`, the forward and reverse :class:`DelayModel` wires and an
    :class:`RxModel`. ``fault_fwd(t, valid, flit) -> (valid, flit)`` and
    ``fault_rev(t, credits) -> credits`` (optional) change what enters the wires at cycle
    ``t``: how the tests inject faults."""

    def __init__(self, cfg, dateline=False, fault_fwd=None, fault_rev=None):
        self.cfg = cfg
        self.tx, self.rx = TxModel(cfg, dateline), RxModel(cfg)
        self.fwd, self.rev = DelayModel(cfg.link_latency), DelayModel(cfg.link_latency)
        self.fault_fwd, self.fault_rev = fault_fwd, fault_rev
        self.t = 0

    def step(self, valid, payload, o_ready, *, expect=0, watchdog=0):
        """One cycle; returns ``(tx ready list, rx flits taken per VC)``."""
        w = (self.tx.w_valid, self.tx.w_flit)
        if self.fault_fwd is not None:
            w = self.fault_fwd(self.t, *w)
        c = self.rx.credit_out
        if self.fault_rev is not None:
            c = self.fault_rev(self.t, c)
        fv, ff = self.fwd.out if self.fwd.out else (0, 0)
        ready = self.tx.tick(valid, payload, self.rev.out, watchdog)
        taken = self.rx.tick(fv, ff, o_ready, expect, watchdog)
        self.fwd.tick(w if w[0] else 0)
        self.rev.tick(c)
        self.t += 1
        return ready, taken
