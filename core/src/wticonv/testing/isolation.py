"""The conformance kit in isolation: only the solver under test and the built-in solvers.

A plugin's tests that use the default handle see every installed plugin: another
plugin's faults then show up as warnings in them (and fail a ``-W error`` run), and its
solvers take part in every selection. :func:`isolated_handle` builds a handle whose
registry holds only

- the solvers under test: installed ones named by id (loaded through their entry points,
  with their distribution and version), or solver objects registered in-process, without
  installing anything (the ``register`` path for unit tests);
- the built-in solvers (:data:`wticonv.contract.registry.BUILT_IN_DISTRIBUTIONS`), which the kit and
  the reference compare against, unless ``built_ins=False``.

``check_solver(..., isolated=True)`` and ``parametrize_with_checks(..., isolated=True)``
use it; passing a solver object instead of an id implies it. ``WTICONV_DISABLE_SOLVERS``
does not apply inside (nothing there is disabled).
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["isolated_registry", "isolated_handle", "solver_key"]


def solver_key(solver: Any) -> str:
    """The solver id of ``solver``: the string itself, or a solver object's ``solver_id``."""
    if isinstance(solver, str):
        return solver
    sid = getattr(solver, "solver_id", None)
    if not isinstance(sid, str):
        from wticonv.errors import PluginError

        raise PluginError(f"{solver!r:.60} is neither a solver id nor a solver object (it has "
                          "no str 'solver_id' attribute)")
    return sid


def _installed(solver_id: str, full) -> Any:
    from wticonv.errors import SolverNotFoundError

    try:
        return full.get(solver_id)
    except SolverNotFoundError as e:
        held = [f"{q.entry_point} ({q.distribution}): {q.reason}" for q in full.quarantined
                if q.solver_id in ("", solver_id)]
        if held:
            raise SolverNotFoundError(f"{e}; quarantined plugins (see `wticonv plugins`): "
                                      + "; ".join(held)) from None
        raise


def isolated_registry(*solvers: Any, built_ins: bool = True):
    """A :class:`~wticonv.contract.registry.SolverRegistry` of only ``solvers`` (ids of installed
    solvers, or solver objects registered in-process) and, with ``built_ins``, the built-in
    solvers.

    Raises
    ------
    SolverNotFoundError
        If an id names no installed solver (with the quarantine reason, where it was
        refused at load time).
    PluginError
        If a solver object does not honour the contract (as registration checks it), or
        two of ``solvers`` have the same id.
    """
    from wticonv.contract.ownership import norm_dist
    from wticonv.contract.registry import BUILT_IN_DISTRIBUTIONS, SolverRegistry

    reg = SolverRegistry(load_entry_points=False, disabled=(), trace=None)
    ids = [s for s in solvers if isinstance(s, str)]
    objects = [s for s in solvers if not isinstance(s, str)]
    keep = []
    if ids or built_ins:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # other plugins' faults are not ours
            full = SolverRegistry(disabled=())
        keep = [_installed(sid, full) for sid in ids]
        if built_ins:
            own = {norm_dist(d) for d in BUILT_IN_DISTRIBUTIONS}
            keep += [e for sid, e in sorted(full.solvers.items())
                     if norm_dist(e.distribution) in own and sid not in ids]
    under_test = {solver_key(o) for o in objects}
    for e in keep:
        if e.solver_id not in under_test:
            reg.register(e.obj, e.distribution, e.version, e.entry_point)
    for obj in objects:
        reg.register(obj)
    return reg


def isolated_handle(*solvers: Any, device=None, built_ins: bool = True):
    """A :class:`~wticonv.Handle` on ``device`` (a Device, or a Handle whose device to
    use; default: the default device) whose registry is :func:`isolated_registry`.

    Example, for a solver that is not installed::

        from wticonv.testing import check_solver, isolated_handle
        h = isolated_handle(MySolver())
        check_solver("my.solver", h)          # or simply check_solver(MySolver())
    """
    from wticonv.handle import Handle, get_handle

    if device is None:
        device = get_handle().device
    device = getattr(device, "device", device)      # a Handle: its device
    return Handle(device, isolated_registry(*solvers, built_ins=built_ins))
