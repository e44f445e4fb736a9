# SPDX-License-Identifier: Apache-2.0
"""The one interface vocabulary of the core's blocks: a pipeline with stream ports.

A *pipeline* takes payloads on ``i`` and produces payloads on ``o``, both
:class:`amaranth.lib.stream` interfaces whose payloads are ``StructLayout`` views. Its
:class:`PipelineSignature` carries the layouts and the latency, so a testbench, a benchmark or
an enclosing block reads them from ``Unit.Signature(cfg, ...)`` without building (or
elaborating) the unit::

    sig = FMA.Signature(cfg)              # no Elaboratable is created
    sig.in_layout, sig.out_layout, sig.latency

Two kinds of input:

* ``ready=False`` (the floating-point units): one payload per cycle, no back-pressure; ``i.ready``
  and ``o.ready`` are the constant 1 (``always_ready``). ``o.valid`` is ``i.valid`` delayed by
  ``latency`` cycles, in order.
* ``ready=True`` (e.g. the PSUM unit): ``i.ready`` is a real signal; a payload is taken in a
  cycle with ``i.valid & i.ready``.

The output is always ready by default (the consumer never stalls the pipeline). A producer of
a stream its consumer may stall (``out_ready=True``, e.g. the access-pattern generator of
``rtl/mem/ap.py``) has a real ``o.ready``: a payload leaves in a cycle with
``o.valid & o.ready`` and is held until then.

Blocks that meet with equal payloads are joined with :func:`amaranth.lib.wiring.connect`.
"""

from __future__ import annotations

from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["PipelineSignature", "Pipeline", "signature_attr"]


class PipelineSignature(wiring.Signature):
    """Signature of a pipeline: ``i`` (stream in), optionally ``o`` (stream out), extra members.

    Parameters
    ----------
    in_layout : ShapeLike
        Payload of ``i``.
    out_layout : ShapeLike or None
        Payload of ``o``; ``None`` for a sink (no ``o`` member).
    latency : int
        Cycles from a payload taken on ``i`` to its result on ``o`` (or, for a sink, to its
        effect, e.g. a memory write).
    ready : bool
        ``True``: ``i`` has back-pressure. ``False``: ``i.ready`` is the constant 1.
    out_ready : bool
        ``True``: ``o`` has back-pressure (a real ``o.ready``). ``False`` (default):
        ``o.ready`` is the constant 1.
    members : dict, optional
        Further members (e.g. a read port, status outputs).

    Members
    -------
    i : In(stream.Signature(in_layout, always_ready=not ready))
    o : Out(stream.Signature(out_layout, always_ready=not out_ready))
        Present unless ``out_layout`` is ``None``; the consumer is always ready unless
        ``out_ready``.
    """

    def __init__(self, in_layout, out_layout=None, *, latency, ready=False, out_ready=False,
                 members=None):
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 0:
            raise ValueError(f"latency must be an integer >= 0, not {latency!r}")
        self.in_layout = in_layout
        self.out_layout = out_layout
        self.latency = latency
        self.ready = bool(ready)
        self.out_ready = bool(out_ready)
        ms = {"i": In(stream.Signature(in_layout, always_ready=not ready))}
        if out_layout is not None:
            ms["o"] = Out(stream.Signature(out_layout, always_ready=not out_ready))
        ms.update(members or {})
        super().__init__(ms)


def signature_attr(name, doc=None):
    """A read-only component property forwarding to ``self.signature.<name>`` (a layout or a
    latency the nested ``Signature`` class computed from the config)."""
    return property(lambda self: getattr(self.signature, name),
                    doc=doc or f"``self.signature.{name}``.")


class Pipeline(wiring.Component):
    """Base class of a component whose signature is a :class:`PipelineSignature`.

    Subclasses define a nested ``Signature(PipelineSignature)`` class taking the same
    configuration arguments as the component, and pass an instance of it to
    ``super().__init__``. The properties below forward to it.
    """

    in_layout = signature_attr("in_layout", "Payload layout of ``i``.")
    out_layout = signature_attr("out_layout", "Payload layout of ``o``.")
    latency = signature_attr("latency", "Cycles from ``i`` to ``o`` (see "
                                        ":class:`PipelineSignature`).")
