"""The calibration's reader: per-device corrections of the WTI models.

``wticonv calibrate`` (:mod:`wticonv.measuring.calibrate`) fits and writes them; selection
applies them here, for the installed solver version only: a solver's learned correction
(:mod:`wticonv.selection.correction`) where the store holds one, else its factor per
direction (else its all-directions factor). A device the user's store holds no
calibration of is corrected by a system database's (:mod:`wticonv.db.system`), if one
holds a calibration for it; the user's own, once made, replaces it whole (the factors and
corrections of one calibration are fitted together, and never mixed with another's).
"""

from __future__ import annotations

from wticonv.db.system import calibration_records, pick_calibration, system_view
from wticonv.errors import WticonvError
from wticonv.selection.correction import correction_factors

__all__ = ["apply_factors", "calibration_of", "stale_note"]


def calibration_of(device, problem=None, versions: dict | None = None
                   ) -> tuple[dict, dict, str, str]:
    """``(factors, models, source, system database)`` of ``device``: the user's store's
    (source ``"user calibration"``), else a system database's (``"system calibration"``
    and its name), else ``({}, {}, "", "")``; with ``versions`` (``{solver id: installed
    version}``), the first of them that holds a record of an installed version
    (:func:`wticonv.db.system.pick_calibration`: a calibration made before an upgrade
    does not hide a system one that counts). ``models`` (the learned corrections) only
    where ``problem`` is given. Stand-in devices (``store = None``) have none."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return {}, {}, "", ""
    try:
        factors = store.get_calibration(device.key)
        get_correction = getattr(store, "get_correction", None)   # stand-in stores lack it
        models = get_correction(device.key) if get_correction else {}
    except WticonvError:
        return {}, {}, "", ""
    factors, models, source, name = pick_calibration((factors, models),
                                                     system_view(device.key), versions)
    return factors, models if problem is not None else {}, source, name


def stale_note(factors: dict, models: dict, versions: dict, source: str, name: str) -> str:
    """What explain says of a calibration some (or all) of whose records selection passes
    over: records of another solver version, or of a solver that is not installed ("" when
    every record counts)."""
    records = list(calibration_records(factors, models))
    stale = sorted({sid for sid, ver in records if versions.get(sid) != ver})
    if not stale:
        return ""
    n_stale = sum(versions.get(sid) != ver for sid, ver in records)
    where = f"the system database {name}" if name else "your cache"
    if n_stale == len(records):
        return (f"the {source} ({where}) holds no record of an installed solver version (its "
                f"{len(records)} record(s) are of other versions, or of solvers not "
                "installed): it corrects no WTI here; `wticonv calibrate` makes one for "
                "these versions")
    return (f"{n_stale} of the {len(records)} record(s) of the {source} ({where}) are of "
            "other solver versions, or of solvers not installed: "
            + ", ".join(stale[:6]) + (", ..." if len(stale) > 6 else "")
            + " not corrected")


def apply_factors(registry, device, verdicts, direction: str | None = None,
                  problem=None) -> str:
    """Multiply each applicable verdict's WTI by its solver's correction for ``problem``
    (given) or stored factor for ``direction`` (else its all-directions factor), keeping
    the raw WTI in ``raw_wti`` and naming the calibration in ``source``; used by
    selection. Returns :func:`stale_note`'s note on the calibration's records that do not
    count here ("" when all do, or there is none)."""
    versions = {sid: e.version for sid, e in registry.solvers.items()}
    factors, models, source, name = calibration_of(device, problem, versions)
    if not factors and not models:
        return ""
    live = [v for v in verdicts if v.wti is not None and v.wti > 0]
    learned = correction_factors(models, versions, problem, device,
                                 {v.solver_id: v.predicted_ms for v in live
                                  if v.predicted_ms}) if models else {}
    for v in live:
        factor = learned.get(v.solver_id)
        if factor is None:
            rec = factors.get(f"{v.solver_id}@{direction}") or factors.get(v.solver_id)
            if rec is None or rec[0] != versions[v.solver_id]:
                continue
            factor = rec[1]
        v.raw_wti = v.wti
        v.wti = v.wti * factor
        v.predicted_ms = v.predicted_ms / factor if v.predicted_ms else v.predicted_ms
        if v.wti_source == "model":
            v.wti_source = "calibrated"
            v.source, v.system_db = source, name
    return stale_note(factors, models, versions, source, name)
