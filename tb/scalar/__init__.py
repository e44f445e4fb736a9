# SPDX-License-Identifier: Apache-2.0
"""Testbench helpers of the Scalar (activation) engine."""
