"""The calibration's reader: per-device correction factors of the WTI models.

``wticonv calibrate`` (:mod:`wticonv.measuring.calibrate`) fits and writes the factors;
selection applies them here, per solver and direction (else the solver's all-directions
factor), for the installed solver version only.
"""

from __future__ import annotations

from wticonv.errors import WticonvError

__all__ = ["apply_factors"]


def apply_factors(registry, device, verdicts, direction: str | None = None) -> None:
    """Multiply each applicable verdict's WTI by its solver's stored factor for
    ``direction`` (else its all-directions factor), keeping the raw WTI in ``raw_wti``;
    used by selection."""
    store = device.store   # None on stand-in devices (contract.protocols.DeviceLike)
    if store is None:
        return
    try:
        factors = store.get_calibration(device.key)
    except WticonvError:
        return
    if not factors:
        return
    for v in verdicts:
        rec = factors.get(f"{v.solver_id}@{direction}") or factors.get(v.solver_id)
        if rec is None or v.wti is None or v.wti <= 0:
            continue
        version, factor = rec
        if version != registry.solvers[v.solver_id].version:
            continue
        v.raw_wti = v.wti
        v.wti = v.wti * factor
        v.predicted_ms = v.predicted_ms / factor if v.predicted_ms else v.predicted_ms
        if v.wti_source == "model":
            v.wti_source = "calibrated"
