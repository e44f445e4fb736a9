# SPDX-License-Identifier: Apache-2.0
"""Inside a cocotb module: the config and parameters the runner passed (see ``tb.runner``)."""

import json
import os

from rtl.config import CoreConfig


def config() -> CoreConfig:
    """The :class:`CoreConfig` the design under test was built from."""
    d = dict(json.loads(os.environ["NC_CONFIG"]))
    d.pop("derived", None)
    # JSON has no tuples: every list field of the config is a tuple (sparse_patterns may be None)
    for k, v in d.items():
        if isinstance(v, list):
            d[k] = tuple(v)
    return CoreConfig(**d)


def params() -> dict:
    """The JSON parameters given to ``SimBuild.run(params=...)``."""
    return json.loads(os.environ.get("NC_PARAMS", "{}"))
