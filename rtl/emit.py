# SPDX-License-Identifier: Apache-2.0
"""The one place that turns components into Verilog and writes build outputs.

Simulation (``tb.runner``), synthesis (``synth``) and ``make verilog`` all call this module;
nothing else calls ``amaranth.back.verilog``.

* :class:`Design`: a top component plus modules it instantiates by name (a PE converted once
  and instantiated N x N times), emitted together.
* :func:`verilog_text`: one component as a Verilog module; constant interface members (the
  ``ready`` of an ``always_ready`` stream) are not ports.
* :func:`rtlil_text`: a formal harness as RTLIL (the bounded checks of ``tb/*/formal.py``).
* :func:`write_if_changed`: build outputs are rewritten only when their text changes, so
  Verilator and make rebuild only what changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Design", "as_design", "port_values", "verilog_text", "rtlil_text", "emit_verilog",
           "emit_rtlil", "write_if_changed", "write_design"]


@dataclass
class Design:
    """A block: an Amaranth top component plus separately emitted modules.

    Parameters
    ----------
    top : amaranth.lib.wiring.Component
        The block itself.
    modules : dict of str to Component
        Modules that ``top`` instantiates by name with ``amaranth.hdl.Instance``. Each is
        emitted once as its own Verilog module (yosys synthesizes it once, Verilator compiles
        it once).
    pragmas : dict of str to str
        Optional Verilator metacomment per module name, inserted after its port list
        (``"hier_block"``, ``"no_inline_module"``).
    """

    top: object
    modules: dict = field(default_factory=dict)
    pragmas: dict = field(default_factory=dict)


def as_design(obj):
    """``obj`` if it is a :class:`Design`; a ``(top, modules)`` pair or a component otherwise."""
    if isinstance(obj, Design):
        return obj
    if isinstance(obj, tuple) and len(obj) == 2:
        return Design(top=obj[0], modules=dict(obj[1]))
    return Design(top=obj)


def port_values(component):
    """``[(value, is_input)]``: the component's signature members in signature order, as
    Amaranth values, constant members (e.g. ``always_ready`` stream ``ready``) left out."""
    from amaranth.hdl import Const, Value
    from amaranth.lib.wiring import In
    out = []
    for _path, member, value in component.signature.flatten(component):
        v = Value.cast(value)
        if not isinstance(v, Const):
            out.append((v, member.flow == In))
    return out


def verilog_text(component, name, *, pragma=None):
    """Verilog of ``component`` as module ``name``; ``pragma``: a Verilator metacomment put
    after the port list."""
    from amaranth.back import verilog
    ports = [v for v, _ in port_values(component)]
    text = verilog.convert(component, name=name, ports=ports, emit_src=False)
    if pragma:
        head = f"module {name}("
        i = text.index(head)
        j = text.index(";\n", i) + 2
        text = text[:j] + f"  /*verilator {pragma}*/\n" + text[j:]
    return text


def rtlil_text(elaboratable, name, *, ports=()):
    """RTLIL of ``elaboratable`` as module ``name`` with ``ports`` (default none: a formal
    harness, a top whose ``Assert``/``Assume`` cells yosys keeps)."""
    from amaranth.back import rtlil
    return rtlil.convert(elaboratable, name=name, ports=list(ports), emit_src=False)


def _emit(design, top_name, text):
    """``text(component, name, pragma)`` of the top (as ``top_name``) then of every named
    module of ``design``, joined."""
    design = as_design(design)
    parts = [text(design.top, top_name, None)]
    for name, comp in sorted(design.modules.items()):
        parts.append(text(comp, name, design.pragmas.get(name)))
    return "\n".join(parts)


def emit_verilog(design, top_name):
    """Verilog text of ``design`` (a :class:`Design` or what :func:`as_design` takes) with its
    top module called ``top_name``, its named modules after it."""
    return _emit(design, top_name, lambda c, n, pragma: verilog_text(c, n, pragma=pragma))


def emit_rtlil(design, top_name):
    """RTLIL text of ``design`` (as :func:`emit_verilog`, without Verilator pragmas): the
    netlist Amaranth hands to yosys, before ``write_verilog``. A memory keeps its one write
    port with per-bit enables here; the Verilog back end splits a byte-enabled port into one
    write statement per byte lane, which yosys' Verilog front end turns back into that many
    ports (the default SBUF's 256 lanes per bank took it more than 14 minutes)."""
    return _emit(design, top_name, lambda c, n, _pragma: rtlil_text(
        c, n, ports=[v for v, _ in port_values(c)]))


def write_if_changed(path, text):
    """Write ``text`` to ``path`` unless it already holds exactly that; True if written.
    The write is atomic (a temporary file renamed), so parallel readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text() == text:
        return False
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def write_design(design, top_name, out_dir):
    """Write ``design`` as one file per module under ``out_dir`` (only files that changed):
    ``<top_name>.v`` and ``<module>.v``. Returns ``(top path, [module paths])``."""
    design = as_design(design)
    out_dir = Path(out_dir)
    top = out_dir / f"{top_name}.v"
    write_if_changed(top, verilog_text(design.top, top_name))
    mods = []
    for name, comp in sorted(design.modules.items()):
        p = out_dir / f"{name}.v"
        write_if_changed(p, verilog_text(comp, name, pragma=design.pragmas.get(name)))
        mods.append(p)
    return top, mods
