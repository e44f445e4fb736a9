# SPDX-License-Identifier: Apache-2.0
"""What the dense (:mod:`golden.tensor`) and the sparse (:mod:`golden.sparse`) tensor models
share: the FMA chain of one output element, the dense-format and pair rules, the config check."""

from __future__ import annotations

import numpy as np

from golden.arith import fma_fp32_f64
from rtl.config import CoreConfig, FPFormat

__all__ = ["FP32_NEG_ZERO", "WIDE_FORMATS", "check_tensor_cfg", "resolve_dense_format",
           "check_pair", "fma_chain"]

#: The chain's initial partial sum: FP32 -0.0, the additive identity under RNE.
FP32_NEG_ZERO = 0x80000000

#: Formats that pair only with each other (Trainium rule: FP32/TF32 are not mixed with narrower).
WIDE_FORMATS = ("fp32", "tf32")


def check_tensor_cfg(cfg):
    """``TypeError`` unless ``cfg`` is an :class:`rtl.config.CoreConfig`."""
    if not isinstance(cfg, CoreConfig):
        raise TypeError(f"cfg must be an rtl.config.CoreConfig, not {cfg!r}")


def resolve_dense_format(fmt, cfg, name="fmt"):
    """The :class:`FPFormat` of an enabled dense format given by name or object.

    ``ValueError`` naming ``name`` and ``cfg.formats`` when it is not enabled in ``cfg`` (an
    ``FPFormat`` object must equal the config's format of that name, e.g. ``cfg.cfp8``).
    """
    check_tensor_cfg(cfg)
    if isinstance(fmt, FPFormat):
        nm = fmt.name
        if nm not in cfg.formats or cfg.fmt(nm) != fmt:
            raise ValueError(f"{name} must be one of the enabled formats {cfg.formats} "
                             f"(cfg {cfg.name!r}), not {fmt!r}")
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"{name} must be a format name (str) or an rtl.config.FPFormat, "
                        f"not {fmt!r}")
    if fmt not in cfg.formats:
        raise ValueError(f"{name} must be one of the enabled formats {cfg.formats} "
                         f"(cfg {cfg.name!r}), not {fmt!r}")
    return cfg.fmt(fmt)


def check_pair(fmt_s, fmt_x):
    """``ValueError`` unless the pair is allowed: fp32/tf32 pair only with fp32/tf32."""
    ws, wx = fmt_s.name in WIDE_FORMATS, fmt_x.name in WIDE_FORMATS
    if ws != wx:
        raise ValueError(f"fmt_s and fmt_x: fp32/tf32 pair only with fp32/tf32, "
                         f"not ({fmt_s.name!r}, {fmt_x.name!r})")


def fma_chain(products):
    """Run the FMA chain over an iterable of exact float64 product planes [M, N]."""
    p = None
    for prod in products:
        if p is None:
            p = np.full(prod.shape, FP32_NEG_ZERO, dtype=np.uint32)
        p = fma_fp32_f64(p, prod)
    return p
