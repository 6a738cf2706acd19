"""Make a system database for one device: calibrate it, then export the calibration into
the wticonv-sysdb distribution (plugins/sysdb), where `make setup` installs it.

    .venv/bin/python tools/make_system_db.py cpu            # this machine's PoCL CPU
    .venv/bin/python tools/make_system_db.py gpu            # e.g. the H200
    git add plugins/sysdb/src/wticonv_sysdb/*.jsonl && git commit

It runs, with a fresh temporary cache (so that the file holds this calibration alone, and
your own cache is left as it is; --cache DIR uses that one instead):

    wticonv calibrate --device DEVICE [--budget-s S]
    wticonv db export plugins/sysdb/src/wticonv_sysdb/NAME.jsonl --device DEVICE \\
        --kind calibration --kind correction [--match PATTERN] --comment "..."

Without the device, ``--refit CAL.csv ...`` refits a calibration from probes a device
measured earlier (files of `wticonv calibrate --csv`, one device) with this checkout's
models, as calibrate fits them, and exports it for the device key given as DEVICE: after
a WTI model changes (and the solvers' version with it), a shipped calibration is remade
without measuring again, where the kernels the probes timed are unchanged:

    .venv/bin/python tools/make_system_db.py 'NVIDIA CUDA|NVIDIA H100 80GB HBM3|580.159.04' \
        --refit a/calibrate.csv b/calibrate.csv --name nvidia-h100-80gb-hbm3

Where some solvers' kernels did change, calibrate once more with them and give that file
last with ``--stale PREFIX`` (e.g. ``--stale winograd.``): those solvers' runs then come
from the last file only, every other solver's from all of them. ``--stale PREFIX@K`` takes
them from the last K files (K calibrations measured since the change, given last).

NAME and PATTERN default by device: a PoCL CPU device gives ``pocl-<LLVM target>-<driver>``
and the pattern ``<platform>|<driver>-<LLVM target>-*|<driver version>`` (every CPU model
that PoCL compiles for the same target, under the same PoCL version: docs/fleet.md says
why, with the replayed figures); any other device its name (``nvidia-h200``) and its exact
device key (the same device name and driver version only). The header's comment records
both commands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "plugins" / "sysdb" / "src" / "wticonv_sysdb"
POCL = "Portable Computing Language"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def _device(spec: str, env: dict) -> dict:
    """The device ``spec`` names on this machine (its JSON row of `wticonv devices`)."""
    code = ("import json, sys; from wticonv.runtime.device import select_device; "
            "d = select_device(sys.argv[1]); i = d.info; print(json.dumps({'key': i.key, "
            "'name': i.name, 'platform': i.platform, 'driver': i.driver_version, "
            "'kind': i.kind}))")
    out = subprocess.run([sys.executable, "-c", code, spec], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def cpu_model() -> str | None:
    """This machine's CPU model name (/proc/cpuinfo), which PoCL ends its device names
    with; None where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def defaults(dev: dict, model: str | None = None) -> tuple[str, str | None]:
    """``(file name without .jsonl, device pattern or None)`` for a device row.

    PoCL names a CPU device ``<driver>-<LLVM CPU target>-<CPU model name>`` (e.g.
    ``pthread-skylake-avx512-Intel(R) Xeon(R) Processor``): the pattern keeps the driver
    and the target, which decide the code PoCL compiles, and lets the model go
    (``pthread-skylake-avx512-*``). Where the model cannot be told apart, the driver
    prefix alone (``pthread-*``), with a warning."""
    if dev["platform"] == POCL and dev["kind"] == "cpu":
        name, driver = dev["name"], dev["driver"]
        if model and name.endswith("-" + model) and len(name) > len(model) + 1:
            target = name[:-len(model)]                        # "pthread-skylake-avx512-"
            slug = _slug(target.split("-", 1)[1]) if "-" in target[:-1] else "cpu"
            return f"pocl-{slug}-{_slug(driver)}", f"{POCL}|{target}*|{driver}"
        print(f"make_system_db: warning: cannot tell the CPU model from the device name "
              f"{name!r}: the pattern serves every CPU of this PoCL driver; give a narrower "
              "--match", file=sys.stderr)
        prefix = name.split("-", 1)[0]
        return f"pocl-cpu-{_slug(driver)}", f"{POCL}|{prefix}-*|{driver}"
    return _slug(dev["name"]), None


def refit(key: str, files: list[str], cache_dir: str, stale: tuple[str, ...] = ()) -> int:
    """Fit a calibration (factors and learned corrections) to the probe runs of ``files``
    (`wticonv calibrate --csv`, all of one device) with the installed solvers' models,
    predicted on a stand-in with the device figures the files record, and store it for
    device ``key`` in the cache ``cache_dir``. ``stale``: solver ids (or id prefixes such as
    ``winograd.``) whose kernels changed after every file but the last was measured: their
    runs are taken from the last file only; ``PREFIX@K`` from the last K files (where
    prefixes overlap, the longest that matches a solver decides). Returns the number of
    probe runs fitted.

    Raises SystemExit (with the reason) for files of several devices or none usable, and
    for a ``stale`` prefix that is empty, has no run in the last file (a typo, or a solver
    the last file did not measure, which would lose its calibration), comes with one
    file, or keeps K files of fewer than K + 1 (nothing left out) or fewer than 1. Prints how
    many runs each prefix left out."""
    sys.path.insert(0, str(REPO / "tools"))
    import replay_evaluate as rp
    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.store import Store
    from wticonv.measuring.calibrate import store_fit

    if stale and len(files) < 2:
        raise SystemExit("make_system_db: --stale needs at least two --refit files (it keeps "
                         "the stale solvers' runs of the last one only)")
    keep = {}
    for spec in stale:
        prefix, at, k = spec.partition("@")
        if not prefix:
            raise SystemExit(f"make_system_db: --stale {spec!r} would match every solver: "
                             "give a solver id or an id prefix such as winograd.")
        if prefix in keep:
            raise SystemExit(f"make_system_db: --stale {prefix} given twice: give each prefix "
                             "once (with the K it needs)")
        if at and not (k.isascii() and k.isdigit() and 1 <= int(k) < len(files)):
            raise SystemExit(f"make_system_db: --stale {spec}: K must be a whole number from 1 "
                             f"to {len(files) - 1} (the files measured since the change, of "
                             f"the {len(files)} given)")
        keep[prefix] = int(k) if at else 1
    stale = tuple(keep)
    rows, dropped = [], dict.fromkeys(stale, 0)
    try:
        loaded = [rp.load(f, "calibration") for f in files]
    except rp.ReplayError as e:
        raise SystemExit(f"make_system_db: {e}") from None
    for prefix in stale:
        if not any(str(r.get("solver")).startswith(prefix) for r in loaded[-1]):
            raise SystemExit(f"make_system_db: --stale {prefix}: the last file, {files[-1]}, "
                             "has no run of such a solver, so it would be left uncalibrated; "
                             "check the prefix, or give a file that measured it last")
    for i, file_rows in enumerate(loaded):
        for r in file_rows:
            # the longest matching prefix decides (direct.chanvec@2 over direct.)
            hit = max((s for s in stale if str(r.get("solver")).startswith(s)), key=len,
                      default=None)
            if hit is not None and i < len(files) - keep[hit]:
                dropped[hit] += 1
            else:
                rows.append(r)
    for prefix, n in dropped.items():
        print(f"make_system_db: --stale {prefix}: {n} run(s) of the earlier files left out",
              file=sys.stderr)
    names = {r.get("device") for r in rows}
    if len(names) != 1:
        raise SystemExit(f"make_system_db: --refit files of several devices ({sorted(names)}): "
                         "give one device's files")
    if names.pop() not in key.split("|"):
        raise SystemExit(f"make_system_db: the files were measured on {rows[0]['device']!r}, "
                         f"which the device key {key!r} does not name")
    registry = SolverRegistry()
    device = rp.device_for(rows, registry=registry)
    runs = rp.calibration_runs(registry, device, rows)
    if not runs:
        raise SystemExit("make_system_db: no probe run of an installed solver in the files")
    store_fit(Store(cache_dir), key, registry, runs, device)
    return len(runs)


def _export_command(out: Path, device: str, match: str | None) -> list[str]:
    """`wticonv db export` of a device's calibration and corrections into ``out``."""
    export = ["db", "export", str(out.relative_to(REPO)), "--device", device,
              "--kind", "calibration", "--kind", "correction"]
    return export + (["--match", match] if match else [])


def _wticonv(args: list[str], env: dict) -> None:
    """Run ``wticonv ARGS`` (printed first) in the repository with ``env``."""
    print("+ wticonv " + shlex.join(args), file=sys.stderr)
    subprocess.run([sys.executable, "-m", "wticonv", *args], env=env, check=True, cwd=REPO)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("device", help="gpu, cpu or P:D (as `wticonv devices` lists them)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="calibrate's budget (default: its own, 50 s on GPUs, 240 s on CPUs)")
    ap.add_argument("--name", default=None, help="file name in plugins/sysdb, without .jsonl")
    ap.add_argument("--match", default=None,
                    help="device pattern the records serve (default: for a PoCL CPU "
                         "'<platform>|<driver>-<LLVM target>-*|<driver version>', every CPU "
                         "model of that target; else the device's exact key); 'exact' for "
                         "the device's own key")
    ap.add_argument("--cache", default=None,
                    help="use this cache directory (default: a fresh temporary one)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="export the cache's calibration as it is (with --cache)")
    ap.add_argument("--refit", nargs="+", metavar="CAL.csv", default=None,
                    help="refit from these recorded probes (`wticonv calibrate --csv`) "
                         "instead of calibrating; DEVICE is then the device key "
                         "(platform|name|driver version) the records serve")
    ap.add_argument("--stale", action="append", default=[], metavar="PREFIX[@K]",
                    help="with --refit: a solver id or id prefix (e.g. winograd.) whose "
                         "kernels changed since all but the last --refit file were measured: "
                         "its runs come from the last file only; PREFIX@K from the last K "
                         "files (repeatable)")
    args = ap.parse_args(argv)
    if args.stale and not args.refit:
        ap.error("--stale goes with --refit")
    if args.no_calibrate and not args.cache:
        ap.error("--no-calibrate needs --cache: a fresh cache holds no calibration")
    if args.refit:
        if args.device.count("|") != 2 or not args.name:
            ap.error("--refit needs DEVICE as a device key (platform|name|driver version) "
                     "and --name")
        return _export_refit(args, argv)
    with tempfile.TemporaryDirectory(prefix="wticonv-sysdb-") as tmp:
        env = dict(os.environ, WTICONV_CACHE_DIR=args.cache or tmp)
        env.pop("WTICONV_SYSTEM_DB", None)
        dev = _device(args.device, env)
        name, match = defaults(dev, cpu_model())
        name = args.name or name
        match = None if args.match == "exact" else (args.match or match)
        calibrate = ["calibrate", "--device", args.device, "--strict"]
        if args.budget_s:
            calibrate += ["--budget-s", f"{args.budget_s:g}"]
        out = OUT_DIR / f"{name}.jsonl"
        export = _export_command(out, args.device, match)
        comment = (f"tools/make_system_db.py {shlex.join(argv or sys.argv[1:])}: "
                   + ("" if args.no_calibrate else f"wticonv {shlex.join(calibrate)}, then ")
                   + f"wticonv {shlex.join(export)}, on {dev['key']}")
        if not args.no_calibrate:
            _wticonv(calibrate, env)
        _wticonv(export + ["--comment", comment], env)
    print(f"wrote {out.relative_to(REPO)}; `make setup` has it installed (an editable "
          "install reads it in place): check with `wticonv db system`, then commit it",
          file=sys.stderr)
    return 0


def _export_refit(args, argv) -> int:
    """--refit: the refitted calibration stored in a fresh cache, exported for the key."""
    key = args.device
    out = OUT_DIR / f"{args.name}.jsonl"
    with tempfile.TemporaryDirectory(prefix="wticonv-sysdb-") as tmp:
        n = refit(key, args.refit, tmp, tuple(args.stale))
        export = _export_command(out, key, None if args.match == "exact" else args.match)
        comment = (f"tools/make_system_db.py {shlex.join(argv or sys.argv[1:])}: refitted "
                   f"to {n} recorded probe runs with this checkout's models, then wticonv "
                   f"{shlex.join(export)}")
        env = dict(os.environ, WTICONV_CACHE_DIR=tmp)
        env.pop("WTICONV_SYSTEM_DB", None)
        _wticonv(export + ["--comment", comment], env)
    print(f"wrote {out.relative_to(REPO)} ({n} probe runs refitted); commit it",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        # wticonv printed its own error above: one line on what failed, no traceback
        print(f"make_system_db: `{shlex.join(map(str, e.cmd[2:]))}` failed (exit status "
              f"{e.returncode}); nothing was written", file=sys.stderr)
        sys.exit(e.returncode or 1)
