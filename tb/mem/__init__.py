# SPDX-License-Identifier: Apache-2.0
"""Testbench helpers of the memories (SBUF, PSUM, AP reader/writer): a Python model of SBUF and
random requester traffic driven through amaranth.sim."""
