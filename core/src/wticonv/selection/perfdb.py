"""The perf-db's reader: which perf config immediate mode gives a tunable solver.

``wticonv tune`` (:mod:`wticonv.measuring.tune`) writes the records; selection reads them
here. A record counts only when its solver version is the installed one and the solver
still offers its perf config; a stale record is ignored with one warning, one naming a
config the solver no longer offers is deleted. Where the user's perf-db holds no record of
a (problem, solver), a system database's (:mod:`wticonv.db.system`) is used, under the
same checks (a system database is read-only: its bad records are passed over, with a
note, never deleted).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from wticonv.db.records import valid_perf_config
from wticonv.db.system import system_view
from wticonv.errors import SolverWarning, WticonvError

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem

__all__ = ["DEFAULT_PERF_CONFIG", "offered_perf_configs", "stored_perf_config",
           "perf_record_check"]


#: The name that forces a solver's own default perf config (``perf_config=None`` in its
#: hooks) where the perf-db may hold another; no solver may offer a config of this name.
DEFAULT_PERF_CONFIG = "default"


_warned_stale: set[tuple[str, str, str]] = set()


def offered_perf_configs(registry, solver_id: str, problem: ConvProblem, device,
                         workspace_limit: int | None) -> list[str]:
    """The perf configs a tunable solver lists for ``problem``, checked.

    Raises
    ------
    ValueError
        If the ``perf_configs`` hook returns something other than a list of distinct valid
        names (non-empty printable strings of at most 100 characters).
    """
    offered = registry.call(solver_id, "perf_configs", problem=problem, device=device,
                            workspace_limit=workspace_limit)
    if offered is None:
        return []
    if (not isinstance(offered, (list, tuple)) or not all(map(valid_perf_config, offered))
            or len(set(offered)) != len(offered) or DEFAULT_PERF_CONFIG in offered):
        raise ValueError(f"perf_configs returned {offered!r:.200}, not a list of distinct "
                         "non-empty printable names of at most 100 characters (other than "
                         f"{DEFAULT_PERF_CONFIG!r})")
    return list(offered)


def stored_perf_config(registry, solver_id: str, problem: ConvProblem, device,
                       workspace_limit: int | None) -> tuple[str | None, str, str]:
    """The perf config immediate mode gives ``solver_id`` on ``problem``: the user's
    perf-db's when it holds a valid record, else a system database's, else None (the
    solver's default); a note saying why a record was not used ("" when there was none,
    or it was used); and where the config came from (``"perf-db"``, ``"system perf-db"``,
    or "" for the default)."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return None, "", ""
    try:
        rec = store.get_perf_records(device.key).get((problem.key, solver_id))
    except WticonvError:
        return None, "", ""
    if rec is None:
        return _system_perf_config(registry, solver_id, problem, device, workspace_limit)
    version, config = rec[0], rec[1]
    installed = registry.solvers[solver_id].version
    if version != installed:
        key = (device.key, solver_id, version)
        if key not in _warned_stale:
            _warned_stale.add(key)
            warnings.warn(f"wticonv: the perf-db records of solver {solver_id!r} were tuned "
                          f"for version {version}, {installed} is installed: they are ignored "
                          "(default perf configs run); run `wticonv tune` again",
                          SolverWarning, stacklevel=2)
        return None, f"perf-db record stale (version {version}): default perf config", ""
    if config in offered_perf_configs(registry, solver_id, problem, device, workspace_limit):
        return config, "", "perf-db"
    if workspace_limit is not None and config in offered_perf_configs(
            registry, solver_id, problem, device, None):
        return None, f"tuned perf config {config} does not fit the workspace limit: default", ""
    warnings.warn(f"wticonv: the perf-db record of solver {solver_id!r} for {problem.key} "
                  f"names perf config {config!r}, which the solver does not offer; deleted it "
                  "(the default runs; `wticonv tune` stores a new one)", SolverWarning,
                  stacklevel=2)
    try:
        store.delete_perf_record(device.key, problem.key, solver_id)
    except WticonvError:
        pass
    return None, f"perf-db record invalid ({config!r} not offered): deleted, default used", ""


def _system_perf_config(registry, solver_id: str, problem: ConvProblem, device,
                        workspace_limit: int | None) -> tuple[str | None, str, str]:
    """:func:`stored_perf_config` from the system databases (read-only: a record of
    another version, or naming a config the solver does not offer, is passed over with a
    note)."""
    hit = system_view(device.key).perf.get((problem.key, solver_id))
    if hit is None:
        return None, "", ""
    (version, config, _, _), name = hit
    if version != registry.solvers[solver_id].version:
        return None, (f"system perf-db record stale (version {version}, {name}): default "
                      "perf config"), ""
    if config in offered_perf_configs(registry, solver_id, problem, device, workspace_limit):
        return config, "", "system perf-db"
    return None, (f"system perf-db config {config} not offered here (or over the workspace "
                  f"limit; {name}): default"), ""


def perf_record_check(registry, store=None):
    """A check of perf-db records against the installed solvers, for
    :func:`wticonv.db.transfer.import_db`'s ``solver_check``: ``check(record)`` raises
    ValueError for a perf-db record of an installed solver that is not tunable (selection
    never reads it), or, where the record's device is a device of this machine (opened
    with ``store``), one naming a perf config the solver does not offer for its problem
    (selection would delete it on first use). Records of devices of other machines are
    checked there, when selection reads them."""
    opened: dict[str, object] = {}

    def device_of(key: str):
        if key not in opened:
            from wticonv.runtime.device import list_devices, select_device

            opened[key] = None
            try:
                for info, _ in list_devices():
                    if info.key == key:
                        opened[key] = select_device(info.index, store)
                        break
            except WticonvError:        # no OpenCL, or the device set aside: not checked
                pass
        return opened[key]

    def check(record) -> None:
        entry = registry.solvers.get(record.solver)
        if record.kind != "perf-db" or entry is None:
            return
        if not entry.tunable:
            raise ValueError(f"{record.solver} is not tunable (it offers no perf configs): "
                             "selection never reads a perf-db record of it; leave the "
                             "record out")
        device = device_of(record.device)
        if device is None:
            return
        from wticonv.problem.conv import parse_key

        config = record.values["perf_config"]
        try:
            offered = offered_perf_configs(registry, record.solver, parse_key(record.problem),
                                           device, None)
        except Exception:  # noqa: BLE001 - a hook that fails here fails in selection too
            return
        if config not in offered:
            listed = ", ".join(offered[:8]) + (", ..." if len(offered) > 8 else "")
            raise ValueError(f"{record.solver} does not offer perf config {config!r} for this "
                             f"problem on this device (it offers {listed or 'none'}): "
                             "selection would delete the record; tune again (`wticonv "
                             "tune`) or leave the record out")

    return check
