"""The calibration's reader: per-device corrections of the WTI models.

``wticonv calibrate`` (:mod:`wticonv.measuring.calibrate`) fits and writes them; selection
applies them here, for the installed solver version only: a solver's learned correction
(:mod:`wticonv.selection.correction`) where the store holds one, else its factor per
direction (else its all-directions factor).
"""

from __future__ import annotations

from wticonv.errors import WticonvError
from wticonv.selection.correction import correction_factors

__all__ = ["apply_factors"]


def apply_factors(registry, device, verdicts, direction: str | None = None,
                  problem=None) -> None:
    """Multiply each applicable verdict's WTI by its solver's correction for ``problem``
    (given) or stored factor for ``direction`` (else its all-directions factor), keeping
    the raw WTI in ``raw_wti``; used by selection."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return
    try:
        factors = store.get_calibration(device.key)
        get_correction = getattr(store, "get_correction", None)   # stand-in stores lack it
        models = get_correction(device.key) if problem is not None and get_correction else {}
    except WticonvError:
        return
    if not factors and not models:
        return
    versions = {sid: e.version for sid, e in registry.solvers.items()}
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
