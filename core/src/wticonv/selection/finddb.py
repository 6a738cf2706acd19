"""The find-db's reader: measured times that outrank the WTI models.

``wticonv find`` (:mod:`wticonv.measuring.find`) writes the records; selection reads them
here. A record counts only for the installed solver version and the same workspace plan.
The user's own records of a problem come first; a problem the user's find-db holds no
record of is ranked by a system database's (:mod:`wticonv.db.system`), if one holds
records of it for this device. The two are never mixed in one ranking: times measured on
one machine are compared with times measured on the same machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wticonv.db.system import system_view
from wticonv.errors import WticonvError

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem

__all__ = ["apply_records", "find_records"]


def find_records(device, problem: ConvProblem) -> tuple[dict, str, str]:
    """``(records, source, system database)`` of ``problem`` on ``device``: the user's
    find-db records (``{solver: (version, workspace, ms, runs, capped)}``, source ``"user
    find-db"``), else a system database's (``"system find-db"`` and its name), else
    ``({}, "", "")``. Stand-in devices (``store = None``) have none."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return {}, "", ""
    try:
        records = store.get_find_records(device.key, problem.key)
    except WticonvError:
        records = {}
    if records:
        return records, "user find-db", ""
    records, name = system_view(device.key).find.get(problem.key, ({}, ""))
    return (records, "system find-db", name) if records else ({}, "", "")


def apply_records(registry, device, problem: ConvProblem, verdicts) -> None:
    """Give the candidates in ``verdicts`` that have a valid find-db record their measured
    time (``measured_ms``, ``wti_source = "find-db"``, ``source`` the user's or a system
    find-db); used by selection."""
    records, source, name = find_records(device, problem)
    if not records:
        return
    which = "" if source == "user find-db" else "system "
    for v in verdicts:
        rec = records.get(v.solver_id)
        if rec is None or not v.applicable or v.reason:
            continue
        version, workspace, time_ms = rec[0], rec[1], rec[2]
        if version != registry.solvers[v.solver_id].version:
            v.note = f"{which}find-db record stale (solver version {version}): ranked by WTI"
            continue
        if workspace != v.workspace:
            v.note = (f"{which}find-db record of another workspace plan ({workspace} bytes): "
                      "ranked by WTI")
            continue
        v.measured_ms = time_ms
        v.wti_source = "find-db"
        v.source, v.system_db = source, name
