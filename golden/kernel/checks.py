# SPDX-License-Identifier: Apache-2.0
"""Build-time checks of the kernel API: every operation gets a label (``tensor_tensor #3``:
the third ``tensor_tensor`` call of the kernel) that its instructions keep in the built
program, and what the config already decides (operand shapes, enabled formats, format pairs,
sparse patterns, SBUF/PSUM capacity) is checked when the operation is recorded, so a bad
kernel raises ``ValueError``/``TypeError`` naming the operation, the operand and the rule
before anything runs.

Rules (the engines' decoders, checked here first):

- vector and scalar engine operands: every tile's format is ``fp32`` or one of
  ``cfg.formats`` (``golden.vector.vector_formats``), and the operands an instruction reads
  and writes have the same partition count and element count (``golden.vector.check``'s
  ``E_SHAPE`` rule; a per-partition ``[parts, 1]`` operand only needs the partitions);
- ``tensor_reduce``: a reduction the engine has (add, max, min: ``rtl.isa.REDUCE_OPS``);
- every operand has an AP slot in the opcode's encoding (``rtl.isa.OPS_BY_NAME[op].aps``:
  ``tensor_reduce`` and ``max8`` have no ``src1``, so a tile ``pre_operand`` is refused);
- tensor engine sources: a format of ``cfg.formats``, and the stationary / moving pair
  allowed by :func:`golden.fma_chain.check_pair` (fp32/tf32 only with fp32/tf32); the
  stationary's M (its elements) at most ``cfg.pe_cols`` (its K, partitions, fit the array's
  rows as every tile does);
- sparse matmuls: a pattern of ``cfg.sparsity`` (``golden.sparse.pattern_params``), and the
  weights' and moving formats an allowed pair;
- SBUF / PSUM: every tile fits (an activation table's tile is named ``table_<func>``).
"""

from __future__ import annotations

import functools

__all__ = ["operation", "check_formats", "check_same_shape", "check_parts",
           "check_tensor_formats", "check_pair_names", "check_stationary_cols",
           "check_reduce_op", "check_slots"]


def operation(name):
    """Decorator of a :class:`golden.kernel.Kernel` method that records operation ``name``:
    its instructions carry the label ``"{name} #{n}"`` (``n``: 1 for the kernel's first
    ``name``), and a ``ValueError``/``TypeError`` it raises is prefixed with the label. An
    operation called from inside another (``activation`` loading its table) takes the outer
    label."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            if self._op_label is not None:
                return fn(self, *args, **kwargs)
            n = self._op_counts[name] = self._op_counts.get(name, 0) + 1
            self._op_label = label = f"{name} #{n}"
            try:
                return fn(self, *args, **kwargs)
            except (ValueError, TypeError) as e:
                if str(e).startswith(label):
                    raise
                raise type(e)(f"{label}: {e}") from None
            finally:
                self._op_label = None
        return wrapper
    return deco


def check_formats(cfg, engine, **tiles):
    """``ValueError`` unless each tile's format is one the vector / scalar engine accepts
    (``fp32`` or one of ``cfg.formats``)."""
    ok = ("fp32",) + tuple(f for f in cfg.formats if f != "fp32")
    for role, t in tiles.items():
        if t is not None and t.dtype not in ok:
            raise ValueError(f"{role} {t.name} format {t.dtype!r} is not enabled by config "
                             f"{cfg.name!r}: the {engine} engine takes {ok}")


def check_tensor_formats(cfg, stationary, moving=None):
    """``ValueError`` unless the tensor engine's sources are formats of ``cfg.formats`` and
    form an allowed pair (:func:`golden.fma_chain.check_pair`)."""
    for role, t in (("stationary", stationary), ("moving", moving)):
        if t is not None and t.dtype not in cfg.formats:
            raise ValueError(f"{role} {t.name} format {t.dtype!r} is not enabled by config "
                             f"{cfg.name!r}: the tensor engine takes {tuple(cfg.formats)}")
    if moving is not None:
        check_pair_names(cfg, f"stationary {stationary.name}", stationary.dtype,
                         f"moving {moving.name}", moving.dtype)


def check_pair_names(cfg, s_role, s_fmt, m_role, m_fmt):
    """``ValueError`` unless formats ``s_fmt`` (stationary) and ``m_fmt`` (moving) of the
    config form an allowed tensor engine pair (:func:`golden.fma_chain.check_pair`)."""
    from golden.fma_chain import check_pair
    try:
        check_pair(cfg.fmt(s_fmt), cfg.fmt(m_fmt))
    except ValueError:
        raise ValueError(f"{s_role} ({s_fmt}) and {m_role} ({m_fmt}) are a forbidden format "
                         f"pair: fp32/tf32 pair only with fp32/tf32") from None


def check_stationary_cols(cfg, role, t):
    """``ValueError`` unless the stationary tile ``t``'s M (its elements) fits the array's
    ``cfg.pe_cols`` columns."""
    if t.elems > cfg.pe_cols:
        raise ValueError(f"{role} {t.name} has M = {t.elems} elements per partition: the "
                         f"stationary's M must be <= pe_cols = {cfg.pe_cols} (one load fills "
                         f"the array's columns)")


def check_reduce_op(op):
    """``ValueError`` unless ALU operation ``op`` (name or code) is a reduction the vector
    engine has (``rtl.isa.REDUCE_OPS``: add, max, min)."""
    from golden.kernel.types import alu_code
    from rtl.isa import ALU_NAMES, REDUCE_OPS
    if alu_code(op) not in REDUCE_OPS:
        raise ValueError(f"op must be one of {[ALU_NAMES[o] for o in REDUCE_OPS]} (the "
                         f"reductions tensor_reduce has), not {op!r}")


def check_same_shape(**tiles):
    """``ValueError`` unless every given tile has the first one's ``[parts x elems]``."""
    items = [(r, t) for r, t in tiles.items() if t is not None]
    r0, t0 = items[0]
    for role, t in items[1:]:
        if (t.parts, t.elems) != (t0.parts, t0.elems):
            raise ValueError(f"{role} {t.name} [{t.parts} x {t.elems}] must have {r0} "
                             f"{t0.name}'s shape [{t0.parts} x {t0.elems}] (the engine's "
                             f"operands share partitions and elements)")


def check_parts(ref_role, ref, **tiles):
    """``ValueError`` unless every given tile has ``ref``'s partition count (a per-partition
    operand, or a reduction's ``[parts, 1]`` destination)."""
    for role, t in tiles.items():
        if t is not None and t.parts != ref.parts:
            raise ValueError(f"{role} {t.name} has {t.parts} partitions, {ref_role} {ref.name} "
                             f"{ref.parts}: they must be equal")


def check_slots(opname, **operands):
    """``ValueError`` unless each given operand (``slot=(role, tile)``) has its AP slot in the
    encoding of ``opname`` (:data:`rtl.isa.OPS_BY_NAME`)."""
    from rtl.isa import OPS_BY_NAME
    have = OPS_BY_NAME[opname].aps
    for slot, (role, t) in operands.items():
        if t is not None and slot not in have:
            raise ValueError(f"{role} {t.name} must be a number, not a tile: {opname} has no "
                             f"{slot} operand slot (its APs are {sorted(have)})")
