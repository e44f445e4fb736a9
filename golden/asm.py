# SPDX-License-Identifier: Apache-2.0
"""Assembler and disassembler of the instruction set defined in :mod:`rtl.isa`.

One instruction per line; ``#`` starts a comment. A line is the mnemonic with its flags
(``multiply_moving.acc.mx``), then space-separated operands in any order:

* ``ap0=`` / ``ap1=`` / ``ap2=`` an access pattern:
  ``<mem>.<dtype>[<start>:<count>]@<offset>{<step>x<num>,...}`` with ``mem`` ``sbuf`` or
  ``psum`` (``mem0``/``mem3`` for the illegal codes), e.g. ``sbuf.bf16[0:16]@0x200{1x16,32x4}``
  (dimension 0, the innermost, first; steps in elements, negative allowed);
* ``wait=s<sem>>=<value>``, ``post=s<sem>+<inc>``, ``irq``;
* ``<immediate>=<value>``: an integer (decimal or ``0x``), or for FP32 immediates a float
  (``1.5``, ``-inf``) or its bits written ``bits:0x7fc00001`` (how NaNs print).

The collective opcodes take the same form, e.g. ``all_reduce ap0=sbuf.bf16[0:4]@0x100{1x8}
ap1=sbuf.fp32[0:4]@0x0{1x8} op=1 stream=2 post=s1+1`` (``op`` an ALU code: 1 add, 4 max, 5
min) and ``send_recv ... stream=0 d=1`` (docs/collectives.md §12).

:func:`disassemble` prints exactly this form, and ``assemble(disassemble(b)) == b`` for every
well-formed program ``b`` whose disabled waits and posts have zero fields (the tests check it on
random instructions). A wait or post whose ``ctl`` enable bit is clear with a nonzero
``wait_sem``/``wait_val`` (``post_sem``/``post_inc``) is well-formed too, since the sequencer
ignores those fields; it disassembles as the same instruction without them and so reassembles
with them zero.
"""

from __future__ import annotations

import re

from golden.ap import AP, ELEM_BYTES
from rtl.isa import INSTR_BYTES, OPS_BY_NAME, APEnc, F32Bits, Instr, decode, encode

__all__ = ["ap_of", "format_ap", "parse_ap", "format_instr", "parse_instr", "assemble", "disassemble"]

_MEMS = {0: "mem0", 1: "sbuf", 2: "psum", 3: "mem3"}
_MEM_CODES = {v: k for k, v in _MEMS.items()}
_AP_RE = re.compile(r"^(\w+)\.(\w+)\[(\d+):(\d+)\]@(0x[0-9a-fA-F]+|\d+)\{([^}]*)\}$")


def ap_of(enc: APEnc) -> AP:
    """The :class:`golden.ap.AP` an encoded AP describes (element size = its dtype's);
    ``ValueError`` for a dtype no AP may address (``fp4_e2m1`` packing is [later], reserved
    codes): the decoder's ``E_FORMAT``."""
    if enc.dtype not in ELEM_BYTES:
        raise ValueError(f"AP dtype must be one of {sorted(ELEM_BYTES)}, not {enc.dtype!r}")
    return AP(memory=enc.mem, start_partition=enc.start, num_partitions=enc.count,
              offset=enc.offset, elem_bytes=ELEM_BYTES[enc.dtype], dims=enc.dims)


def format_ap(ap: APEnc) -> str:
    dims = ",".join(f"{s}x{n}" for s, n in ap.dims)
    return f"{_MEMS[ap.mem]}.{ap.dtype}[{ap.start}:{ap.count}]@0x{ap.offset:x}{{{dims}}}"


def parse_ap(text: str) -> APEnc:
    m = _AP_RE.match(text)
    if not m:
        raise ValueError(f"access pattern must look like sbuf.bf16[0:16]@0x0{{1x16}}, "
                         f"not {text!r}")
    mem, dtype, start, count, off, dims = m.groups()
    if mem not in _MEM_CODES:
        raise ValueError(f"AP memory must be one of {sorted(_MEM_CODES)}, not {mem!r}")
    pairs = []
    for d in filter(None, dims.split(",")):
        s, _, n = d.partition("x")
        try:
            pairs.append((int(s), int(n)))
        except ValueError:
            raise ValueError(f"AP dimension must be <step>x<num>, not {d!r}") from None
    return APEnc(mem=_MEM_CODES[mem], start=int(start), count=int(count), dtype=dtype,
                 offset=int(off, 0), dims=tuple(pairs))


def _f32_text(v):
    return f"bits:0x{int(v):08x}" if isinstance(v, F32Bits) else repr(v)


def format_instr(ins: Instr) -> str:
    op = OPS_BY_NAME[ins.op]
    words = [".".join([ins.op] + [f for f in op.flags if f in ins.flags])]
    for slot in sorted(ins.aps):
        words.append(f"{slot}={format_ap(ins.aps[slot])}")
    for f in op.imm:
        if f.name in ins.imm:
            v = ins.imm[f.name]
            words.append(f"{f.name}=" + (_f32_text(v) if f.kind == "f32" else str(v)))
    if ins.wait is not None:
        words.append(f"wait=s{ins.wait[0]}>={ins.wait[1]}")
    if ins.post is not None:
        words.append(f"post=s{ins.post[0]}+{ins.post[1]}")
    if ins.irq:
        words.append("irq")
    return " ".join(words)


def _number(text, kind, what):
    try:
        if kind == "f32":
            if text.startswith("bits:"):
                return F32Bits(int(text[5:], 0))
            return float(text)
        return int(text, 0)
    except ValueError:
        raise ValueError(f"{what} must be a number, not {text!r}") from None


def parse_instr(line: str) -> Instr:
    """The :class:`Instr` of one assembly line (``ValueError`` naming what is wrong)."""
    words = line.split()
    if not words:
        raise ValueError("empty instruction")
    name, *flags = words[0].split(".")
    if name not in OPS_BY_NAME:
        raise ValueError(f"mnemonic must be one of {sorted(OPS_BY_NAME)}, not {name!r}")
    op = OPS_BY_NAME[name]
    aps, imm, wait, post, irq = {}, {}, None, None, False
    for w in words[1:]:
        key, eq, val = w.partition("=")
        if key == "irq" and not eq:
            irq = True
        elif key in ("ap0", "ap1", "ap2"):
            aps[key] = parse_ap(val)
        elif key == "wait":
            m = re.match(r"^s(\d+)>=(\w+)$", val)
            if not m:
                raise ValueError(f"wait must be s<sem>>=<value>, not {val!r}")
            wait = (int(m[1]), int(m[2], 0))
        elif key == "post":
            m = re.match(r"^s(\d+)\+(\w+)$", val)
            if not m:
                raise ValueError(f"post must be s<sem>+<inc>, not {val!r}")
            post = (int(m[1]), int(m[2], 0))
        elif key in op.imm_fields and eq:
            imm[key] = _number(val, op.imm_fields[key].kind, f"{name} immediate {key!r}")
        else:
            raise ValueError(f"{name} has no operand {w!r} (APs {list(op.aps)}, immediates "
                             f"{list(op.imm_fields)}, wait=, post=, irq)")
    ins = Instr(op=name, flags=frozenset(flags), wait=wait, post=post, irq=irq, aps=aps,
                imm=imm)
    encode(ins)     # every range check, with the field named
    return ins


def assemble(text: str) -> bytes:
    """Bytes of a program (``ValueError`` names the line)."""
    out = bytearray()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out += encode(parse_instr(line))
        except (ValueError, TypeError) as e:
            raise type(e)(f"line {n}: {e}") from None
    return bytes(out)


def disassemble(raw: bytes) -> str:
    """One line per 128-byte instruction; ``ValueError`` for a length that is not a multiple
    of 128 or a malformed instruction (naming its index)."""
    if len(raw) % INSTR_BYTES:
        raise ValueError(f"program length must be a multiple of {INSTR_BYTES}, not {len(raw)}")
    lines = []
    for i in range(0, len(raw), INSTR_BYTES):
        try:
            lines.append(format_instr(decode(raw[i:i + INSTR_BYTES])))
        except ValueError as e:
            raise ValueError(f"instruction {i // INSTR_BYTES}: {e}") from None
    return "\n".join(lines) + ("\n" if lines else "")
