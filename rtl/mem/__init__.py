# SPDX-License-Identifier: Apache-2.0
"""Memories and their access paths (docs/memory.md): ``ap.py`` the access-pattern address
generator every engine uses to walk SBUF or PSUM."""
