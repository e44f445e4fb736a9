# SPDX-License-Identifier: Apache-2.0
"""Core-level blocks shared by the engines: ``semaphores.py`` the semaphore file."""
