# SPDX-License-Identifier: Apache-2.0
"""ACT_TABLE_LOAD in golden.activation (table_words, table_load, execute) and the operand-AP
check order (scale, bias, src, dst): expected values from the table image dictionary and the
address map of rtl.config, built independently of the stream-order helper."""

import numpy as np
import pytest

from golden.activation import (E_FORMAT, E_OK, E_OPCODE, FUNCTION_IDS,
                               OP_ACT_TABLE_LOAD, ActInstr, execute, table, table_image,
                               table_load, table_size_ok, table_words)
from golden.ap import AP, E_AP_RANGE, PSUM, SBUF
from rtl.config import ACT_BINADES, ACT_MAP_BASE, ACT_SEG_BASE, ACT_SEG_STRIDE, get_preset

CFG = get_preset("small")
P = CFG.partitions


def mems(rng):
    return {SBUF: rng.integers(0, 256, (P, CFG.sbuf_bytes_per_partition), dtype=np.uint8),
            PSUM: rng.integers(0, 256, (P, CFG.psum_bytes_per_partition), dtype=np.uint8)}


@pytest.mark.parametrize("name", ["exp", "log", "silu"])
def test_table_words_order(name):
    tab = table(name)
    img = table_image(tab, CFG)
    w = table_words(tab, CFG)
    assert len(w) == 10 + 2 * ACT_BINADES + 9 * tab.segments
    assert list(w[:10]) == [img[a] for a in range(10)]
    for h in range(2):
        for b in range(ACT_BINADES):
            assert w[10 + h * ACT_BINADES + b] == img.get(ACT_MAP_BASE + h * ACT_BINADES + b, 0)
    for s in range(tab.segments):
        for j in range(9):
            assert w[10 + 2 * ACT_BINADES + 9 * s + j] == img[ACT_SEG_BASE + ACT_SEG_STRIDE * s
                                                               + j]
    assert w[9] == FUNCTION_IDS[name]


def _put(m, words, part, offset, memory=SBUF):
    m[memory][part, offset:offset + 4 * len(words)] = \
        np.ascontiguousarray(words, np.uint32).view(np.uint8)


def test_table_load_good_and_bad(seed):
    rng = np.random.default_rng(seed)
    m = mems(rng)
    before = {k: v.copy() for k, v in m.items()}
    w = table_words(table("exp"), CFG)
    n = len(w)
    _put(m, w, 2, 256)
    # the same words with a negative step from the other end
    _put(m, w[::-1], 1, 2048)
    load = ActInstr(opcode=OP_ACT_TABLE_LOAD, func=FUNCTION_IDS["exp"],
                    src=AP(memory=SBUF, start_partition=2, offset=256, dims=((1, n),)))
    st, img = table_load(CFG, load, m)
    assert st == E_OK and img == table_image(table("exp"), CFG) | {
        a: 0 for a in range(ACT_MAP_BASE, ACT_MAP_BASE + 2 * ACT_BINADES)
        if a not in table_image(table("exp"), CFG)}
    rev = ActInstr(opcode=OP_ACT_TABLE_LOAD, func=FUNCTION_IDS["exp"],
                   src=AP(memory=SBUF, start_partition=1, offset=2048 + 4 * (n - 1),
                          dims=((-1, n),)))
    assert table_load(CFG, rev, m) == (st, img)
    # spread over two partitions (word k: element k // 2 of partition 0 + k % 2), padded with
    # zero segments to whole columns: the same table (the padding segments are never selected)
    w2 = np.zeros(n + (9 if n % 2 else 18), np.uint32)
    w2[:n] = w
    c2 = len(w2) // 2
    assert (len(w2) - 138) % 9 == 0
    m2 = {k: v.copy() for k, v in m.items()}
    m2[SBUF][0:2, 3000:3000 + 4 * c2] = np.ascontiguousarray(w2.reshape(c2, 2).T).view(np.uint8)
    two = ActInstr(opcode=OP_ACT_TABLE_LOAD, func=FUNCTION_IDS["exp"],
                   src=AP(memory=SBUF, num_partitions=2, offset=3000, dims=((1, c2),)))
    st2, img2 = table_load(CFG, two, m2)
    assert st2 == E_OK and {a: v for a, v in img2.items() if a in img} == img
    assert execute(CFG, load, m, np.zeros(P, np.uint32)) == E_OK
    # bad images (read and written, no function after them): another function id, id >= 17
    for func in (FUNCTION_IDS["tanh"], 17):
        st, img = table_load(CFG, ActInstr(**{**load.__dict__, "func": func}), m)
        assert st == E_FORMAT and len(img) == n, func
    # a word count that is no image's (a partial segment, no segment, too many segments, too
    # many through the partition count): a static error, nothing read
    top = 138 + 9 * CFG.act_segments
    for cnt, parts, dims in ((n - 1, 1, None), (n + 1, 1, None), (138, 1, None), (9, 1, None),
                             (top + 9, 1, None), (n, 2, None),
                             # more than any image, its low bits an image's size
                             (0, 1, ((0, (1 << top.bit_length()) + n),))):
        bad = ActInstr(**{**load.__dict__, "src": AP(memory=SBUF, start_partition=2,
                                                     num_partitions=parts, offset=256,
                                                     dims=dims or ((1, cnt),))})
        assert not table_size_ok(CFG, bad.src.count * parts), (cnt, parts, dims)
        assert table_load(CFG, bad, m) == (E_FORMAT, None), (cnt, parts, dims)
    assert table_size_ok(CFG, top) and table_size_ok(CFG, 147) and not table_size_ok(CFG, 138)
    # static errors: nothing read
    for change, code in ((dict(src_dtype=2), E_FORMAT),
                         (dict(src=AP(memory=SBUF, elem_bytes=2, dims=((1, n),))), E_FORMAT),
                         (dict(src=AP(memory=SBUF, offset=CFG.sbuf_bytes_per_partition - 8,
                                      dims=((1, n),))), E_AP_RANGE)):
        assert table_load(CFG, ActInstr(**{**load.__dict__, **change}), m) == (code, None)
    assert all((m[k] == before[k]).all() for k in m if k != SBUF)


def test_no_table_loaded():
    m = mems(np.random.default_rng(1))
    ins = ActInstr(func=FUNCTION_IDS["exp"], src=AP(memory=SBUF, dims=((1, 4),)),
                   dst=AP(memory=SBUF, offset=512, dims=((1, 4),)))
    assert execute(CFG, ins, m, np.zeros(P, np.uint32), loaded="") == E_OPCODE


def test_operand_ap_check_order(seed):
    """scale_ap, bias_ap, src, dst: the order the engine reads them (each AP bad with its own
    code, so the order shows)."""
    rng = np.random.default_rng(seed)
    m = mems(rng)
    acc = np.zeros(P, np.uint32)
    good_src = AP(memory=SBUF, num_partitions=P, dims=((1, 8),))
    good_dst = AP(memory=SBUF, num_partitions=P, offset=512, dims=((1, 8),))
    bad_src = AP(memory=SBUF, num_partitions=P, offset=4080, dims=((1, 8),))    # E_AP_RANGE
    bad_dst = AP(memory=SBUF, num_partitions=P, offset=514, dims=((1, 8),))     # E_AP_ALIGN
    bad_sc = AP(memory=SBUF, num_partitions=P, offset=CFG.sbuf_bytes_per_partition)
    bad_bi = AP(memory=SBUF, num_partitions=P, offset=6)                        # E_AP_ALIGN
    good_bi = AP(memory=SBUF, num_partitions=P, offset=8)
    E_AP_ALIGN = 0x0E
    ex = lambda **k: execute(CFG, ActInstr(func=0, **k), m, acc)   # noqa: E731
    assert ex(src=bad_src, dst=bad_dst) == E_AP_RANGE
    assert ex(src=good_src, dst=bad_dst) == E_AP_ALIGN
    assert ex(src=bad_src, dst=bad_dst, bias_ap=bad_bi) == E_AP_ALIGN
    assert ex(src=bad_src, dst=good_dst, scale_ap=bad_sc, bias_ap=bad_bi) == E_AP_RANGE
    assert ex(src=good_src, dst=bad_dst, scale_ap=bad_sc, bias_ap=good_bi) == E_AP_RANGE
    assert ex(src=bad_src, dst=bad_dst, bias_ap=good_bi) == E_AP_RANGE
    assert ex(src=good_src, dst=good_dst, bias_ap=good_bi) == E_OK
