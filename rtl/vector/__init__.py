# SPDX-License-Identifier: Apache-2.0
"""Vector engine (docs/vector.md): elementwise, tensor-scalar, reduce, copy/cast, memset and
select over SBUF/PSUM access patterns, FP32 inside.

``isa.py`` the decoded instruction, ``frame.py`` the reusable lanes frame (readers -> widen ->
function unit -> convert -> writer), ``alu.py`` one lane's ALU, ``fu.py`` the two-stage
function unit with the interleaved reduction, ``engine.py`` decode, checks and completion.
"""
