"""The probe's child process: ``python -c ... wticonv.runtime.probe_child.main``.

Run by :func:`wticonv.runtime.probe.run_probe`, never in the user's process. It opens one
device, builds and checks the probe kernel, measures the figures, and prints what it
did stage by stage (see :mod:`wticonv.runtime.probe` for the protocol).
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import sys

import numpy as np
import pyopencl as cl

from wticonv.db.store import Store
from wticonv.runtime import peak
from wticonv.runtime.device import Device, list_devices
from wticonv.runtime.isolation import error_tail
from wticonv.runtime.probe import _GROUPS, _MARK, _OUT, PROBE_RTOL, _probe_input, expected_outputs

__all__ = ["main"]


def _stage(name: str) -> None:
    print(f"{_MARK} stage {name}", flush=True)


def _result(**fields) -> None:
    print(f"{_MARK} result {json.dumps(fields)}", flush=True)


def _child(platform_index: int, device_index: int, key: str, cache_dir: str) -> int:
    _stage("open")
    found = [(i, d) for i, d in list_devices()
             if (i.platform_index, i.device_index) == (platform_index, device_index)]
    if not found or found[0][0].key != key:
        _result(ok=False, reason=f"device {platform_index}:{device_index} is no longer "
                                 f"{key!r}: the OpenCL devices changed; run again")
        return 1
    info, cl_dev = found[0]
    dev = Device(cl_dev, info, Store(cache_dir))
    _stage("build")
    local = min(64, info.max_work_group_size)
    source = importlib.resources.files("wticonv").joinpath("kernels/probe.cl").read_text()
    prg = dev.build(source, f"-DWTICONV_PROBE_LOCAL={local}")
    if "probe_builtins" not in prg.kernel_names.split(";"):
        _result(ok=False, reason="the driver built the probe program without its kernel "
                                 "'probe_builtins'")
        return 1
    _stage("launch")
    n = local * _GROUPS
    x = _probe_input(n)
    xbuf = dev.upload(x, "the probe's input")
    ybuf = dev.alloc(n * _OUT * 4, "the probe's output")
    cl.enqueue_fill_buffer(dev.queue, ybuf, np.float32(np.nan), 0, n * _OUT * 4)
    dev.enqueue_kernel(prg.probe_builtins, (n,), (local,), xbuf, ybuf).wait()
    got = dev.download(ybuf, (n, _OUT)).astype(np.float64)
    want = expected_outputs(x, local)
    err = np.abs(got - want) / np.maximum(np.abs(want), 1e-3)
    err[~np.isfinite(got)] = np.inf
    if not err.max() <= PROBE_RTOL:
        i, j = np.unravel_index(int(np.argmax(err)), err.shape)
        _result(ok=False, reason=f"the probe kernel computed wrong values: work-item {i}, "
                                 f"output {j} is {got[i, j]:.7g} instead of {want[i, j]:.7g} "
                                 f"({int((err > PROBE_RTOL).sum())} of {err.size} wrong)")
        return 1
    _stage("peak")
    peak_flops = peak.measure_peak_flops(dev)
    _stage("bandwidth")
    bandwidth = peak.measure_bandwidth(dev)
    _result(ok=True, peak_flops=peak_flops, bandwidth=bandwidth)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The probe child: ``main([PLATFORM, DEVICE, DEVICE_KEY, CACHE_DIR])``.

    Prints ``wticonv-probe stage NAME`` as it goes and ``wticonv-probe result {json}`` at
    the end; exit status 0 when the device passed."""
    parser = argparse.ArgumentParser(prog="wticonv.runtime.probe_child")
    parser.add_argument("platform", type=int)
    parser.add_argument("device", type=int)
    parser.add_argument("key")
    parser.add_argument("cache_dir")
    args = parser.parse_args(argv)
    try:
        return _child(args.platform, args.device, args.key, args.cache_dir)
    except Exception as e:  # noqa: BLE001 - every failure is a verdict, reported whole
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        detail = error_tail(str(e)) or (lines[0] if lines else "")
        _result(ok=False, reason=f"{type(e).__name__}: {detail}" if detail else type(e).__name__)
        return 1


if __name__ == "__main__":  # pragma: no cover - run as a child
    sys.exit(main())
