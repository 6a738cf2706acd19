"""Tensor-core SGEMM (kernels/nv/sgemm_tc.cl and, for wg... tiles, the wgmma kernel
kernels/nv/sgemm_wg.cl; 3xTF32 and TF32) against cuBLAS, same run.

    python benchmarks/tc_gemm.py [--sizes 4096x4096x4096,2048x4096x2048] [-i 20]
        [--classes 3xtf32,tf32] [--configs 128x128x64x32x16x16x3,wg128x128x64x2,...]
        [--json OUT.json]

Issue #19's GEMM targets: 3xTF32 at least 1.5x cuBLAS FP32's speed with a max relative
error against float64 no worse than cuBLAS FP32's; TF32 at least 0.8x cuBLAS TF32's.
For each size (M x N x K, row-major float32, uniform(-1, 1) operands), each class and
each tile configuration (BM x BN x WM x WN x BK x KF x STAGES, wticonv_gemm.tensorcore's
TcConfig fields; default: that class's TC_CONFIGS) it prints our time and TFLOP/s (best
of the iterations, OpenCL profiling events) through the plugin's own launch plan
(wticonv_gemm.sgemm.gemm_launch), cuBLAS's FP32 (TF32 off) and TF32 times (best of the
iterations, CUDA events), and every product's max relative error against a float64
product on 64 sampled rows (max |C - ref| / max |ref|).

Needs an NVIDIA GPU of compute capability 8.0 or newer through NVIDIA's OpenCL (inline
PTX mma.sync; wg... tiles need 9.0, wticonv.runtime.kit.wgmma), and PyTorch with CUDA for
cuBLAS.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import wticonv
from peers import load_torch
from wticonv.runtime.kit import tensor_cores, wgmma
from wticonv_gemm.sgemm import ColMap, GemmOp, Operand, TcConfig, gemm_launch
from wticonv_gemm.tensorcore import TC_CONFIGS


def parse_config(text: str) -> TcConfig:
    """'128x128x64x32x16x16x3' -> TcConfig(128, 128, 64, 32, 16, 16, 3), and the wgmma
    kernel's 'wg128x128x32x3' -> TcConfig(128, 128, 128, 64, 32, 32, 3, engine="wgmma")
    ('wgp...': the same, pipelined: TcConfig.pipe)
    (efficiency 0: not used when timing). Exits with a message for a malformed config or
    a wgmma tile the kernel does not build (BM 64, 128 or 256; BN 64 or 128; BK a
    multiple of 8; at least 2 stages)."""
    wg = text.lower().startswith("wg")
    pipe = text.lower().startswith("wgp")
    try:
        sizes = [int(v) for v in text[2 * wg + pipe:].lower().split("x")]
    except ValueError:
        sizes = []
    if wg and len(sizes) == 4:
        bm, bn, bk, stages = sizes
        if (bm not in (64, 128, 256) or bn not in (64, 128) or bk < 8 or bk % 8
                or not 2 + pipe <= stages <= 8):
            raise SystemExit(f"tc_gemm: config {text!r}: the wgmma kernel takes BM 64, 128 "
                             "or 256, BN 64 or 128, BK a multiple of 8 and 2 to 8 stages "
                             "(3 to 8 pipelined, wgp...)")
        return TcConfig(bm, bn, bm, 64, bk, bk, stages, efficiency=0.0, engine="wgmma",
                        pipe=pipe)
    if wg or len(sizes) != 7 or min(sizes) < 1:
        raise SystemExit(f"tc_gemm: config {text!r} needs BMxBNxWMxWNxBKxKFxSTAGES "
                         "(mma.sync) or wgBMxBNxBKxSTAGES (wgmma, compute capability 9.0)")
    return TcConfig(*sizes, efficiency=0.0)


def matmul_op(M: int, N: int, K: int) -> GemmOp:
    """C (M x N) = A (M x K) . B (K x N), row-major, in buffers "a", "b", "c"."""
    return GemmOp(M, N, K, a=Operand("a", ms=K, ks=1), b=Operand("b", ks=N, cols=ColMap()),
                  c=Operand("c", ms=N, cols=ColMap()))


def ours(dev, bufs, M, N, K, cfg, math, iterations):
    """(best time in ms, C) of our kernel in class ``math`` with tile ``cfg``."""
    launch = gemm_launch(matmul_op(M, N, K), "gpu", dev.info.compute_units, math=math,
                         tc=cfg)
    kern = launch.library.kernel(dev, launch.file, launch.kernel, launch.options)
    kern.set_args(*[bufs[a] if isinstance(a, str) else a for a in launch.args])
    gsize, lsize = launch.global_size, launch.local_size
    cl.enqueue_nd_range_kernel(dev.queue, kern, gsize, lsize).wait()
    times = []
    for _ in range(iterations):
        ev = cl.enqueue_nd_range_kernel(dev.queue, kern, gsize, lsize)
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-6)
    C = np.empty((M, N), np.float32)
    cl.enqueue_copy(dev.queue, C, bufs["c"]).wait()
    return min(times), C


def cublas(torch, A, B, tf32, iterations):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    for _ in range(3):
        a @ b
    times = []
    for _ in range(iterations):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        c = a @ b
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    torch.backends.cuda.matmul.allow_tf32 = False
    return min(times), c.cpu().numpy()


def rel_error(C, A, B, rows) -> float:
    ref = A[rows].astype(np.float64) @ B.astype(np.float64)
    return float(np.abs(C[rows] - ref).max() / np.abs(ref).max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--sizes", default="4096x4096x4096,2048x4096x2048",
                    help="comma-separated MxNxK (default %(default)s)")
    ap.add_argument("--configs", help="comma-separated tile configurations "
                    "BMxBNxWMxWNxBKxKFxSTAGES, or wgBMxBNxBKxSTAGES for the wgmma kernel "
                    "(default: each class's TC_CONFIGS)")
    ap.add_argument("--classes", default="3xtf32,tf32",
                    help="comma-separated classes, 3xtf32 and/or tf32 (default %(default)s)")
    ap.add_argument("-i", "--iterations", type=int, default=20,
                    help="timed runs per kernel (default %(default)s)")
    ap.add_argument("--json", metavar="OUT.json", help="write every figure here")
    args = ap.parse_args(argv)
    classes = args.classes.split(",")
    for c in classes:
        if c not in TC_CONFIGS:
            raise SystemExit(f"tc_gemm: no class {c!r}; use {', '.join(TC_CONFIGS)}")
    given = [parse_config(c) for c in args.configs.split(",")] if args.configs else None
    try:     # the arguments first: a typo should not wait for the device and PyTorch
        sizes = [tuple(int(v) for v in size.lower().split("x")) for size in
                 args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: give MxNxK triples, e.g. 4096x4096x4096")
    if any(len(t) != 3 or min(t) < 1 for t in sizes):
        ap.error(f"--sizes {args.sizes!r}: give MxNxK triples of positive sizes")
    if args.iterations < 1:
        ap.error(f"-i {args.iterations}: give at least 1 timed run")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        ap.error(f"--json {args.json}: its folder does not exist")
    try:
        handle = wticonv.Handle("gpu")
    except wticonv.WticonvError as e:
        sys.exit(f"tc_gemm: {e} (it needs an NVIDIA GPU of compute capability 8.0 or newer "
                 "through NVIDIA's OpenCL)")
    dev = handle.device
    if not tensor_cores(dev):
        sys.exit(f"tc_gemm: {dev.info.name} ({dev.info.platform}) has no tensor cores this "
                 "kernel reaches: it needs NVIDIA's OpenCL on compute capability 8.0+")
    if given and any(c.engine == "wgmma" for c in given) and not wgmma(dev):
        sys.exit(f"tc_gemm: {dev.info.name} cannot run the wg... tiles: the wgmma kernel "
                 "needs compute capability 9.0 (H100, H200)")
    torch = load_torch(handle)

    rng = np.random.default_rng(0)
    out = []
    for M, N, K in sizes:
        flops = 2.0 * M * N * K
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        rows = rng.choice(M, size=min(M, 64), replace=False)
        t32, c32 = cublas(torch, A, B, False, args.iterations)
        ttf, ctf = cublas(torch, A, B, True, args.iterations)
        e32, etf = rel_error(c32, A, B, rows), rel_error(ctf, A, B, rows)
        print(f"{M}x{N}x{K}: cuBLAS FP32 {t32:.3f} ms {flops / t32 / 1e9:.1f} TFLOP/s "
              f"err {e32:.1e}; cuBLAS TF32 {ttf:.3f} ms {flops / ttf / 1e9:.1f} TFLOP/s "
              f"err {etf:.1e}", flush=True)
        row = {"M": M, "N": N, "K": K, "cublas_fp32_ms": t32, "cublas_fp32_err": e32,
               "cublas_tf32_ms": ttf, "cublas_tf32_err": etf, "ours": []}
        mf = cl.mem_flags
        bufs = {"a": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A),
                "b": cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=B),
                "c": cl.Buffer(dev.context, mf.READ_WRITE, 4 * M * N)}
        for math in classes:
            for cfg in given or TC_CONFIGS[math]:
                name = cfg.label
                try:
                    t, C = ours(dev, bufs, M, N, K, cfg, math, args.iterations)
                except Exception as e:  # noqa: BLE001 - a failed build or run: report, go on
                    print(f"  {name} {math}: failed: {str(e).splitlines()[0][:300]}",
                          flush=True)
                    continue
                err = rel_error(C, A, B, rows)
                base, peer = (t32, "FP32") if math == "3xtf32" else (ttf, "TF32")
                print(f"  {name:22} {math:6} {t:.3f} ms {flops / t / 1e9:6.1f} TFLOP/s  "
                      f"{base / t:.2f}x cuBLAS {peer}  err {err:.1e}", flush=True)
                row["ours"].append({"config": name, "class": math, "ms": t, "err": err})
        for b in bufs.values():
            b.release()
        out.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
