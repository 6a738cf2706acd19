"""The probe: a device's first use, in a child process with a time limit.

Before wticonv builds or runs anything on a device whose driver it has not seen on this
host, :func:`ensure_verdict` runs :mod:`wticonv.runtime.probe_child` (see
:mod:`wticonv.runtime.isolation`). The child opens the device and, stage by stage:

1. ``build``: builds ``kernels/probe.cl`` (the vector types and built-ins our kernels use);
   a program built without its kernel fails here;
2. ``launch``: runs it and compares all 48 outputs of each work-item with a float64 NumPy
   computation (relative error at most :data:`PROBE_RTOL`);
3. ``peak`` and ``bandwidth``: measures the device's figures (:mod:`wticonv.runtime.peak`).

An abort or signal, a hang past the time limit (:data:`PROBE_TIMEOUT_S`,
``WTICONV_PROBE_TIMEOUT``), a build error, a missing kernel, a wrong value, or figures
outside :func:`implausible_figures`' bounds set the device aside: the verdict, with the
reason and the fix, is stored (:meth:`wticonv.db.store.Store.put_device_verdict`) under
:func:`verdict_key`, which holds the driver version and, for CPU devices, the host's CPU
model, so a new driver or another CPU is probed again. A usable verdict stores the
measured figures too. ``wticonv devices --probe`` forgets the verdicts and probes again.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import logging
import os
import platform
import signal
import subprocess
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from wticonv.runtime.isolation import (
    child_argv,
    child_env,
    describe_exit,
    error_tail,
    timeout_from_env,
)

if TYPE_CHECKING:  # pragma: no cover
    from wticonv.db.store import Store
    from wticonv.runtime.discovery import DeviceInfo

__all__ = ["PROBE_TIMEOUT_S", "Verdict", "ensure_verdict", "fix_hint", "host_cpu",
           "implausible_figures", "stored_verdict", "verdict_key"]

#: Seconds the probe child may take before it is killed and the device set aside as hung
#: (``WTICONV_PROBE_TIMEOUT`` overrides). A cold probe builds three programs (about a
#: second each with PoCL on the 2-core development machines) and measures for about a
#: second; 180 s leaves room for a machine busy with other work.
PROBE_TIMEOUT_S = 180.0
#: Largest relative error of the probe kernel's outputs against float64 (all of them are
#: one or two float32 operations on values in (0, 1]: a correct driver is within 1e-6).
PROBE_RTOL = 1e-4
#: Floats each probe work-item writes (WTICONV_PROBE_OUT in kernels/probe.cl).
_OUT = 48
_GROUPS = 4
_STAGES = {"open": "opening the device", "build": "building the probe kernel",
           "launch": "running the probe kernel", "peak": "measuring its peak FP32 rate",
           "bandwidth": "measuring its memory bandwidth"}
_MARK = "wticonv-probe"
#: Says when a probe starts (INFO); the CLI prints it to stderr.
log = logging.getLogger("wticonv.runtime.probe")


@dataclass(frozen=True)
class Verdict:
    """What the probe found.

    Attributes
    ----------
    usable : bool
    reason : str
        Why the device is set aside, with the fix ("" when usable).
    peak_flops, bandwidth : float
        Measured FP32 FLOP/s and bytes/s (0.0 when not measured, e.g. set aside, or read
        back from the store).
    """

    usable: bool
    reason: str = ""
    peak_flops: float = 0.0
    bandwidth: float = 0.0


def _sources() -> str:
    files = importlib.resources.files("wticonv").joinpath("kernels")
    return files.joinpath("probe.cl").read_text() + files.joinpath("peak.cl").read_text()


def host_cpu() -> str:
    """The host CPU's identity: vendor, family, model, stepping and model name from
    ``/proc/cpuinfo`` on Linux (a VM may call a Zen 2 and a Zen 4 both "AMD EPYC"), else
    :func:`platform.processor`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            fields: dict[str, str] = {}
            for line in f:
                if not line.strip():
                    break
                name, _, value = line.partition(":")
                fields.setdefault(name.strip(), value.strip())
        parts = [fields.get(k, "") for k in ("vendor_id", "cpu family", "model", "stepping",
                                              "model name")]
        if any(parts):
            return " ".join(p for p in parts if p)
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def verdict_key(info: DeviceInfo) -> str:
    """Store key of a device's verdict: the device key (platform, name, driver version), a
    digest of the probe's kernels, and for a CPU device a digest of :func:`host_cpu`."""
    digest = hashlib.sha256(_sources().encode()).hexdigest()[:12]
    key = f"{info.key}#probe-{digest}"
    if info.kind == "cpu":
        key += "-cpu-" + hashlib.sha256(host_cpu().encode()).hexdigest()[:12]
    return key


def fix_hint(info: DeviceInfo) -> str:
    """What to do about a set-aside device, by kind and driver."""
    text = f"{info.platform} {info.version}".lower()
    if info.kind == "cpu" and ("pocl" in text or "portable computing language" in text):
        if "debian" in info.driver_version.lower() or "ubuntu" in info.driver_version.lower():
            return ("this is the system's PoCL: update it, or use another device "
                    "(WTICONV_DEVICE / --device; see 'wticonv devices')")
        return ("install the system's PoCL, which knows current CPUs: 'sudo apt-get install "
                "pocl-opencl-icd' on Debian/Ubuntu; PyPI's PoCL (pocl-binary-distribution) "
                "can then be uninstalled")
    return "update the device's OpenCL driver, or use another device (WTICONV_DEVICE)"


def implausible_figures(info: DeviceInfo, peak_flops: float, bandwidth: float) -> str | None:
    """Why measured figures cannot be right, or None.

    Bounds: at least 1e8 FLOP/s and 1e8 bytes/s (slower than any device worth a kernel);
    at most 1e14 bytes/s (20x an H200's 4.8 TB/s HBM3e, NVIDIA's data sheet); at most
    compute units x clock x 4096 FLOP per cycle (an H200 SM does 256 FP32 FLOP per cycle:
    128 FMA lanes, NVIDIA's Hopper white paper; a Zen 4 core 64), or 1e16 FLOP/s when the
    driver reports no clock.
    """
    cap = (info.compute_units * info.clock_mhz * 1e6 * 4096 if info.clock_mhz > 0 else 1e16)
    for what, value, unit, low, high in (("peak", peak_flops, "FLOP/s", 1e8, cap),
                                         ("bandwidth", bandwidth, "bytes/s", 1e8, 1e14)):
        if not np.isfinite(value) or not low <= value <= high:
            return (f"implausible measured {what} of {value:.3g} {unit} (expected "
                    f"{low:.0e} to {high:.3g}): its timers or kernels cannot be trusted")
    return None


def stored_verdict(info: DeviceInfo, store: Store) -> Verdict | None:
    """The stored verdict of ``info``'s device on this host, or None (not probed yet)."""
    row = store.get_device_verdict(verdict_key(info))
    return None if row is None else Verdict(row[0], row[1])


def ensure_verdict(info: DeviceInfo, store: Store, warn: bool = True) -> Verdict:
    """The device's verdict: stored, or found now by the probe child (see module docstring).

    A new usable verdict stores the measured figures (unless figures are stored already);
    a new set-aside verdict warns once (``warn``), naming the device, the driver, what
    happened and the fix. One process probes at a time (the store's ``measure`` lock).
    """
    v = stored_verdict(info, store)
    if v is not None:
        return v
    with store.exclusive("measure"):
        v = stored_verdict(info, store)
        if v is not None:
            return v
        log.info("wticonv: testing the driver of %s in a child process (its first use on "
                 "this host; cached)...", info.name)
        v = run_probe(info, store)
        if v.usable:
            if store.get_device_figures(info.key) is None:
                store.put_device_figures(info.key, v.peak_flops, v.bandwidth)
        store.put_device_verdict(verdict_key(info), v.usable, v.reason)
    if not v.usable and warn:
        warnings.warn(f"wticonv: setting aside OpenCL device {describe(info)}: {v.reason}",
                      stacklevel=3)
    return v


def describe(info: DeviceInfo) -> str:
    """``P:D 'name' (platform driver-version)``, as warnings and errors name a device."""
    return f"{info.index} {info.name!r} ({info.platform} {info.driver_version})"


def run_probe(info: DeviceInfo, store: Store, timeout: float | None = None) -> Verdict:
    """Run the probe child for ``info`` now (no store lookup) and return its verdict."""
    timeout = timeout if timeout is not None else timeout_from_env(
        "WTICONV_PROBE_TIMEOUT", PROBE_TIMEOUT_S)
    argv = child_argv("wticonv.runtime.probe_child", str(info.platform_index),
                      str(info.device_index), info.key, str(store.cache_dir))
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env("probe"), text=True,
                            errors="replace", start_new_session=True)
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        _kill(proc)
        out, err = proc.communicate()
    stage, result = "open", None
    for line in out.splitlines():
        if line.startswith(_MARK + " stage "):
            stage = line.split()[-1]
        elif line.startswith(_MARK + " result "):
            result = json.loads(line[len(_MARK) + 8:])
    where = _STAGES.get(stage, stage)
    fix = fix_hint(info)
    if hung:
        return Verdict(False, f"its first use, in a child process, hung: no answer within "
                              f"{timeout:g} s while {where} (WTICONV_PROBE_TIMEOUT sets the "
                              f"limit); fix: {fix}")
    if result is None:
        tail = error_tail(err)
        return Verdict(False, f"its first use, in a child process, {describe_exit(proc.returncode)}"
                              f" while {where}{': ' + tail if tail else ''}; fix: {fix}")
    if not result.get("ok"):
        return Verdict(False, f"{result.get('reason', 'the probe failed')} (while {where}); "
                              f"fix: {fix}")
    peak, bw = float(result["peak_flops"]), float(result["bandwidth"])
    bad = implausible_figures(info, peak, bw)
    if bad is not None:
        return Verdict(False, f"{bad}; fix: {fix}")
    return Verdict(True, "", peak, bw)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        proc.kill()


# ------------------------------------------------------------------ the child's side
def expected_outputs(x: np.ndarray, local: int) -> np.ndarray:
    """What ``probe_builtins`` must write for input ``x`` (float32, 16 per work-item) with
    work-groups of ``local``, computed in float64: shape (work-items, 48)."""
    a = x.astype(np.float64).reshape(-1, 16)
    n = a.shape[0]
    y = np.zeros((n, _OUT))
    y[:, 0:16] = a * 0.5 + 1.0
    y[:, 16:24] = a[:, :8] * a[:, 8:] + 0.25
    y[:, 24:28] = np.clip(a[:, 8:12], 0.1, 0.9)
    y[:, 28:32] = np.where(a[:, 12:16] > 0.5, -a[:, 12:16], a[:, 12:16])
    y[:, 32:36] = np.maximum(np.minimum(a[:, 0:4], a[:, 4:8]), 0.2)
    y[:, 36:40] = np.trunc(a[:, 0:4].astype(np.float32) * np.float32(100.0))
    y[:, 40] = a[:, 3]
    y[:, 41] = a[:, 0]
    dp = (a[:, 0:4] * a[:, 4:8]).sum(axis=1)
    y[:, 42] = dp
    lid = np.arange(n) % local
    y[:, 43] = dp[np.arange(n) - lid + (lid + 1) % local]
    y[:, 44] = lid
    y[:, 45] = np.arange(n) // local
    y[:, 46] = np.minimum(a[:, 0], a[:, 15])
    y[:, 47] = 1.0
    return y


def _probe_input(n: int) -> np.ndarray:
    """Values (k + 0.5) / 128, exact in float32, none near a multiple of 1/100."""
    return (((np.arange(n * 16) * 37) % 128 + 0.5) / 128).astype(np.float32)


