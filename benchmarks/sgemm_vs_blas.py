"""Our SGEMM kernels against the vendor BLAS through PyTorch, same sizes, same run.

cuBLAS with TF32 off on the GPU, the CPU BLAS (oneDNN/MKL) on the CPU.

    python benchmarks/sgemm_vs_blas.py                 # default device, 4096^3 and others
    python benchmarks/sgemm_vs_blas.py --device gpu --sizes 4096x4096x4096
    python benchmarks/sgemm_vs_blas.py --device cpu --sizes 1024x1024x1024 --repeat 3
    python benchmarks/sgemm_vs_blas.py --device cpu --sizes 1024x1024x1024 --tune

Prints per size: our time and TFLOP/s (best of the iterations, OpenCL profiling events),
the BLAS time and TFLOP/s (best of the iterations: CUDA events on the GPU, wall clock on
the CPU), the ratio ours / BLAS, the fraction of the device's measured peak, and the
error against a float64 product on a sample of rows. ``--repeat R`` measures both sides R
times in turn (ours, the BLAS, ours, ...) and keeps each side's best, as
``conv_vs_torch.py --repeat`` does: a shared machine's slow spells last seconds, and
without it one side's whole block of iterations can fall in one. ``--tune`` times every
tuning name of the GEMM (``wticonv_gemm.sgemm.gemm_configs``: the blockings on a CPU,
the tiles on a GPU) in each round as well, and reports the fastest, as ``wticonv tune``
would store it for a convolution's GEMM.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import wticonv
from peers import load_torch
from wticonv.runtime import kit
from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, gemm_configs, gemm_launch


def ours(handle, M, N, K, iterations, config=None):
    dev = handle.device
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bufs = {"a": dev.upload(A), "b": dev.upload(B), "c": dev.alloc(4 * M * N)}
    op = GemmOp(M, N, K, a=Operand("a", ms=K, ks=1), b=Operand("b", ks=N, cols=ColMap()),
                c=Operand("c", ms=N, cols=ColMap()))
    launch = gemm_launch(op, "cpu" if dev.kind == "cpu" else "gpu", dev.info.compute_units,
                         config=config)
    kit.enqueue(dev, [launch], bufs)
    dev.queue.finish()
    times = []
    for _ in range(iterations):
        with dev.profile() as prof:
            kit.enqueue(dev, [launch], bufs)
        times.append(prof.kernel_ms)
    C = dev.download(bufs["c"], (M, N))
    rows = rng.choice(M, size=min(M, 64), replace=False)
    ref = A[rows].astype(np.float64) @ B.astype(np.float64)
    err = float(np.abs(C[rows] - ref).max() / np.abs(ref).max())
    for b in bufs.values():
        b.release()
    return min(times), err, launch.options + (f" config {config}" if config else "")


def blas(torch, kind, M, N, K, iterations):
    dev = torch.device("cuda" if kind == "gpu" else "cpu")
    a = torch.rand(M, K, device=dev)
    b = torch.rand(K, N, device=dev)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(iterations):
        if dev.type == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            a @ b
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            a @ b
            times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--sizes", default="4096x4096x4096,2048x4096x2048,1024x1024x1024",
                    help="comma-separated MxNxK")
    ap.add_argument("-i", "--iterations", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure both sides this many times in turn, keeping each side's "
                         "best (default 1)")
    ap.add_argument("--tune", action="store_true",
                    help="also time every tuning name of the GEMM and keep the fastest")
    args = ap.parse_args(argv)
    handle = wticonv.Handle(args.device)
    torch = load_torch(handle)
    kind = "gpu" if handle.device.kind == "gpu" else "cpu"
    peak = handle.device.peak_flops
    print(f"{handle.device.info.name}: measured peak {peak / 1e12:.2f} TFLOP/s; "
          f"BLAS via PyTorch {torch.__version__} ({'cuBLAS, TF32 off' if kind == 'gpu' else 'CPU'})")
    sizes = []
    for size in args.sizes.split(","):
        try:
            M, N, K = (int(v) for v in size.lower().split("x"))
        except ValueError:
            ap.error(f"--sizes: {size!r} is not MxNxK (three integers joined by x)")
        if min(M, N, K) < 1:
            ap.error(f"--sizes: {size!r} has a size below 1")
        sizes.append((M, N, K))
    if args.iterations < 1 or args.repeat < 1:
        ap.error("-i and --repeat must be at least 1")
    for M, N, K in sizes:
        flops = 2 * M * N * K
        t_ours = t_blas = float("inf")
        configs = [None]
        if args.tune:
            op = GemmOp(M, N, K, a=Operand("a", ms=K, ks=1),
                        b=Operand("b", ks=N, cols=ColMap()), c=Operand("c", ms=N, cols=ColMap()))
            configs += gemm_configs(op, kind, handle.device.info.compute_units)
        best = {}
        for _ in range(args.repeat):
            for config in configs:
                t, err, options = ours(handle, M, N, K, args.iterations, config)
                if t < best.get(config, (float("inf"),))[0]:
                    best[config] = (t, err, options)
            t_blas = min(t_blas, blas(torch, kind, M, N, K, args.iterations))
        if args.tune:
            print(f"{M}x{N}x{K}: tuning, ms: " + ", ".join(
                f"{c or 'default'} {v[0]:.3f}" for c, v in best.items()), flush=True)
        t_ours, err, options = min(best.values())
        print(f"{M}x{N}x{K}: ours {t_ours:.3f} ms = {flops / t_ours / 1e9:.2f} TFLOP/s "
              f"({flops / t_ours / 1e9 / (peak / 1e12) * 100:.0f} % of peak); BLAS "
              f"{t_blas:.3f} ms = {flops / t_blas / 1e9:.2f} TFLOP/s; ours/BLAS time "
              f"{t_ours / t_blas:.2f} (ours = {t_blas / t_ours * 100:.0f} % of BLAS); "
              f"max rel. error {err:.1e}; [{options}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
