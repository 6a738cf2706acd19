"""The conformance kit: what tells a plugin author whether a solver honours the contract.

- :func:`check_solver` runs every check (:data:`CHECKS`, documented in
  :mod:`wticonv.testing.checks` and docs/conformance.md) on one installed solver and
  returns (or raises) a report; :func:`parametrize_with_checks` makes each (solver, check)
  pair its own pytest test, ids ``<solver>-<check>``.
- Isolation (:mod:`wticonv.testing.isolation`): ``isolated=True``, or a solver object
  instead of an id, checks a solver with only the built-in solvers beside it, so that
  other installed plugins' faults never show up in its tests; :func:`isolated_handle`
  makes such a handle for an author's own tests.
- The pytest plugin (entry point ``pytest11``, :mod:`wticonv.testing.plugin`) adds the
  ``wticonv_handle`` fixture; it imports nothing until used.
- The problem corpus: :data:`EDGE_SHAPES` names small forward problems at the edges of the
  convolution's definition (1x1 pictures with padding, padding larger than the filter,
  stride larger than the filter and not dividing the picture, dilation with groups,
  outputs of size 1, K or C of 1, non-square and even filters...); :func:`problems` is a
  hypothesis strategy of small valid problems in every direction. Use them against
  :func:`wticonv.problem.reference`.
- Large problems: :mod:`wticonv.testing.launches` plans a solver's launches for any size
  on a stand-in device (nothing allocated or run) and checks each launch against its
  kernel as compiled (:mod:`wticonv.testing.clsource`): argument types and ranges, ids
  that fit their integers (docs/reliability.md).
"""

from __future__ import annotations

from wticonv.testing.corpus import EDGE_SHAPES, problems

__all__ = ["EDGE_SHAPES", "problems", "check_solver", "parametrize_with_checks", "CHECKS",
           "CheckFailure", "SolverReport", "default_corpus", "isolated_handle",
           "isolated_registry"]

from wticonv.testing.checks import CHECKS
from wticonv.testing.failure import CheckFailure
from wticonv.testing.isolation import isolated_handle, isolated_registry
from wticonv.testing.kit import SolverReport, check_solver, default_corpus, parametrize_with_checks
