"""The worker that runs every built-in solver's kernels on Oclgrind (an OpenCL simulator).

Started by ``tests/oclgrind_check.py`` (and so by ``tests/test_oclgrind.py``) in a
subprocess whose environment makes Oclgrind the OpenCL platform and turns its checks on;
see docs/reliability.md, "Oclgrind". It runs, on the first Oclgrind device, as each
device variant of :data:`VARIANTS` (the device's :class:`~wticonv.DeviceInfo` is
replaced, so the solvers plan that kind's kernel family, work-group shapes, vector widths
and splits; Oclgrind itself reports every device type at once, which wticonv classifies
as "other"):

- every solver of the plugins in this repository (``plugins/``) on each problem of
  :func:`problems` it accepts, in each direction: its default plan, and each perf config
  its ``perf_configs`` hook offers, once per direction (on the first problem offering it);
- each result against the float64 reference (the solver's tolerance).

It records every program built and every kernel launched, the kernels each ``.cl`` file
of the plugins declares (its program built with every macro at its default), and the
directions each solver accepts on these problems and on the conformance corpus, and
writes them as JSON (``--json``). Exit status 0 when it ran (wrong results are in the
report), :data:`NO_OCLGRIND` when no Oclgrind device is present. ``--selftest`` instead
runs three deliberately broken kernels (an out-of-bounds write, a data race, a read of
uninitialized memory), to show that Oclgrind's reports reach the caller.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "plugins"
NO_OCLGRIND = 3

#: Device variants the solvers plan for: kind, compute units, preferred float vector width,
#: measured peak FP32 FLOP/s and bandwidth bytes/s. "cpu" is the development machines'
#: 2-core AVX-512 CPU, "gpu" an NVIDIA H200 (the figures of the plugins' tests and docs);
#: the narrower CPUs make the GEMM plugin build its AVX2 and SSE/NEON kernels; a GPU of
#: one compute unit picks the large SGEMM tiles (128 x 128) that big layers get on the
#: H200, on the one problem (``cases``) big enough for them.
VARIANTS = {
    "cpu": dict(kind="cpu", compute_units=2, vector_width=16, peak=469e9, bandwidth=72e9),
    "cpu-vw8": dict(kind="cpu", compute_units=2, vector_width=8, peak=200e9, bandwidth=50e9),
    "cpu-vw4": dict(kind="cpu", compute_units=1, vector_width=4, peak=50e9, bandwidth=20e9),
    "gpu": dict(kind="gpu", compute_units=132, vector_width=1, peak=62.6e12,
                bandwidth=4.1e12),
    "gpu-1cu": dict(kind="gpu", compute_units=1, vector_width=1, peak=0.5e12,
                    bandwidth=0.1e12, cases=("1x1, 256 x 256",)),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """A forward problem, run in every direction; ``only``: the solvers that run it (a
    shape that reaches one plan branch but would cost every solver minutes). A case that
    a variant names in its ``cases`` runs on that variant alone. ``settings``: ``(module,
    name, value)`` module constants set while the case runs (a plan branch that real
    sizes reach only on problems far too big to simulate); its problem must be its own
    (a handle keeps each problem's plan)."""

    problem: object
    only: tuple[str, ...] = ()
    settings: tuple[tuple[str, str, object], ...] = ()


@contextlib.contextmanager
def _settings(settings):
    """``settings`` (see :class:`Case`) set, then put back."""
    import importlib

    old = []
    try:
        for module, name, value in settings:
            mod = importlib.import_module(module)
            old.append((mod, name, getattr(mod, name)))
            setattr(mod, name, value)
        yield
    finally:
        for mod, name, value in reversed(old):
            setattr(mod, name, value)


def problems() -> dict[str, Case]:
    """The problems: tiny (Oclgrind simulates every work-item), but at the edges: sizes
    no multiple of a tile, vector or work-group, padding, strides, dilations, groups,
    depthwise with and without a multiplier, 1x1 and non-square filters."""
    from wticonv import ConvProblem as P

    return {
        "3x3 s1 pad 1, odd sizes": Case(P(2, 3, 7, 6, 5, 3, 3, pad_h=1, pad_w=1)),
        "3x3 s2 pad 1": Case(P(1, 3, 9, 7, 4, 3, 3, pad_h=1, pad_w=1, stride_h=2,
                               stride_w=2)),
        "1x1": Case(P(2, 5, 5, 3, 6, 1, 1)),
        "1x1 s2": Case(P(1, 4, 7, 5, 3, 1, 1, stride_h=2, stride_w=2)),
        "5x2 pad 2x1": Case(P(1, 2, 6, 7, 3, 5, 2, pad_h=2, pad_w=1)),
        "groups 2, dilation 2": Case(P(1, 4, 6, 7, 6, 3, 2, pad_h=2, pad_w=1, dilation_h=2,
                                       dilation_w=2, groups=2)),
        "depthwise 3x3": Case(P(1, 4, 7, 6, 4, 3, 3, pad_h=1, pad_w=1, groups=4)),
        "depthwise 3x3 s2, multiplier 2": Case(P(1, 3, 9, 7, 6, 3, 3, pad_h=1, pad_w=1,
                                                 stride_h=2, stride_w=2, groups=3)),
        "depthwise 5x5": Case(P(1, 2, 7, 9, 2, 5, 5, pad_h=2, pad_w=2, groups=2)),
        # 8 x 8 channels: direct.naive's serial backward weights (dw of 576 elements) and
        # direct.tiled's packed-filter perf configs (reductions of 72).
        "3x3 s1, 8 channels": Case(P(1, 8, 5, 5, 8, 3, 3, pad_h=1, pad_w=1),
                                   ("direct.naive", "direct.tiled", "gemm.im2col")),
        # Enough rows for direct.depthwise to split its backward-weights reduction.
        "depthwise, long reduction": Case(P(2, 2, 35, 64, 2, 3, 3, pad_h=1, pad_w=1,
                                            groups=2), ("direct.depthwise",)),
        # GEMMs of 256 x 256 (forward: K x pixels) for the 128 x 128 SGEMM tiles.
        "1x1, 256 x 256": Case(P(1, 8, 16, 16, 256, 1, 1), ("gemm.1x1",)),
        # direct.chanvec's register blocks (K/G a multiple of 64, then of 32), with
        # padding, a stride and positions that cross images
        "chanvec 6 x 64, 3x3 s2 pad 1": Case(P(2, 3, 5, 4, 64, 3, 3, pad_h=1, pad_w=1,
                                                stride_h=2, stride_w=2), ("direct.chanvec",)),
        "chanvec 12 x 32, groups 2": Case(P(1, 4, 3, 4, 64, 2, 3, pad_h=1, groups=2),
                                          ("direct.chanvec",)),
        # 8 input channels: backward weights by the plain kernel (the two above have
        # fewer channels than slots: chanvec_wrw_slots)
        "chanvec 8 channels, 3x3 pad 1": Case(P(1, 8, 4, 3, 64, 3, 3, pad_h=1, pad_w=1),
                                              ("direct.chanvec",)),
        # the 12 x 16 block (groups of 16 channels) in every direction: backward data at
        # stride 1 runs chanvec_fwd on dy with chanvec_pack_bwd's flipped filters
        "chanvec 12 x 16, groups 2, all directions": Case(
            P(1, 32, 3, 3, 32, 3, 3, pad_h=1, pad_w=1, groups=2), ("direct.chanvec",)),
        # backward weights in chunks of rows (each row a chunk: 3 x 4 partial dws, then
        # chanvec_wrw_sum), by both kernels (3 channels: the slots kernel; 8: the plain)
        "chanvec wrw in chunks of rows": Case(
            P(3, 3, 7, 5, 64, 3, 3, pad_h=1, pad_w=1, stride_h=2), ("direct.chanvec",),
            settings=(("wticonv_direct.chanvec_plan", "WRW_CHUNK_ABOVE_BYTES", 0),
                      ("wticonv_direct.chanvec_plan", "WRW_CHUNK_BYTES", 1))),
        "chanvec wrw in chunks of rows, 8 channels": Case(
            P(2, 8, 5, 4, 64, 3, 3, pad_h=1, pad_w=1), ("direct.chanvec",),
            settings=(("wticonv_direct.chanvec_plan", "WRW_CHUNK_ABOVE_BYTES", 0),
                      ("wticonv_direct.chanvec_plan", "WRW_CHUNK_BYTES", 1))),
        # backward data's flipped filters of one tap (copied 16 channels at a time) and
        # of over 16 taps (element by element): chanvec_pack_bwd
        "chanvec 1x1, 16 channels": Case(P(1, 16, 3, 3, 16, 1, 1), ("direct.chanvec",)),
        "chanvec 5x5 pad 2, 16 channels": Case(P(1, 16, 4, 3, 16, 5, 5, pad_h=2, pad_w=2),
                                               ("direct.chanvec",)),
        # chanvec_fwd's grid the other way round (channel blocks first), forced on a small
        # input; gemm.im2col's forward through the row buffer and sgemm_nt, forced on a
        # short reduction
        "chanvec channel blocks first": Case(
            P(1, 8, 4, 3, 128, 3, 3, pad_h=1, pad_w=1, stride_w=2), ("direct.chanvec",),
            settings=(("wticonv_direct.chanvec_plan", "KB_FAST_INPUT_BYTES", 0),)),
        "im2col forward through the row buffer": Case(
            P(2, 6, 5, 4, 10, 3, 3, pad_h=1, pad_w=1), ("gemm.im2col",),
            settings=(("wticonv_gemm.plan", "FWD_ROWS_MIN_REDUCTION", 1),)),
    }


#: Solvers that accept problems on these variants only (elsewhere they decline all):
#: direct.chanvec needs a CPU with 8- or 16-float vectors.
ONLY_ON = {"direct.chanvec": ("cpu", "cpu-vw8")}


def builtin_plugins() -> dict[str, Path]:
    """Package name -> folder of the plugin packages under ``plugins/*/src``."""
    return {pkg.name: pkg for pkg in sorted(PLUGINS.glob("*/src/*"))
            if (pkg / "__init__.py").is_file()}


def _spliced(path: Path) -> str:
    """``path``'s text with its ``#include`` lines spliced in by the core's kernel library
    (wticonv.runtime.kit), as the plugins build it."""
    from wticonv.runtime.kit import KernelLibrary

    return KernelLibrary(path.parent.parent.name, path.parent.name).source(path.name)


def kernel_files() -> dict[str, str]:
    """``"<package>/<file>.cl"`` -> the source the plugin builds from it."""
    return {f"{name}/{f.name}": _spliced(f) for name, pkg in builtin_plugins().items()
            for f in sorted((pkg / "kernels").glob("*.cl"))}


def builtin_solvers(registry) -> list[str]:
    """The registered FP32 solvers whose entry point is in one of :func:`builtin_plugins`:
    the tensor-core classes (``math`` 3xtf32 and tf32) need NVIDIA's OpenCL, and their
    kernels (kernels/nv/) are checked on the GPU (tests/test_gpu.py)."""
    packages = builtin_plugins()
    return [sid for sid in registry.ids()
            if registry.get(sid).entry_point.partition("=")[2].strip().split(".")[0]
            in packages and registry.get(sid).math == "fp32"]


def _normal(source: str) -> str:
    """``source`` without the ``#line`` directives the plugins' loaders add (so that build
    errors name the file, see wticonv.runtime.kernelfiles) and without blank lines, for comparing
    a built source with a file's text."""
    return "\n".join(ln.rstrip() for ln in source.splitlines()
                     if ln.strip() and not ln.startswith("#line "))


class Recorder:
    """Programs built and kernels launched, by source file."""

    def __init__(self, files: dict[str, str]) -> None:
        self.by_source = {_normal(src): name for name, src in files.items()}
        self.programs: dict[int, tuple[str, str]] = {}
        self.builds: dict[tuple[str, str], list[str]] = {}
        self.launched: list[tuple[str, str, str]] = []

    def built(self, source: str, options: str, prg) -> None:
        """Note a program built from ``source`` with ``options``."""
        file = self.by_source.get(_normal(source), "<not a plugin file>")
        self.programs[prg.int_ptr] = (file, options)
        self.builds[(file, options)] = sorted(prg.kernel_names.split(";"))

    def launch(self, kernel) -> None:
        """Note a launch of ``kernel``."""
        file, options = self.programs.get(kernel.program.int_ptr, ("<unknown>", ""))
        self.launched.append((file, kernel.function_name, options))


def recording_device(cl_dev, info, store, recorder: Recorder):
    """A :class:`wticonv.Device` that tells ``recorder`` what it builds and launches."""
    from wticonv import Device

    class RecordingDevice(Device):
        def build(self, source, options=""):
            prg = super().build(source, options)
            recorder.built(source, options, prg)
            return prg

        def enqueue_kernel(self, kernel, global_size, local_size, *args):
            recorder.launch(kernel)
            return super().enqueue_kernel(kernel, global_size, local_size, *args)

    return RecordingDevice(cl_dev, info, store)


def find_oclgrind():
    """(DeviceInfo, pyopencl.Device) of the first Oclgrind device, or None."""
    from wticonv import list_devices

    try:
        devices = list_devices()
    except Exception:  # noqa: BLE001 - no platform at all: no Oclgrind either
        return None
    return next(((i, d) for i, d in devices if i.platform == "Oclgrind"), None)


def declared_kernels(context, files: dict[str, str]) -> dict[str, list[str]]:
    """Kernels each file declares: its program built with every macro at its default."""
    out = {}
    for name, src in files.items():
        try:
            out[name] = sorted(cl.Program(context, src).build().kernel_names.split(";"))
        except cl.Error as e:
            out[name] = [f"<build with default macros failed: {str(e).splitlines()[0]}>"]
    return out


def _accepts(handle, sid: str, p) -> bool:
    from wticonv import WticonvError

    if not handle.registry.call(sid, "is_applicable", problem=p, device=handle.device,
                                workspace_limit=None):
        return False
    try:
        handle.select(p, solver=sid)
    except WticonvError:
        return False
    return True


def _one(handle, sid, p, cfg, data, recorder) -> dict:
    from wticonv import reference, rms_range, solver_tolerance

    first = len(recorder.launched)
    t0 = time.perf_counter()
    run = {"solver": sid, "key": p.key, "direction": p.direction, "perf_config": cfg}
    try:
        out = handle.compute(p, solver=sid, perf_config=cfg, **data)
        err, tol = rms_range(out, reference(p, **data)), solver_tolerance(handle, sid, p)
        run.update(rms=err, tolerance=tol, ok=bool(err <= tol))
    except Exception as e:  # noqa: BLE001 - reported, the next run goes on
        run.update(ok=False, error=f"{type(e).__name__}: {e}")
    run["seconds"] = round(time.perf_counter() - t0, 3)
    run["kernels"] = recorder.launched[first:]
    return run


def run_variant(name: str, found, store, recorder, solvers, quick=False, log=sys.stderr):
    """Every solver on every problem and direction it accepts, on device variant ``name``
    (``quick``: the first problem it accepts per direction, default plans only). Returns
    (runs, {solver: directions accepted on the problems and the conformance corpus})."""
    from wticonv import DIRECTIONS, Handle
    from wticonv.runtime.kit import FALLBACK_LAUNCH_OVERHEAD_S
    from wticonv.testing import default_corpus

    info, cl_dev = found
    v = VARIANTS[name]
    dinfo = dataclasses.replace(info, kind=v["kind"], name=f"{info.name} as {name}",
                                compute_units=v["compute_units"],
                                vector_width=v["vector_width"])
    store.put_device_figures(dinfo.key, v["peak"], v["bandwidth"])
    # the development machines' launch overhead: the plans (and the kernels they reach)
    # do not depend on how fast the simulator launches
    store.put_launch_overhead(dinfo.key, FALLBACK_LAUNCH_OVERHEAD_S[v["kind"]])
    handle = Handle(recording_device(cl_dev, dinfo, store, recorder))
    named = {c for var in VARIANTS.values() for c in var.get("cases", ())}
    cases = {label: c for label, c in problems().items()
             if (label in v["cases"] if "cases" in v else label not in named)}
    runs, accepts = [], {}
    rng = np.random.default_rng(0)
    for sid in solvers:
        mine = [(label, c.problem, c.settings) for label, c in cases.items()
                if not c.only or sid in c.only]
        if not mine:
            continue
        every = [p for _, p, _ in mine] + ([] if "cases" in v else default_corpus())
        accepts[sid] = [d for d in DIRECTIONS
                        if any(_accepts(handle, sid, p.with_direction(d)) for p in every)]
        tried: dict[str, set] = {d: set() for d in DIRECTIONS}
        for label, p0, settings in mine:
            with _settings(settings):
                runs += _directions(handle, name, sid, label, p0, quick, tried, rng,
                                    recorder, log)
    return runs, accepts


def _directions(handle, name, sid, label, p0, quick, tried, rng, recorder, log) -> list:
    """``sid`` on ``p0`` in every direction it accepts (see :func:`run_variant`)."""
    from wticonv import DIRECTIONS

    runs = []
    for d in DIRECTIONS:
        p = p0.with_direction(d)
        if (quick and tried[d]) or not _accepts(handle, sid, p):
            continue
        configs = [None]
        if handle.registry.get(sid).tunable and not quick:
            configs += [c for c in handle.registry.call(
                sid, "perf_configs", problem=p, device=handle.device,
                workspace_limit=None) if c not in tried[d]]
        tried[d].update(configs)
        data = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in
                (("x", p.x_shape), ("w", p.w_shape), ("y", p.y_shape))}
        for cfg in configs:
            run = _one(handle, sid, p, cfg, data, recorder)
            runs.append({"variant": name, "problem": label, **run})
            print(f"{name} {sid} {d} {label} {cfg or ''}: {run['seconds']} s "
                  f"{'ok' if run['ok'] else 'FAILED'}", file=log, flush=True)
    return runs


def selftest(found) -> None:
    """Run an out-of-bounds write, a data race and a read of uninitialized local memory,
    for Oclgrind to report."""
    ctx = cl.Context([found[1]])
    queue = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, """
        __kernel void write_past_end(__global float *a) { a[get_global_id(0) + 1] = 1.0f; }
        __kernel void racy_sum(__global float *a) { a[0] += 1.0f; }
        __kernel void read_uninitialized(__global float *a) {
            __local float t[16];
            a[get_local_id(0)] = t[get_local_id(0)];
        }""").build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=np.zeros(16, np.float32))
    for kernel in (prg.write_past_end, prg.racy_sum, prg.read_uninitialized):
        kernel.set_args(buf)
        cl.enqueue_nd_range_kernel(queue, kernel, (16,), (16,))
    queue.finish()


def main(argv=None) -> int:
    """Run the kernels (see module docstring); returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="where to write the report")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="device variants to plan for (default: all)")
    ap.add_argument("--solvers", default="", help="comma-separated solver ids (default: "
                    "every solver of the plugins in this repository)")
    ap.add_argument("--skip", default="", help="comma-separated solver ids to leave out")
    ap.add_argument("--quick", action="store_true", help="only the first problem each "
                    "solver accepts per direction, with its default plan")
    ap.add_argument("--selftest", action="store_true", help="run three broken kernels")
    args = ap.parse_args(argv)
    from wticonv.contract.registry import SolverRegistry
    from wticonv.db.store import Store

    found = find_oclgrind()
    if found is None:
        print("no Oclgrind OpenCL device", file=sys.stderr)
        return NO_OCLGRIND
    if args.selftest:
        selftest(found)
        return 0
    builtin = builtin_solvers(SolverRegistry())
    solvers = [sid for sid in (args.solvers.split(",") if args.solvers else builtin)
               if sid not in args.skip.split(",")]
    files = kernel_files()
    recorder = Recorder(files)
    runs, accepts = [], {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp))
        for name in args.variants.split(","):
            r, accepts[name] = run_variant(name, found, store, recorder, solvers, args.quick)
            runs += r
    report = {
        "device": dataclasses.asdict(found[0]), "builtin_solvers": builtin,
        "solvers": solvers, "variants": args.variants.split(","),
        "seconds": round(time.perf_counter() - t0, 1), "accepts": accepts,
        "declared": declared_kernels(cl.Context([found[1]]), files), "runs": runs,
        "builds": [{"file": f, "options": o, "kernels": k}
                   for (f, o), k in recorder.builds.items()],
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
