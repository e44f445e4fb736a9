# SPDX-License-Identifier: Apache-2.0
"""The Scalar (activation) engine's function unit and its loadable tables (``docs/scalar.md``)."""

from golden.activation.fit import *  # noqa: F401,F403  (interim: the module is split next)
from golden.activation.fit import TABLE_HEADER_WORDS, table_load, table_size_ok, table_words  # noqa: F401
from golden.activation.fit import _build  # noqa: F401
