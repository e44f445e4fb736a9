# SPDX-License-Identifier: Apache-2.0
"""The instruction encoding (rtl/isa.py), the assembler and disassembler (golden/asm.py).

Independent reference: the byte positions of docs/architecture.md §8.2/§8.3 written out here
with :mod:`struct`, not read from the field tables under test.
"""

import random
import struct

import pytest

from golden.ap import ELEM_BYTES
from golden.asm import ap_of, assemble, disassemble, format_instr, parse_instr
from rtl import isa
from rtl.isa import AP_BYTES, IMM_BYTE, INSTR_BYTES, APEnc, F32Bits, Instr, decode, encode

SEEDS = range(4)


def _rand_f32(rng):
    while True:
        bits = rng.getrandbits(32)
        v = struct.unpack("<f", struct.pack("<I", bits))[0]
        return F32Bits(bits) if v != v else v


def rand_ap(rng):
    ndim = rng.randint(1, 4)
    return APEnc(mem=rng.randint(0, 3), start=rng.randint(0, 255), count=rng.randint(0, 255),
                 dtype=rng.choice(isa.DTYPES), offset=rng.getrandbits(32),
                 dims=tuple((rng.randint(-32768, 32767), rng.randint(1, 65535))
                            for _ in range(ndim)))


def rand_instr(rng):
    op = rng.choice(isa.OPCODES)
    imm = {}
    for f in op.imm:
        if rng.random() < 0.7:
            v = (_rand_f32(rng) if f.kind == "f32" else
                 rng.randint(-(1 << (f.width - 1)), (1 << (f.width - 1)) - 1) if f.kind == "s"
                 else rng.getrandbits(f.width))
            if v not in (0, 0.0) or (f.kind == "f32" and str(v) == "-0.0"):
                imm[f.name] = v
    return Instr(op=op.name, flags=frozenset(f for f in op.flags if rng.random() < 0.5),
                 wait=(rng.randint(0, 255), rng.getrandbits(32)) if rng.random() < 0.5 else None,
                 post=(rng.randint(0, 255), rng.getrandbits(16)) if rng.random() < 0.5 else None,
                 irq=rng.random() < 0.3,
                 aps={s: rand_ap(rng) for s in op.aps if rng.random() < 0.8}, imm=imm)


@pytest.mark.parametrize("seed", SEEDS)
def test_round_trips(seed):
    """encode/decode and assemble/disassemble are inverse on random well-formed programs."""
    rng = random.Random(seed)
    prog = [rand_instr(rng) for _ in range(300)]
    raw = b"".join(encode(i) for i in prog)
    assert len(raw) == INSTR_BYTES * len(prog)
    for n, i in enumerate(prog):
        chunk = raw[n * INSTR_BYTES:(n + 1) * INSTR_BYTES]
        assert isa.check_reserved(chunk, i.opcode.engine) is None, (seed, n, i)
        assert decode(chunk) == i, (seed, n)
        assert encode(decode(chunk)) == chunk, (seed, n)
    text = disassemble(raw)
    assert assemble(text) == raw, f"seed {seed}"
    assert [parse_instr(line) for line in text.splitlines()] == prog, f"seed {seed}"


@pytest.mark.parametrize("seed", SEEDS)
def test_dormant_wait_post_fields(seed):
    """A disabled wait or post (``ctl.wait_en`` / ``ctl.post_en`` clear) with nonzero fields is
    well-formed (the sequencer ignores the fields) and disassembles like the same instruction
    with those fields zero, so it reassembles with them zero: the one exception to the round
    trip (docs/isa.md §5, golden/asm.py)."""
    rng = random.Random(seed)
    fields = {f.name: f for f in isa.HEADER}
    for n in range(100):
        ins = rand_instr(rng)
        raw = int.from_bytes(encode(ins), "little")
        dormant = []
        if ins.wait is None:
            dormant += [("wait_sem", rng.randint(1, 255)), ("wait_val", rng.getrandbits(32) | 1)]
        if ins.post is None:
            dormant += [("post_sem", rng.randint(1, 255)), ("post_inc", rng.getrandbits(16) | 1)]
        if not dormant:
            continue
        name, value = rng.choice(dormant)
        bad = (raw | fields[name].put(value)).to_bytes(INSTR_BYTES, "little")
        assert isa.check_reserved(bad, ins.opcode.engine) is None, (seed, n, name)
        assert decode(bad) == ins, (seed, n, name)
        assert disassemble(bad) == disassemble(encode(ins)), (seed, n, name)
        assert assemble(disassemble(bad)) == encode(ins) != bad, (seed, n, name)


def test_positions_against_the_plan():
    """Byte positions of §8.2/§8.3, packed independently with struct."""
    ins = Instr(op="multiply_moving", flags=frozenset({"acc", "mx"}), wait=(0x12, 0xDEADBEEF),
                post=(0x34, 0xBEEF), irq=True,
                aps={"ap0": APEnc(2, 3, 16, "fp32", 0x11223344, ((1, 16),)),
                     "ap1": APEnc(1, 0, 128, "bf16", 0x200, ((-2, 7), (5, 9), (0, 0), (1, 1)))},
                imm={"sp_n": 4, "sp_m": 16})
    ref = bytearray(INSTR_BYTES)
    struct.pack_into("<BBBBIHB", ref, 0, 0x11, 0b10001, 0x12, 0x34, 0xDEADBEEF, 0xBEEF, 0b111)

    def ap(off, mem, start, count, dtype, offset, dims):
        struct.pack_into("<II", ref, off, mem | start << 2 | count << 10 | dtype << 18, offset)
        for d, (step, num) in enumerate(dims):
            struct.pack_into("<hH", ref, off + 8 + 4 * d, step, num)
    ap(16, 2, 3, 16, 0, 0x11223344, ((1, 16),))
    ap(40, 1, 0, 128, 2, 0x200, ((-2, 7), (5, 9), (0, 0), (1, 1)))
    struct.pack_into("<BB", ref, 88, 4, 16)
    assert encode(ins) == bytes(ref)


def test_field_tables_tile_the_instruction():
    """Header, AP and immediate fields lie inside their byte ranges and never overlap."""
    def check(fields, nbits):
        used = 0
        for f in fields:
            m = ((1 << f.width) - 1) << f.lsb
            assert f.lsb + f.width <= nbits, f
            assert not used & m, f"{f.name} overlaps"
            used |= m
        return used
    assert check(isa.HEADER, 16 * 8) == (1 << 128) - 1
    assert check(isa.AP_FIELDS, AP_BYTES * 8) == (1 << (AP_BYTES * 8)) - 1
    for op in isa.OPCODES:
        check(op.imm, (INSTR_BYTES - IMM_BYTE) * 8)
    slots = sorted(isa.AP_SLOTS.values())
    assert slots == [16, 16 + AP_BYTES, 16 + 2 * AP_BYTES] and slots[-1] + AP_BYTES == IMM_BYTE
    codes = [op.code for op in isa.OPCODES]
    assert len(set(codes)) == len(codes)
    ranges = {"pe": 0x10, "dve": 0x20, "act": 0x30, "pool": 0x40, "sp": 0x50, "cc": 0x60}
    for op in isa.OPCODES:
        assert (op.code & 0xF0) == (ranges[op.engine] if op.engine else 0), op


@pytest.mark.parametrize("seed", SEEDS)
def test_every_reserved_bit_is_E_OPCODE(seed):
    """Flipping any bit that no field of the opcode owns makes the instruction E_OPCODE; a
    foreign engine gets E_OPCODE for every engine-specific opcode."""
    rng = random.Random(100 + seed)
    for _ in range(20):
        ins = rand_instr(rng)
        op = ins.opcode
        raw = int.from_bytes(encode(ins), "little")
        owned = sum(((1 << f.width) - 1) << f.lsb for f in isa.HEADER if f.name != "reserved")
        flag_ok = sum(1 << isa.FLAG_BITS[f] for f in op.flags) << 8
        ctl_ok = sum(1 << b for b in isa.CTL_BITS.values()) << 80
        owned &= ~(0xFF << 8) & ~(0xFF << 80)
        owned |= flag_ok | ctl_ok
        for slot in op.aps:
            ap_owned = sum(((1 << f.width) - 1) << f.lsb for f in isa.AP_FIELDS
                           if f.name != "reserved")
            owned |= ap_owned << (8 * isa.AP_SLOTS[slot])
        owned |= sum(((1 << f.width) - 1) << f.lsb for f in op.imm) << (8 * IMM_BYTE)
        for b in rng.sample(range(INSTR_BYTES * 8), 200):
            bad = (raw ^ (1 << b)).to_bytes(INSTR_BYTES, "little")
            got = isa.check_reserved(bad, op.engine)
            if owned >> b & 1:
                if b >= 8:      # the opcode byte may land on another valid opcode
                    assert got is None, (seed, op.name, b, got)
            else:
                assert got is not None and got[0] == isa.E_OPCODE, (seed, op.name, b)
                with pytest.raises(ValueError, match="malformed"):
                    decode(bad)
        for eng in isa.ENGINES:
            got = isa.check_reserved(encode(ins), eng)
            assert (got is None) == (op.engine in (None, eng)), (op.name, eng)


def test_unknown_opcodes():
    known = {op.code for op in isa.OPCODES}
    for code in range(256):
        raw = bytes([code]) + bytes(INSTR_BYTES - 1)
        got = isa.check_reserved(raw)
        assert (got is None) == (code in known), code
    with pytest.raises(ValueError, match="128 bytes"):
        isa.check_reserved(bytes(127))


@pytest.mark.parametrize("ins,exc,match", [
    (Instr(op="matmul"), ValueError, "op must be one of"),
    (Instr(op="memset", flags=frozenset({"acc"})), ValueError, "takes the flags"),
    (Instr(op="memset", aps={"ap1": APEnc(1, 0, 1, "fp32", 0, ((1, 1),))}), ValueError,
     "AP slots"),
    (Instr(op="memset", imm={"scale": 1.0}), ValueError, "immediates"),
    (Instr(op="dma_start", imm={"count": -1}), ValueError, "'count' must be in"),
    (Instr(op="nop", wait=(256, 0)), ValueError, "'wait_sem' must be in \\[0, 255\\]"),
    (Instr(op="nop", post=(0, 1 << 16)), ValueError, "'post_inc' must be in \\[0, 65535\\]"),
    (Instr(op="nop", wait=(0, 1.0)), TypeError, "'wait_val' must be an int"),
    (Instr(op="memset", imm={"imm0": 0.1}), ValueError, "exactly representable"),
    (Instr(op="memset", imm={"imm0": float("nan")}), ValueError, "F32Bits"),
    (Instr(op="memset", imm={"imm1": 1e39}), ValueError, "exactly representable"),
    (Instr(op="iota", imm={"op0": 256}), ValueError, "'op0' must be in"),
    (Instr(op="memset", aps={"ap0": APEnc(1, 0, 1, "int8", 0, ((1, 1),))}), ValueError,
     "dtype must be one of"),
    (Instr(op="memset", aps={"ap0": APEnc(1, 0, 1, "fp32", 0, ((1, 65536),))}), ValueError,
     "'num0' must be in"),
    (Instr(op="memset", aps={"ap0": APEnc(1, 0, 1, "fp32", 0, ((-32769, 1),))}), ValueError,
     "'step0' must be in"),
])
def test_bad_fields_are_named(ins, exc, match):
    with pytest.raises(exc, match=match):
        encode(ins)


def test_assembler_errors_name_the_line():
    with pytest.raises(ValueError, match="line 2: mnemonic"):
        assemble("nop\nfoo\n")
    with pytest.raises(ValueError, match="line 1: access pattern"):
        assemble("memset ap0=sbuf.fp32[0:1]{1x1}")
    with pytest.raises(ValueError, match="line 1: memset has no operand"):
        assemble("memset bogus=1")
    with pytest.raises(ValueError, match="multiple of 128"):
        disassemble(bytes(100))
    with pytest.raises(ValueError, match="instruction 1: malformed"):
        disassemble(bytes(128) + b"\xff" + bytes(127))


def test_example_program_from_the_docs():
    text = ("multiply_moving.acc ap0=psum.fp32[0:16]@0x0{1x16} ap1=sbuf.bf16[0:16]@0x200{1x16}"
            " wait=s1>=1 post=s2+1\nnotify code=7 irq\n")
    raw = assemble(text)
    assert disassemble(raw) == text
    assert format_instr(decode(raw[:128])).startswith("multiply_moving.acc ")


def test_ap_of_uses_the_dtype_element_size():
    for name in isa.DTYPES:
        enc = APEnc(1, 0, 4, name, 8, ((1, 4),))
        if name in ELEM_BYTES:
            a = ap_of(enc)
            assert a.elem_bytes == ELEM_BYTES[name] and a.dims == ((1, 4),)
            assert (a.memory, a.start_partition, a.num_partitions, a.offset) == (1, 0, 4, 8)
        else:
            with pytest.raises(ValueError, match="dtype"):
                ap_of(enc)


def test_opcode_names_and_codes_are_unique():
    """The assembler reads an instruction by its name: two opcodes with one name (a vector
    ``transpose`` next to the PE's) would silently assemble one as the other."""
    names = [op.name for op in isa.OPCODES]
    codes = [op.code for op in isa.OPCODES]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    assert len(set(codes)) == len(codes)
    assert isa.OPS_BY_NAME["transpose"].engine == "pe"
