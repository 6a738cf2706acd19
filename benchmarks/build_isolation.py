"""The cost of building programs in the build helper (wticonv.runtime.build_helper), per build.

Usage::

    python benchmarks/build_isolation.py [--device SPEC] [--out FILE.json]

1. Records the programs the built-in solvers really build: every solver runs every
   direction of a few small problems (3x3, 1x1, 5x5, 3x3 stride 2, depthwise) on a
   temporary store, and each distinct (source, build options) is kept.
2. Builds each program from source twice more, alternating the order: once in this
   process, once in the helper (its binary then loaded here); both store the binary, as
   a device's program cache does. A comment with a fresh
   number is appended each time, so that no driver cache (PoCL's kernel cache, NVIDIA's
   compute cache, disabled here as well) answers. The helper is started before the
   timing; its start-up is reported apart.
3. Loads each program again from the stored binary (a warm cache) and checks that this
   starts no helper.

Prints a table and the mean and median extra milliseconds per cold build, and the round
trip: the helper path's time less the time the helper itself spent building (sending the
source, returning and loading the binary, checking its kernels). The round trip is what
isolation adds; the "extra" column also holds the noise of two compilations on a busy
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

os.environ.setdefault("POCL_KERNEL_CACHE", "0")
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

import wticonv  # noqa: E402
from wticonv.measuring.inputs import random_inputs  # noqa: E402
from wticonv.runtime.build_helper import BuildHelper, real_key  # noqa: E402
from wticonv.runtime.device import select_device  # noqa: E402
from wticonv.runtime.programs import ProgramCache  # noqa: E402
from wticonv.db.store import Store  # noqa: E402

PROBLEMS = [
    dict(n=1, c=16, h=14, w=14, k=16, r=3, s=3, pad_h=1, pad_w=1),
    dict(n=1, c=16, h=14, w=14, k=32, r=1, s=1),
    dict(n=1, c=8, h=13, w=13, k=8, r=5, s=5, pad_h=2, pad_w=2),
    dict(n=1, c=16, h=14, w=14, k=16, r=3, s=3, pad_h=1, pad_w=1, stride_h=2, stride_w=2),
    dict(n=1, c=16, h=14, w=14, k=16, r=3, s=3, pad_h=1, pad_w=1, groups=16),
]


def record_programs(device_spec: str | None) -> tuple[object, list[tuple[str, str]]]:
    """Run every solver on PROBLEMS (cold store); return the device and its programs."""
    seen: dict[str, tuple[str, str]] = {}
    real = ProgramCache.build

    def recording(self, source, options=""):
        seen.setdefault(self.digest(source, options), (source, options))
        return real(self, source, options)

    ProgramCache.build = recording
    store = Store(tempfile.mkdtemp(prefix="wticonv-bench-"))
    dev = select_device(device_spec, store)
    handle = wticonv.Handle(dev)
    try:
        for kw in PROBLEMS:
            for direction in ("fwd", "bwd", "wrw"):
                p = wticonv.ConvProblem(direction=direction, **kw)
                for sid in handle.registry.ids():
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            handle.compute(p, solver=sid, **random_inputs(p, seed=1))
                        except wticonv.WticonvError:
                            pass     # the solver declines this problem
    finally:
        ProgramCache.build = real
    return dev, list(seen.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    ap.add_argument("--repeat", type=int, default=1,
                    help="builds of each program in each mode; the least time counts")
    args = ap.parse_args(argv)

    dev, programs = record_programs(args.device)
    info = dev.info
    print(f"device {info.index} {info.name!r} ({info.platform} {info.driver_version}); "
          f"{len(programs)} distinct programs", flush=True)
    helper = BuildHelper(info.platform_index, info.device_index, real_key(dev.cl_device))
    t0 = time.perf_counter()
    helper.build("__kernel void warm(__global float *a) { a[0] = 1.0f; }", "", info.name)
    startup_ms = (time.perf_counter() - t0) * 1e3
    # Both store what they build, as every device's program cache does: in this process
    # that fetches the binary (with PoCL, the machine code of every kernel) after the build.
    inproc = ProgramCache(dev.context, dev.cl_device, info.key,
                          Store(tempfile.mkdtemp(prefix="wticonv-bench-a-")), helper=None)
    isolated = ProgramCache(dev.context, dev.cl_device, info.key,
                            Store(tempfile.mkdtemp(prefix="wticonv-bench-b-")), helper=helper)
    rows = []
    salt = 0
    for i, (source, options) in enumerate(programs):
        times = {"in-process": float("inf"), "helper": float("inf"), "round trip": float("inf")}
        order = (("in-process", inproc), ("helper", isolated))
        for rep in range(max(1, args.repeat)):
            for name, cache in (order if (i + rep) % 2 == 0 else order[::-1]):
                salt += 1
                t = time.perf_counter()
                cache.build(f"{source}\n/* build {salt} */\n", options)
                wall = (time.perf_counter() - t) * 1e3
                times[name] = min(times[name], wall)
                if cache is isolated:
                    times["round trip"] = min(times["round trip"],
                                              wall - helper.last_build_s * 1e3)
        rows.append({"program": i, "source_chars": len(source), "options": options[:60],
                     "in_process_ms": times["in-process"], "helper_ms": times["helper"],
                     "extra_ms": times["helper"] - times["in-process"],
                     "round_trip_ms": times["round trip"]})
        print(f"{i:3d} {len(source):7d} chars  in-process {times['in-process']:8.1f} ms  "
              f"helper {times['helper']:8.1f} ms  extra {rows[-1]['extra_ms']:+7.1f} ms  "
              f"round trip {times['round trip']:6.1f} ms", flush=True)
    helper.close()

    # A warm cache: every program from the stored binary, with a helper that must not start.
    store = Store(tempfile.mkdtemp(prefix="wticonv-bench-warm-"))
    cold = ProgramCache(dev.context, dev.cl_device, info.key, store, helper=None)
    for source, options in programs:
        cold.build(source, options)
    unused = BuildHelper(info.platform_index, info.device_index, real_key(dev.cl_device))
    warm = ProgramCache(dev.context, dev.cl_device, info.key, store, helper=unused)
    t = time.perf_counter()
    for source, options in programs:
        warm.build(source, options)
    warm_ms = (time.perf_counter() - t) * 1e3 / max(1, len(programs))
    assert unused.starts == 0 and warm.counters.binary_loads == len(programs)

    extra = [r["extra_ms"] for r in rows]
    summary = {
        "device": f"{info.name} ({info.platform} {info.driver_version})",
        "programs": len(rows), "repeat": args.repeat, "helper_startup_ms": startup_ms,
        "mean_in_process_ms": statistics.mean(r["in_process_ms"] for r in rows),
        "mean_helper_ms": statistics.mean(r["helper_ms"] for r in rows),
        "mean_extra_ms": statistics.mean(extra), "median_extra_ms": statistics.median(extra),
        "mean_round_trip_ms": statistics.mean(r["round_trip_ms"] for r in rows),
        "max_round_trip_ms": max(r["round_trip_ms"] for r in rows),
        "warm_load_ms": warm_ms, "warm_helper_starts": unused.starts,
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
