# SPDX-License-Identifier: Apache-2.0
"""``python -m tb.campaign``: :func:`tb.campaign.cli.main`."""

import sys

from tb.campaign.cli import main

sys.exit(main())
