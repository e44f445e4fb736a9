# SPDX-License-Identifier: Apache-2.0
"""Tensor engine: weight-stationary systolic PE array, PSUM and their control.

``pe.py`` one PE, ``array.py`` the grid with skew / de-skew, ``psum.py`` the PSUM banks,
``engine.py`` command dispatch and streams, ``layouts.py`` the payload layouts.
"""
