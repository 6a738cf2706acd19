"""Layer 6, selection: ranking the solvers of a problem without running anything.

- :mod:`~wticonv.selection.verdicts`: :class:`Verdict` (one solver's answers) and
  :class:`Selection` (all of them, and the choice);
- :mod:`~wticonv.selection.finddb`, :mod:`~wticonv.selection.perfdb`,
  :mod:`~wticonv.selection.calibration`: the readers of the find-db, the perf-db and the
  calibration, which turn stored records into verdict fields;
- :mod:`~wticonv.selection.ranking`: :func:`select`, MIOpen's immediate-mode fallback
  (largest WTI, then smallest workspace, then solver id).

Imports the contract, the runtime and the layers below. The measuring layer above writes
the records these modules read.
"""

from wticonv.selection.ranking import select, workspace_limit_arg
from wticonv.selection.verdicts import Selection, Verdict

__all__ = ["Selection", "Verdict", "select", "workspace_limit_arg"]
