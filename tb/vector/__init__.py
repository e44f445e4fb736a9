# SPDX-License-Identifier: Apache-2.0
"""Vector-engine test rig and driver (amaranth.sim)."""
