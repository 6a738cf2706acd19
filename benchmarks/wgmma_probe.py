"""Whether NVIDIA's OpenCL reaches the H200's warpgroup tensor-core instructions (wgmma,
sm_90a), and how fast they run against mma.sync.

    python benchmarks/wgmma_probe.py [-i ITERATIONS]

NVIDIA's OpenCL compiler targets sm_90, where ptxas refuses wgmma. The kernels
(benchmarks/wgmma_probe.cl) write those instructions as deferred PTX lines, and
the program cache (``wticonv.runtime.ptx``, as for kernels/nv/sgemm_wg.cl) turns the
compiled PTX into sm_90a PTX, built as a binary. It prints:

- the max relative error of one warpgroup's 64x64x8 product (A from registers, B from
  local memory in the no-swizzle K-major layout with core matrices 128 bytes apart along
  k and 256 along n) against float64: TF32 precision (about 1e-3) means the layout and
  descriptor are right;
- the TF32 rate of wgmma m64n128k8 and of mma.sync m16n8k8 on operands already in
  registers and local memory (no loads), for 1 to 8 work-groups per compute unit.

Raw output: benchmarks/results/wgmma-probe-h200.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyopencl as cl
import wticonv
import wticonv_gemm
from wticonv.runtime.kit import wgmma


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("-i", "--iterations", type=int, default=2000,
                    help="loop trips per work-group in the rate kernels (default %(default)s)")
    args = ap.parse_args(argv)
    if not 1 <= args.iterations < 2**31:
        ap.error(f"-i {args.iterations}: give 1 to 2^31 - 1 loop trips")
    try:
        handle = wticonv.Handle("gpu")
    except wticonv.WticonvError as e:
        sys.exit(f"wgmma_probe: {e} (it needs an NVIDIA GPU of compute capability 9.0 "
                 "through NVIDIA's OpenCL)")
    if not wgmma(handle.device):
        sys.exit("wgmma_probe: needs an NVIDIA GPU of compute capability 9.0 (H100, H200) "
                 "through NVIDIA's OpenCL")
    dev, ctx, q = handle.device.cl_device, handle.device.context, handle.device.queue
    include = Path(wticonv_gemm.__file__).parent / "kernels"
    src = (Path(__file__).with_suffix(".cl")).read_text()
    # the program cache undefers the PTX (wticonv.runtime.ptx), as for sgemm_wg.cl
    prog = handle.device.build(src, f"-I {include}")
    print(f"{dev.name}, {dev.platform.version}: wgmma built through deferred PTX (sm_90a)")

    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (64, 8)).astype(np.float32)
    B = rng.uniform(-1, 1, (8, 64)).astype(np.float32)
    mf = cl.mem_flags
    a_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A)
    b_buf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(B.T))
    d_buf = cl.Buffer(ctx, mf.READ_WRITE, 64 * 64 * 4)
    cl.Kernel(prog, "product")(q, (128,), (128,), a_buf, b_buf, d_buf, np.uint32(128),
                                np.uint32(256))
    D = np.empty((64, 64), np.float32)
    cl.enqueue_copy(q, D, d_buf).wait()
    ref = A.astype(np.float64) @ B
    print(f"64x64x8 product, core matrices 128 B apart along k, 256 B along n: "
          f"max relative error {np.abs(D - ref).max() / np.abs(ref).max():.2e}")

    units = dev.max_compute_units
    out = cl.Buffer(ctx, mf.READ_WRITE, 4 * 128 * units * 8)
    iters = np.int32(args.iterations)
    rates = (("wgmma m64n128k8", cl.Kernel(prog, "wgmma_rate"), 4 * 2 * 64 * 128 * 8),
             ("mma.sync m16n8k8", cl.Kernel(prog, "mma_rate"), 4 * 16 * 2 * 16 * 8 * 8))
    for name, kernel, flop_per_trip in rates:
        kernel.set_args(out, iters)
        for per_unit in (1, 2, 4, 8):
            groups = per_unit * units
            best = min(_time(q, kernel, groups) for _ in range(3))
            print(f"{name}: {per_unit} work-groups per compute unit: {best * 1e3:.3f} ms, "
                  f"{flop_per_trip * groups * args.iterations / best / 1e12:.1f} TFLOP/s")
    return 0


def _time(q, kernel, groups: int) -> float:
    ev = cl.enqueue_nd_range_kernel(q, kernel, (128 * groups,), (128,))
    ev.wait()
    return (ev.profile.end - ev.profile.start) * 1e-9


if __name__ == "__main__":
    sys.exit(main())
