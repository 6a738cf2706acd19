"""The devices of a fleet and the Dask resources that pin tasks to them.

Every OpenCL device kind and name is one *worker resource*
(:func:`device_resource`): ``wticonv-gpu-NVIDIA_H200``, ``wticonv-cpu-pthread-...``.
A worker advertises the resource of the device it serves, with a count of 1 (one task
at a time: a device timed by two tasks at once measures neither right), and every task
asks for the resource of its device, so the scheduler never sends an H200's task to a
CPU's worker. Nothing here imports Dask.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wticonv.errors import DeviceError, FleetError

__all__ = ["Target", "device_resource", "local_targets", "worker_slug"]

#: Prefix of every device resource (other resources of a shared cluster keep theirs).
RESOURCE_PREFIX = "wticonv-"


def _slug(text: str) -> str:
    """``text`` with every run of characters other than letters, digits, ``.``, ``_`` and
    ``-`` made one ``_`` (``dask worker --resources "A=1 B=1"`` splits on blanks, commas
    and ``=``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text.strip()).strip("_") or "_"


def device_resource(kind: str, name: str) -> str:
    """The worker resource of a device of ``kind`` ("gpu", "cpu", ...) named ``name`` (as
    OpenCL reports it), e.g. ``device_resource("gpu", "NVIDIA H200")`` is
    ``"wticonv-gpu-NVIDIA_H200"``."""
    return f"{RESOURCE_PREFIX}{_slug(kind)}-{_slug(name)}"


def worker_slug(name) -> str:
    """A worker's name made a folder name (its own cache directory)."""
    return _slug(str(name))


@dataclass(frozen=True)
class Target:
    """A device a fleet measures on: one kind and name, served by one or more workers.

    Attributes
    ----------
    kind, name : str
        The device's kind ("gpu", "cpu") and OpenCL name.
    index : str or None
        Its ``P:D`` on this machine, for the workers of a local cluster (None for a
        device only remote workers have).
    """

    kind: str
    name: str
    index: str | None = None

    @property
    def resource(self) -> str:
        """The worker resource its tasks ask for (:func:`device_resource`)."""
        return device_resource(self.kind, self.name)


def local_targets(spec: str | None = None, purpose: str = "for a local cluster"
                  ) -> list[Target]:
    """The devices a local cluster starts a worker for: every usable GPU, and the CPU
    device wticonv would choose (``select_device("cpu")``: where both the system's and
    PyPI's PoCL are installed, they are the same cores, so one of them).

    A CPU gets one worker that uses all its cores, not one per group of cores: the
    find-db and perf-db key a device by platform, name and driver, not by core count, so
    times measured on a share of the cores would be stored as the whole CPU's, and
    workers sharing the cores would slow each other's timed runs.

    ``spec`` keeps some of them: None every one, ``"gpu"`` or ``"cpu"`` that kind,
    ``"P:D"`` that device (as ``wticonv devices`` numbers them). ``purpose`` ends the
    message of the error (what the devices were wanted for).

    Raises
    ------
    FleetError
        If no usable device matches ``spec``.
    DeviceError
        If there is no OpenCL device at all.
    """
    from wticonv.db.store import Store
    from wticonv.runtime.device import list_devices, select_device
    from wticonv.runtime.probe import ensure_verdict

    store = Store()
    want = (spec or "").strip().lower()
    listed = list_devices()
    if want and want not in ("gpu", "cpu"):
        try:
            dev = select_device(want, store)
        except DeviceError as e:
            raise FleetError(f"no usable OpenCL device {spec!r} {purpose}: {e}") from None
        return [Target(dev.kind, dev.info.name, dev.info.index)]
    out = [Target(i.kind, i.name, i.index) for i, _ in listed
           if i.kind == "gpu" and want in ("", "gpu") and ensure_verdict(i, store).usable]
    if want in ("", "cpu") and any(i.kind == "cpu" for i, _ in listed):
        try:
            dev = select_device("cpu", store)
            out.append(Target("cpu", dev.info.name, dev.info.index))
        except Exception:  # noqa: BLE001 - a CPU set aside leaves the GPUs
            pass
    seen: dict[str | None, Target] = {}
    for t in out:                       # one worker per device
        seen.setdefault(t.index, t)
    if not seen:
        kinds = sorted({i.kind for i, _ in listed})
        raise FleetError(f"no usable OpenCL {want.upper() if want else ''} device "
                         f"{purpose}".replace("  ", " ")
                         + (f": this machine has {' and '.join(kinds)} device(s) only"
                            if want and want not in kinds else "")
                         + "; `wticonv devices` lists them (and why one is set aside)")
    return list(seen.values())
