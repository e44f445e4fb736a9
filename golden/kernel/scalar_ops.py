# SPDX-License-Identifier: Apache-2.0
"""The kernel builder's scalar engine operations: table loads and activations."""

from __future__ import annotations

from golden.kernel.types import nonzero_imm
from rtl.isa import Instr

from golden.kernel.checks import check_formats, check_parts, check_same_shape, operation

__all__ = ["ScalarOps"]


class ScalarOps:
    """Scalar engine operations of :class:`golden.kernel.Kernel`."""

    @operation("load_table")
    def load_table(self, name, queue=None):
        """Load function ``name``'s table into the scalar engine, unless it holds it: the image
        (``golden.isasim.table_words``, element-major over every partition) as a DRAM tensor,
        DMA to a temporary SBUF tile (on ``queue``, as :meth:`load`), ``act_table_load``, the
        tile freed."""
        from golden import activation as ga
        from golden.isasim import table_words
        if name not in ga.FUNCTION_IDS:
            raise ValueError(f"activation func must be one of {ga.FUNCTIONS}, not {name!r}")
        if self._act_table == name:
            return
        P = self.cfg.partitions
        img = table_words(ga.table(name), P)
        cols = img.shape[1]
        key = f"__table_{name}"
        t = self.tensors.get(key) or self.dram_tensor(key, dtype="fp32", codes=img)
        try:
            tile = self.sbuf_tile(P, cols, "fp32", f"table_{name}")
        except ValueError as e:
            raise ValueError(f"{e}: the {name} activation table loads through a temporary "
                             f"SBUF tile of {cols} words per partition (call "
                             f"load_table({name!r}) before allocating the big tiles)") from None
        self.load(tile, t, queue=queue)
        fid = ga.FUNCTION_IDS[name]
        self._emit("act", "act", [tile], [],
                   lambda w_, p: Instr(op="act_table_load", wait=w_, post=p,
                                       aps={"ap1": tile.ap()}, imm={"func": fid}))
        self.free(tile)
        self._act_table = name

    @operation("activation")
    def activation(self, dst, src, func, scale=1.0, bias=0.0, bias_tile=None, scale_tile=None,
                   reduce=None, sr=False):
        """``dst = f(src * scale + bias)`` on the scalar engine (``func`` a name of
        ``golden.activation.FUNCTIONS``; its table is loaded first when the engine holds
        another). ``bias_tile`` / ``scale_tile``: a per-partition ``[parts, 1]`` tile instead
        of the immediate (one AP slot: both from the same tile, if both). ``reduce``: ``None``,
        ``"reset"``, ``"reduce"`` or ``"reset_reduce"`` (the engine's accumulators)."""
        from golden import activation as ga
        per = bias_tile if bias_tile is not None else scale_tile
        check_formats(self.cfg, "scalar", dst=dst, src=src, per_partition=per)
        check_same_shape(dst=dst, src=src)
        check_parts("src", src, per_partition=per)
        self.load_table(func)
        if bias_tile is not None and scale_tile is not None and bias_tile != scale_tile:
            raise ValueError("activation: bias_tile and scale_tile share the one AP slot ap2")
        cmd = {None: 0, "reset": 1, "reduce": 2, "reset_reduce": 3}
        if reduce not in cmd:
            raise ValueError(f"activation reduce must be one of {list(cmd)}, not {reduce!r}")
        imm = {"func": ga.FUNCTION_IDS[func], "reduce_cmd": cmd[reduce],
               "bias_ap": int(bias_tile is not None), "scale_ap": int(scale_tile is not None),
               "scale": scale, "bias": bias}
        imm = {k: v for k, v in imm.items() if nonzero_imm(v)}
        aps = {"ap0": dst.ap(), "ap1": src.ap()}
        if per is not None:
            aps["ap2"] = per.ap()
        self._emit("act", "act", [src] + ([per] if per is not None else []), [dst],
                   lambda w, p: Instr(op="activation", wait=w, post=p, aps=aps, imm=imm,
                                      flags=frozenset({"sr"} if sr else ())))

