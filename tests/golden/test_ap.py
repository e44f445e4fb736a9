# SPDX-License-Identifier: Apache-2.0
"""The access-pattern golden model (``golden/ap.py``) against independent references: the
closed-form range against the enumerated address list, the address list against a plain nested
loop, and every rule of docs/memory.md against a descriptor that breaks only it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from golden.ap import (AP, E_AP_ALIGN, E_AP_FORM, E_AP_PART, E_AP_RANGE, E_OK, PSUM, SBUF,
                       addresses, check, error_code, extent, partition_mask, validate)
from rtl.config import PRESETS, get_preset
from tb.ap.program import bad_aps, random_encodable_ap, random_legal_ap

SMALL = get_preset("small")


def loop_addresses(ap):
    """The reference: a nested loop, outermost dimension first, innermost (dims[0]) last."""
    dims = []
    for s, n in ap.dims:
        if n == 0:
            break
        dims.append((s, n))
    if not dims:
        return []
    out = []
    for idx in itertools.product(*[range(n) for _, n in reversed(dims)]):
        out.append(ap.offset + ap.elem_bytes * sum(
            s * i for (s, _), i in zip(reversed(dims), idx)))
    return out


def test_address_order_innermost_first():
    ap = AP(offset=100, elem_bytes=2, dims=((1, 3), (-10, 2)))
    assert addresses(ap).tolist() == [100, 102, 104, 80, 82, 84]
    assert extent(ap) == (80, 105)
    assert AP(dims=((5, 2), (1, 2), (0, 0))).count == 4


def test_closed_form_range_equals_enumeration(seed):
    """Thousands of encodable descriptors (negative, zero, extreme steps): the closed-form
    extent is the min and max (plus the element's last byte) of the enumerated list."""
    rng = np.random.default_rng(seed)
    done = 0
    for _ in range(4000):
        ap = random_encodable_ap(rng, SMALL)
        a = addresses(ap)
        want = loop_addresses(ap)
        assert a.tolist() == want, ap
        e = extent(ap)
        if not len(a):
            assert e is None
            continue
        assert e == (int(a.min()), int(a.max()) + ap.elem_bytes - 1), ap
        done += 1
    assert done > 2000


def test_extent_of_long_dimensions_without_enumerating():
    ap = AP(offset=1 << 20, elem_bytes=4, dims=((-32768, 65535), (32767, 65535), (1, 1),
                                                (-1, 2)))
    lo, hi = extent(ap)
    assert lo == (1 << 20) + 4 * (-32768 * 65534 - 1)
    assert hi == (1 << 20) + 4 * (32767 * 65534) + 3


@pytest.mark.parametrize("preset", ["small", "default", "trainium"])
def test_random_legal_descriptors_stay_inside_memory(preset, seed):
    cfg = PRESETS[preset]
    rng = np.random.default_rng(seed)
    for _ in range(300):
        ap = random_legal_ap(rng, cfg)
        a = addresses(ap)
        w = ap.elem_bytes
        assert len(a) == ap.count >= 1
        assert (a % w == 0).all()
        if ap.memory == SBUF:
            assert a.min() >= 0 and a.max() + w <= cfg.sbuf_bytes_per_partition
        else:
            bank = ap.offset // cfg.psum_bank_bytes
            assert bank < cfg.psum_banks
            assert (a // cfg.psum_bank_bytes == bank).all()
            assert ((a + w - 1) // cfg.psum_bank_bytes == bank).all()
        mask = partition_mask(ap)
        assert bin(mask).count("1") == ap.num_partitions and mask < 1 << cfg.partitions
        assert validate(cfg, ap) is ap


@pytest.mark.parametrize("preset", ["small", "default", "trainium"])
def test_every_bad_class_has_its_code_and_a_message(preset):
    cfg = PRESETS[preset]
    seen = set()
    for name, ap, code in bad_aps(cfg):
        got = check(cfg, ap)
        assert got is not None and got[0] == code, (name, got)
        assert error_code(cfg, ap) == code
        with pytest.raises(ValueError, match=rf"AP field '{got[1]}' must .*\(E_AP_\w+ = "
                                             rf"{code:#04x}\)"):
            validate(cfg, ap)
        seen.add(code)
    assert seen == {E_AP_FORM, E_AP_PART, E_AP_ALIGN, E_AP_RANGE}


@pytest.mark.parametrize("ap, field, message", [
    (AP(memory=0), "memory", r"be 1 \(SBUF\) or 2 \(PSUM\), not 0"),
    (AP(num_partitions=0), "num_partitions", r"be in \[1, 4\], not 0"),
    (AP(start_partition=3, num_partitions=2), "start_partition", r"be in \[0, 2\] for 2 "
                                                                  r"partitions, not 3"),
    (AP(start_partition=1, num_partitions=2), "start_partition", r"multiple of 2 for 2 of 4"),
    (AP(offset=6, elem_bytes=4), "offset", r"multiple of elem_bytes = 4, not 6"),
    (AP(offset=4092, dims=((1, 2),)), "dims", r"in \[0, 4095\] \(the SBUF partition\), not "
                                              r"reach \[4092, 4099\]"),
    (AP(memory=PSUM, offset=4096), "offset", r"be in \[0, 1023\] \(PSUM bank < 4\)"),
    (AP(memory=PSUM, offset=256, dims=((-1, 2),)), "dims", r"PSUM bank 1"),
])
def test_validate_names_the_field_and_range(ap, field, message):
    with pytest.raises(ValueError, match=rf"AP field '{field}' must .*{message}"):
        validate(SMALL, ap)


def test_priority_form_part_align_range():
    bad_all = AP(memory=0, num_partitions=0, offset=1, dims=((1, 1 << 15),))
    assert error_code(SMALL, bad_all) == E_AP_FORM
    assert error_code(SMALL, AP(num_partitions=0, offset=1, dims=((1, 1 << 15),))) == E_AP_PART
    assert error_code(SMALL, AP(offset=1, dims=((1, 1 << 15),))) == E_AP_ALIGN
    assert error_code(SMALL, AP(offset=0, dims=((1, 1 << 15),))) == E_AP_RANGE
    assert error_code(SMALL, AP(offset=0, dims=((1, 1024),))) == E_OK


def test_partition_alignment_rules_trainium():
    """The public rule at P = 128: > 64 partitions start at 0; 33..64 at 0 or 64; <= 32 at a
    multiple of 32."""
    cfg = get_preset("trainium")
    for count in range(1, 129):
        ok = {s for s in range(256)
              if error_code(cfg, AP(start_partition=s, num_partitions=count)) == E_OK}
        if count > 64:
            want = {0}
        elif count > 32:
            want = {0, 64}
        else:
            want = {0, 32, 64, 96}
        assert ok == want, count


def test_ap_dims_limits_active_dimensions():
    cfg = SMALL.replace(ap_dims=2)
    assert error_code(cfg, AP(dims=((1, 2), (1, 2), (0, 0), (0, 0)))) == E_OK
    assert error_code(cfg, AP(dims=((1, 2), (1, 2), (1, 2)))) == E_AP_FORM


@pytest.mark.parametrize("kw, exc, message", [
    (dict(memory=4), ValueError, r"'memory' must be in \[0, 3\], not 4"),
    (dict(start_partition=256), ValueError, r"'start_partition' must be in \[0, 255\]"),
    (dict(offset=-4), ValueError, r"'offset' must be in \[0, 4294967295\], not -4"),
    (dict(elem_bytes=3), ValueError, r"'elem_bytes' must be one of 1, 2, 4, 8, not 3"),
    (dict(dims=((1, 1),) * 5), ValueError, r"'dims' must have at most 4"),
    (dict(dims=((32768, 1),)), ValueError, r"'dims\[0\].step' must be in \[-32768, 32767\]"),
    (dict(dims=((1, 65536),)), ValueError, r"'dims\[0\].num' must be in \[0, 65535\]"),
    (dict(dims=(1, 2)), TypeError, r"'dims' must be a tuple of \(step, num\) pairs"),
    (dict(offset=1.0), TypeError, r"'offset' must be an integer"),
])
def test_unencodable_fields_are_rejected_at_construction(kw, exc, message):
    with pytest.raises(exc, match=message):
        AP(**kw)
