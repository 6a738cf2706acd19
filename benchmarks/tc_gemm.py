"""Tensor-core SGEMM (kernels/nv/sgemm_tc.cl, 3xTF32 and TF32) against cuBLAS, same run.

    python benchmarks/tc_gemm.py [--sizes 4096x4096x4096,2048x4096x2048] [-i 20]
        [--configs 128x128x64x32,...] [--json OUT.json]

Issue #19's GEMM targets: 3xTF32 at least 1.5x cuBLAS FP32's speed with a max relative
error against float64 no worse than cuBLAS FP32's; TF32 at least 0.8x cuBLAS TF32's.
For each size (M x N x K, row-major float32, uniform(-1, 1) operands) and each tile
configuration (TC_BM x TC_BN x TC_WM x TC_WN [x TC_BK]) it prints our 3xTF32 and TF32 times and
TFLOP/s (best of the iterations, OpenCL profiling events), cuBLAS's FP32 (TF32 off) and
TF32 times (best of the iterations, CUDA events), and every product's max relative error
against a float64 product on 64 sampled rows (max |C - ref| / max |ref|).

Needs an NVIDIA GPU of compute capability 8.0 or newer through NVIDIA's OpenCL (inline
PTX mma.sync), and PyTorch with CUDA for cuBLAS.
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
from wticonv.runtime.kit import tensor_cores

KERNEL = (Path(__file__).resolve().parents[1]
          / "plugins/gemm/src/wticonv_gemm/kernels/nv/sgemm_tc.cl")


def build(dev, bm, bn, wm, wn, bk, split):
    opts = (f"-DTC_BM={bm} -DTC_BN={bn} -DTC_WM={wm} -DTC_WN={wn} -DTC_BK={bk} "
            f"-DTC_SPLIT={int(split)}")
    prg = cl.Program(dev.context, KERNEL.read_text()).build(options=opts)
    return prg.sgemm_tc, 32 * (bm // wm) * (bn // wn)


def ours(dev, bufs, M, N, K, cfg, split, iterations):
    bm, bn, wm, wn, bk = cfg if len(cfg) == 5 else (*cfg, 16)
    if M % bm or N % bn or K % bk:
        return None, None
    kern, threads = build(dev, bm, bn, wm, wn, bk, split)
    kern.set_args(np.int32(M), np.int32(N), np.int32(K), bufs["a"], bufs["b"], bufs["c"])
    gsize, lsize = (threads * N // bn, M // bm), (threads, 1)
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096x4096x4096,2048x4096x2048",
                    help="comma-separated MxNxK")
    ap.add_argument("--configs", default="128x128x64x32,128x256x64x64,256x128x64x64,"
                                         "128x128x64x64,128x128x64x32x32,128x256x64x64x32,"
                                         "128x128x64x64x32,256x128x64x64x32",
                    help="comma-separated tile configurations BMxBNxWMxWN[xBK] (BK "
                         "default 16)")
    ap.add_argument("-i", "--iterations", type=int, default=20)
    ap.add_argument("--json", metavar="OUT.json", help="write every figure here")
    args = ap.parse_args(argv)
    handle = wticonv.Handle("gpu")
    dev = handle.device
    if not tensor_cores(dev):
        sys.exit(f"tc_gemm: {dev.info.name} ({dev.info.platform}) has no tensor cores this "
                 "kernel reaches: it needs NVIDIA's OpenCL on compute capability 8.0+")
    torch = load_torch(handle)
    configs = [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")]
    rng = np.random.default_rng(0)
    out = []
    for size in args.sizes.split(","):
        M, N, K = (int(v) for v in size.lower().split("x"))
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
        for cfg in configs:
            for split in (True, False):
                try:
                    t, C = ours(dev, bufs, M, N, K, cfg, split, args.iterations)
                except cl.Error as e:
                    print(f"  {'x'.join(map(str, cfg))} {'3xtf32' if split else 'tf32'}: "
                          f"failed: {str(e).splitlines()[0][:300]}", flush=True)
                    continue
                if t is None:
                    continue
                err = rel_error(C, A, B, rows)
                base = t32 if split else ttf
                name = "3xtf32" if split else "tf32"
                print(f"  {'x'.join(map(str, cfg)):16} {name:6} {t:.3f} ms "
                      f"{flops / t / 1e9:6.1f} TFLOP/s  {base / t:.2f}x cuBLAS "
                      f"{'FP32' if split else 'TF32'}  err {err:.1e}", flush=True)
                row["ours"].append({"config": cfg, "class": name, "ms": t, "err": err})
        for b in bufs.values():
            b.release()
        out.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
