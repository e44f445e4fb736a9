# SPDX-License-Identifier: Apache-2.0
"""Mutants of the RTL claimed equivalent to the original (``make mutate``, docs/mutation.md).

One entry per claim: the mutant's id (as printed in ``build/mutate/<block>.md``) -> a one-line
reason, with the mutant's readable key as a comment above it. Claimed mutants are still run on
every ``make mutate``: a claimed mutant that the tests kill is reported as "equivalence claim no
longer holds", a claim whose mutant no longer exists as "stale claim". Surviving claimed mutants
are left out of the kill fraction.
"""

EQUIVALENT = {
}
