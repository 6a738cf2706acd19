"""Layer 9, the fleet: find, tune, evaluate and calibrate across many devices, on Dask.

``wticonv find|tune|evaluate|calibrate --cluster [ADDRESS]`` and the functions here
split the work into tasks, one per device and problem, pinned to their device by Dask
worker resources, run them on workers that each keep one handle (and so compile each
program once), and merge what the workers measured into the caller's store as it
arrives; see docs/fleet.md.

- :mod:`~wticonv.fleet.targets`: the devices and their worker resources;
- :mod:`~wticonv.fleet.cluster`: :class:`Fleet`, a local cluster or a scheduler joined;
- :mod:`~wticonv.fleet.worker` and :mod:`~wticonv.fleet.jobs_worker`: what the workers run;
- :mod:`~wticonv.fleet.runner`: submitting, retrying, reporting, progress;
- :mod:`~wticonv.fleet.merge`: resume and merging, under the store's validation;
- :mod:`~wticonv.fleet.session`: one run on the caller's side (the records the workers
  predict with, refused workers, what resume skips);
- :mod:`~wticonv.fleet.jobs`: :func:`find`, :func:`tune`, :func:`evaluate`, :func:`calibrate`;
- :mod:`~wticonv.fleet.serve`: ``wticonv worker``; :mod:`~wticonv.fleet.quiet`: its
  workers' and a local cluster's ignore SIGINT.

Dask is optional (``pip install "wticonv[cluster]"``): importing this package does not
import it; opening a fleet without it raises :class:`~wticonv.errors.FleetError` saying
how to install it. Imports :mod:`wticonv.measuring` and everything below it.
"""

from __future__ import annotations

from wticonv.fleet.cluster import Fleet, require_distributed
from wticonv.fleet.jobs import FleetReport, calibrate, evaluate, find, tune
from wticonv.fleet.targets import Target, device_resource

__all__ = ["Fleet", "FleetReport", "Target", "calibrate", "device_resource", "evaluate",
           "find", "require_distributed", "tune"]
