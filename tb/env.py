# SPDX-License-Identifier: Apache-2.0
"""Inside a cocotb module: the config and parameters the runner passed (see ``tb.runner``)."""

import json
import os

from rtl.config import CoreConfig


def config() -> CoreConfig:
    """The :class:`CoreConfig` the design under test was built from."""
    d = dict(json.loads(os.environ["NC_CONFIG"]))
    d.pop("derived", None)
    for k in ("formats", "mx_formats"):
        d[k] = tuple(d[k])
    return CoreConfig(**d)


def params() -> dict:
    """The JSON parameters given to ``SimBuild.run(params=...)``."""
    return json.loads(os.environ.get("NC_PARAMS", "{}"))
