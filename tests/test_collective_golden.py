# SPDX-License-Identifier: Apache-2.0
"""The golden ring link layer (golden/collective/link.py) against independent references: the
CRC against published check values, Python's ``binascii.crc32`` and a table-driven MSB-first
formulation; the flit format against the config; the dateline rule against a channel
dependency graph (acyclic with the dateline, cyclic without); the cycle model's latency and
rate against the formulas of docs/collectives.md; the new config fields' validation."""

import binascii
import itertools

import numpy as np
import pytest

from golden.collective.link import (LinkModel, covered_bits, crc32c, crc_ok, crc_reflected,
                                    credit_round_trip, hop_latency, is_dateline, link_rate,
                                    pack_flit, unpack_flit, vc_path)
from rtl.config import LINK_CRC_POLY, PRESETS, get_preset, link_flit_fields

CFG = get_preset("small")


def _crc32c_msb_first(data):
    """CRC-32C from the normal polynomial 0x1EDC6F41, MSB-first with a 256-entry table, input
    bytes and the result bit-reversed (refin = refout = true): no code shared with golden."""
    poly = 0x1EDC6F41
    table = []
    for b in range(256):
        c = b << 24
        for _ in range(8):
            c = ((c << 1) ^ poly if c & 0x80000000 else c << 1) & 0xFFFFFFFF
        table.append(c)

    def rev(x, w):
        return int(f"{x:0{w}b}"[::-1], 2)

    crc = 0xFFFFFFFF
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ table[(crc >> 24) ^ rev(byte, 8)]
    return rev(crc, 32) ^ 0xFFFFFFFF


def test_crc32c_check_values():
    # the catalogue check value and RFC 3720 (iSCSI) appendix B.4's test vectors
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    assert LINK_CRC_POLY == 0x82F63B78


def test_crc_engine_against_binascii_and_a_table(seed):
    rng = np.random.default_rng(seed)
    for n in list(range(0, 20)) + [int(x) for x in rng.integers(20, 200, 30)]:
        data = rng.bytes(n)
        assert crc_reflected(data, 0xEDB88320) == binascii.crc32(data), (seed, n)
        assert crc32c(data) == _crc32c_msb_first(data), (seed, n)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_flit_fields_follow_the_config(name):
    cfg = PRESETS[name]
    f = dict(link_flit_fields(cfg))
    assert f["data"] == cfg.link_bits and f["crc"] == 32 and f["vc"] == 1
    assert 1 << f["src"] >= cfg.ring_size
    assert 1 << f["seq"] > 2 * cfg.link_credits
    assert covered_bits(cfg) % 8 == 0 and covered_bits(cfg) + 32 == cfg.link_flit_bits
    assert sum(f.values()) == cfg.link_flit_bits


def test_pack_unpack_round_trip(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        vals = {name: int(rng.integers(1 << w)) for name, w in link_flit_fields(CFG)
                if name not in ("pad", "crc")}
        flit = pack_flit(CFG, **vals)
        back = unpack_flit(CFG, flit)
        assert {k: back[k] for k in vals} == vals and back["pad"] == 0
        assert crc_ok(CFG, flit)
        n = covered_bits(CFG)
        assert back["crc"] == crc32c((flit % (1 << n)).to_bytes(n // 8, "little"))
    with pytest.raises(ValueError, match=r"flit field 'src' must be in \[0, 1\], not 2"):
        pack_flit(CFG, src=2)


def test_crc_catches_every_single_and_double_bit_flip(seed):
    """CRC-32C has Hamming distance >= 6 at these lengths (Koopman's tables): every flip of
    one or two bits of a whole flit (CRC field included) is caught."""
    rng = np.random.default_rng(seed)
    flit = pack_flit(CFG, data=int(rng.integers(1 << 32)), seq=3, chunk=7)
    nb = CFG.link_flit_bits
    for i in range(nb):
        assert not crc_ok(CFG, flit ^ (1 << i)), (seed, i)
    for i, j in itertools.combinations(range(nb), 2):
        assert not crc_ok(CFG, flit ^ (1 << i) ^ (1 << j)), (seed, i, j)
    for _ in range(500):
        bits = rng.choice(nb, size=int(rng.integers(3, 6)), replace=False)
        assert not crc_ok(CFG, flit ^ sum(1 << int(b) for b in bits)), (seed, bits)


@pytest.mark.parametrize("name", ["small", "default"])
def test_crc_detects_every_error_of_up_to_five_bits(name):
    """Exhaustively, through the CRC's linearity: flipping bit i changes the check (CRC field
    XOR CRC of the rest) by a syndrome s_i independent of the flit; an error goes unnoticed
    iff its syndromes XOR to 0. No single syndrome is 0, no two are equal (2 bits), no pair's
    XOR is a single one (3), the pairs' XORs are all distinct (4), and no triple's XOR is a
    pair's (5)."""
    cfg = PRESETS[name]
    nb = cfg.link_flit_bits
    base = pack_flit(cfg, data=1, seq=1)

    def check(f):
        return unpack_flit(cfg, f)["crc"] ^ _crc_of_covered(cfg, f)

    c0 = check(base)
    syn = [check(base ^ (1 << i)) ^ c0 for i in range(nb)]
    singles = set(syn)
    assert 0 not in singles and len(singles) == nb
    pairs = {}
    for i, j in itertools.combinations(range(nb), 2):
        x = syn[i] ^ syn[j]
        assert x not in singles and x not in pairs, (name, i, j)
        pairs[x] = (i, j)
    for i, j in itertools.combinations(range(nb), 2):
        sij = syn[i] ^ syn[j]
        for k in range(j + 1, nb):
            assert sij ^ syn[k] not in pairs, (name, i, j, k)


def _crc_of_covered(cfg, flit):
    n = covered_bits(cfg)
    return crc32c((flit & ((1 << n) - 1)).to_bytes(n // 8, "little"))


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("direction", [+1, -1])
def test_dateline_moves_flits_to_vc1_once(n, direction):
    for src in range(n):
        for hops in range(1, n):
            path = vc_path(src, hops, n, direction)
            r = src
            crossed = False
            for vc in path:
                crossed = crossed or is_dateline(r, n, direction)
                assert vc == int(crossed), (src, hops, path)
                r = (r + direction) % n


def _has_cycle(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    state = {}

    def visit(u):
        state[u] = 1
        for w in graph.get(u, ()):
            if state.get(w) == 1 or (w not in state and visit(w)):
                return True
        state[u] = 2
        return False

    return any(u not in state and visit(u) for u in list(graph))


@pytest.mark.parametrize("n", [3, 4, 8])
def test_dateline_breaks_the_channel_dependency_cycle(n):
    """Dally & Towles' condition: a network is deadlock-free when its channel dependency
    graph is acyclic. Every flit holding buffer (link r, vc) while it waits for (link r+1,
    vc') adds an edge; without the dateline a ring's graph has a cycle."""
    def edges(dateline):
        out = set()
        for src in range(n):
            for hops in range(2, n):
                vcs = vc_path(src, hops, n) if dateline else [0] * hops
                links = [(src + k) % n for k in range(hops)]
                out |= set(zip(zip(links, vcs), zip(links[1:], vcs[1:])))
        return out
    assert not _has_cycle(edges(True))
    assert _has_cycle(edges(False))


def test_is_dateline_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"direction must be \+1 or -1, not 0"):
        is_dateline(0, 4, 0)
    with pytest.raises(ValueError, match=r"rank must be in \[0, 3\], not 4"):
        is_dateline(4, 4)


@pytest.mark.parametrize("credits, latency", [(12, 4), (4, 4), (6, 9), (40, 16)])
def test_cycle_model_latency_and_rate(credits, latency):
    cfg = CFG.replace(link_credits=credits, link_latency=latency)
    link = LinkModel(cfg)
    p = {"data": 5, "src": 0, "last": 0, "stream": 0, "chunk": 0}
    n = 400
    first = None
    got = 0
    for t in range(n):
        _, taken = link.step([1, 0], [p, None], [1, 1])
        if taken[0] is not None:
            first = t if first is None else first
            got += 1
    assert first == hop_latency(cfg)
    assert credit_round_trip(cfg) == 2 * latency + 4
    rate = got / (n - first)
    assert abs(rate - link_rate(cfg)) < 0.02, (rate, link_rate(cfg))


@pytest.mark.parametrize("field", ["ring_size", "link_bits", "link_credits", "link_latency"])
def test_link_fields_reject_non_integers(field):
    with pytest.raises(TypeError, match=f"'{field}' must be an integer"):
        PRESETS["default"].replace(**{field: 4.0})
    with pytest.raises(TypeError, match=f"'{field}' must be an integer"):
        PRESETS["default"].replace(**{field: True})


def test_presets_link_values():
    s, d = PRESETS["small"], PRESETS["default"]
    assert (s.ring_size, s.link_bits, s.link_credits, s.link_latency) == (2, 32, 12, 4)
    assert (d.ring_size, d.link_bits, d.link_credits, d.link_latency) == (4, 128, 32, 8)
    for c in (s, d):
        assert link_rate(c) == 1.0      # both run a VC at one flit per cycle
