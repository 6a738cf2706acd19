"""Layer 4, the plugin contract: what a solver is and how it is found.

- :mod:`~wticonv.contract.hookspecs`: the pluggy hookspecs (``is_applicable``,
  ``is_dynamic``, ``get_wti``, ``workspace_size``, ``run``, ``perf_configs``), the
  :class:`Decline` answer, ``WTI_UNKNOWN`` and the :class:`DeviceLike` protocol the hooks
  receive;
- :mod:`~wticonv.contract.answers`: what a valid answer of each hook is, and a solver's
  declared ``tolerance`` and ``max_wti``;
- :mod:`~wticonv.contract.ownership`: which distribution owns a solver-id prefix;
- :mod:`~wticonv.contract.registry`: loading solver plugins from entry points, quarantine,
  tracing.

Imports the problem model and the database below it; never a device (hooks receive one).
"""

from wticonv.contract.answers import DEFAULT_TOLERANCE, declared_tolerance
from wticonv.contract.hookspecs import WTI_UNKNOWN, Decline, hookimpl
from wticonv.contract.protocols import DeviceLike

__all__ = ["DEFAULT_TOLERANCE", "WTI_UNKNOWN", "Decline", "DeviceLike", "declared_tolerance",
           "hookimpl"]
