"""PyTorch, the peer the benchmarks measure against: loading and configuring it, timing it.

PyTorch is a benchmark-only dependency (``.venv/bin/pip install torch==2.13.0``; the GPU
machine has it with cuDNN). Import this module before anything imports torch: it keeps
PyTorch's OpenMP threads from spinning after each call, which would steal the cores of the
OpenCL runtime's threads.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("KMP_BLOCKTIME", "0")

__all__ = ["load_torch", "torch_timer"]


def load_torch(handle):
    """torch, set up to compare fairly with ``handle``'s device: FP32 without TF32 on the
    GPU (cuBLAS and cuDNN), as many CPU threads as the device has compute units.

    Exits with a message saying how to install it when PyTorch is missing.
    """
    try:
        import torch
    except ImportError:
        sys.exit("this benchmark compares with PyTorch: .venv/bin/pip install torch==2.13.0 "
                 "(see benchmarks/README.md)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if handle.device.kind != "gpu":
        torch.set_num_threads(handle.device.info.compute_units)
    return torch


def torch_timer(torch, device: str, p, direction: str, iterations: int) -> float:
    """Best time in ms of PyTorch's FP32 convolution of problem ``p`` in ``direction``."""
    dev = torch.device("cuda" if device == "gpu" else "cpu")
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.rand(p.x_shape, generator=g).to(dev)
    w = torch.rand(p.w_shape, generator=g).to(dev)
    dy = torch.rand(p.y_shape, generator=g).to(dev)
    kw = dict(stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
              dilation=(p.dilation_h, p.dilation_w), groups=p.groups)
    F, grad = torch.nn.functional, torch.nn.grad
    fn = {"fwd": lambda: F.conv2d(x, w, **kw),
          "bwd": lambda: grad.conv2d_input(p.x_shape, w, dy, **kw),
          "wrw": lambda: grad.conv2d_weight(x, p.w_shape, dy, **kw)}[direction]
    with torch.no_grad():
        for _ in range(2):
            fn()
        times = []
        for _ in range(iterations):
            if dev.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
    return min(times)
