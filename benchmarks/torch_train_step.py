"""One training step through wticonv.torch against PyTorch's own convolutions, in one run.

A step is forward, backward and an SGD update of a model at batch N (default 8) on
random data. Sides, each from the same initial weights:

- ``torch``: the model as it is (oneDNN on the CPU, cuDNN on the GPU, TF32 off); its
  convolutions' share comes from :mod:`torch.profiler` (``aten::convolution`` and
  ``aten::convolution_backward``: CPU time on the CPU, device time on CUDA);
- ``wticonv``: after :func:`wticonv.torch.replace_convs`, with the convolutions' time
  split by :func:`wticonv.torch.profile` into OpenCL kernels, host work and copies
  between the tensors' device and the host;
- ``wticonv-copies`` (CPU only): the same with a handle without ``zero_copy``, so every
  tensor is copied into an OpenCL buffer and every result out, as before issue 22.

The step time of each side is the best of ``--steps`` timed steps after one warm-up
(which compiles wticonv's kernels and ranks its solvers; the other tenants of a shared
machine only ever slow a step down), split as that step's convolutions went (torch's
split: one more step, under the profiler).
``--device gpu`` runs wticonv on the OpenCL GPU and keeps the model's tensors on CUDA,
so wticonv's convolutions go through host copies. ``--model resnet18`` is torchvision's
(weights=None), or without torchvision the same network built from ``torch.nn``
(:func:`resnet18_from_nn`); ``smallcnn`` (4 convolutions, 32x32 pictures) is quick.

    python benchmarks/torch_train_step.py --model resnet18 -n 8 --out results/step.csv
    python benchmarks/torch_train_step.py --model smallcnn --device cpu --out step.csv
"""

from __future__ import annotations

import argparse
import copy
import csv
import sys
import time

from peers import load_torch  # first: sets OpenMP's env before torch loads

import wticonv
from models import resnet18_from_nn

FIELDS = ["model", "n", "device", "side", "step_ms", "conv_ms", "conv_kernel_ms",
          "conv_host_ms", "conv_copy_ms", "other_ms", "conv_calls"]


def _model(torch, name: str):
    nn = torch.nn
    if name == "resnet18":
        try:
            import torchvision
        except ImportError:
            print("torchvision is not installed: ResNet-18 built from torch.nn (the same "
                  "convolutions, batch norms and layout as torchvision's)", file=sys.stderr)
            return resnet18_from_nn(nn), (3, 224, 224)
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10))
    return model, (3, 32, 32)


def _step(torch, model, opt, x, labels, dev):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
    if dev.type == "cuda":
        torch.cuda.synchronize()


def _torch_conv_ms(torch, model, opt, x, labels, dev) -> float:
    """Time of one step's convolutions in torch's own kernels (torch.profiler), ms."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=acts) as prof:
        _step(torch, model, opt, x, labels, dev)
    total = 0.0
    for e in prof.key_averages():
        if e.key in ("aten::convolution", "aten::convolution_backward"):
            total += (e.device_time_total if dev.type == "cuda" else e.cpu_time_total)
    return total * 1e-3


def _measure(torch, side, model, x, labels, dev, steps, wt):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    _step(torch, model, opt, x, labels, dev)                 # warm-up: builds, ranking
    times, splits = [], []
    for _ in range(steps):
        if wt is None:
            t0 = time.perf_counter()
            _step(torch, model, opt, x, labels, dev)
            times.append((time.perf_counter() - t0) * 1e3)
        else:
            with wt.profile() as t:
                t0 = time.perf_counter()
                _step(torch, model, opt, x, labels, dev)
                times.append((time.perf_counter() - t0) * 1e3)
            splits.append(t)
    best = min(range(steps), key=times.__getitem__)
    row = dict(side=side, step_ms=times[best])
    if wt is None:
        conv = _torch_conv_ms(torch, model, opt, x, labels, dev)
        row.update(conv_ms=conv, conv_kernel_ms=None, conv_host_ms=None, conv_copy_ms=None,
                   conv_calls=None)
    else:
        t = splits[best]
        row.update(conv_ms=t.total_ms, conv_kernel_ms=t.kernel_ms, conv_host_ms=t.host_ms,
                   conv_copy_ms=t.copy_ms, conv_calls=sum(t.calls.values()))
    row["other_ms"] = max(0.0, row["step_ms"] - row["conv_ms"])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("resnet18", "smallcnn"), default="resnet18")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--device", default=None, help="wticonv device spec (gpu, cpu, P:D); "
                    "with a GPU the model's tensors are on CUDA")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per side (after one "
                    "warm-up step)")
    ap.add_argument("--out", default=None, help="write the rows as CSV to this file")
    args = ap.parse_args(argv)
    if args.n < 1 or args.steps < 1:
        ap.error("-n and --steps must be at least 1")
    try:
        handle = wticonv.Handle(args.device, zero_copy=True)
    except wticonv.WticonvError as e:
        ap.error(str(e))
    torch = load_torch(handle)
    import wticonv.torch as wt

    gpu = handle.device.kind == "gpu"
    if gpu and not torch.cuda.is_available():
        ap.error("--device gpu keeps the model on CUDA, and torch has no CUDA device")
    dev = torch.device("cuda" if gpu else "cpu")
    torch.manual_seed(0)
    base, shape = _model(torch, args.model)
    x = torch.randn(args.n, *shape).to(dev)
    labels = torch.randint(0, 10, (args.n,)).to(dev)
    print(f"{args.model} N={args.n}: one training step (forward, backward, SGD), wticonv on "
          f"{handle.device.info.name} against torch {torch.__version__} on {dev.type}; "
          f"best of {args.steps} steps, split of that step")
    sides = [("torch", None), ("wticonv", handle)]
    if not gpu:
        sides.append(("wticonv-copies", wticonv.Handle(handle.device)))
    rows = []
    for side, h in sides:
        model = copy.deepcopy(base).to(dev)
        if h is not None:
            report = wt.replace_convs(model, handle=h)
            if side == "wticonv":
                print(report)
        row = _measure(torch, side, model, x, labels, dev, args.steps,
                       None if h is None else wt)
        row.update(model=args.model, n=args.n, device=handle.device.info.name)
        rows.append(row)

    def f(v):
        return "-" if v is None else f"{v:.1f}"

    print(f"{'side':15} {'step ms':>9} {'conv ms':>9} {'kernels':>9} {'host':>9} "
          f"{'copies':>9} {'other ms':>9}")
    for r in rows:
        print(f"{r['side']:15} {f(r['step_ms']):>9} {f(r['conv_ms']):>9} "
              f"{f(r['conv_kernel_ms']):>9} {f(r['conv_host_ms']):>9} "
              f"{f(r['conv_copy_ms']):>9} {f(r['other_ms']):>9}")
    print(f"wticonv / torch step time: {rows[1]['step_ms'] / rows[0]['step_ms']:.2f}")
    if args.out:
        with open(args.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k) for k in FIELDS})
        print(f"rows written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
