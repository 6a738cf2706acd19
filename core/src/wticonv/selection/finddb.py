"""The find-db's reader: measured times that outrank the WTI models.

``wticonv find`` (:mod:`wticonv.measuring.find`) writes the records; selection reads them
here. A record counts only for the installed solver version and the same workspace plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wticonv.errors import WticonvError

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.problem.conv import ConvProblem

__all__ = ["apply_records"]


def apply_records(registry, device, problem: ConvProblem, verdicts) -> None:
    """Give the candidates in ``verdicts`` that have a valid find-db record their measured
    time (``measured_ms``, ``wti_source = "find-db"``); used by selection."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return
    try:
        records = store.get_find_records(device.key, problem.key)
    except WticonvError:
        return
    if not records:
        return
    for v in verdicts:
        rec = records.get(v.solver_id)
        if rec is None or not v.applicable or v.reason:
            continue
        version, workspace, time_ms = rec[0], rec[1], rec[2]
        if version != registry.solvers[v.solver_id].version:
            v.note = f"find-db record stale (solver version {version}): ranked by WTI"
            continue
        if workspace != v.workspace:
            v.note = (f"find-db record of another workspace plan ({workspace} bytes): "
                      "ranked by WTI")
            continue
        v.measured_ms = time_ms
        v.wti_source = "find-db"
