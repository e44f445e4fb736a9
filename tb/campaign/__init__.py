# SPDX-License-Identifier: Apache-2.0
"""Verification campaigns (``make campaign KIND=fuzz|mutate|full|activation``, docs/campaigns.md).

A campaign is a list of tasks, each a pure function of (campaign seed, task index) returning
JSON (:func:`tb.campaign.core.run_task`), run on this process, a local process pool or Ray
(:mod:`tb.campaign.backends`), with results, resume and the summary in
``build/campaign/<kind>-<seed>/`` (:mod:`tb.campaign.run`).
"""
