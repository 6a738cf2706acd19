"""Gradient errors of ResNet-18 (N=2) through wticonv.torch and through torch's own FP32
convolutions, each against a float64 copy of the model: the noise floor the test's
tolerance is set from (core/tests/test_torch_training.py::test_resnet18_matches_torch).

    python benchmarks/torch_resnet18_errors.py [--device cpu|gpu]
"""

from __future__ import annotations

import argparse
import copy
import sys

from peers import load_torch  # first: sets OpenMP's env before torch loads

import wticonv
from wticonv.problem.reference import rms_range


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("--train", action="store_true",
                    help="batch norm in training mode (default: eval, as the test)")
    args = ap.parse_args(argv)
    handle = wticonv.Handle(args.device, zero_copy=True)
    torch = load_torch(handle)
    import wticonv.torch as wt

    torch.manual_seed(0)
    try:
        import torchvision

        ref = torchvision.models.resnet18(weights=None)
    except ImportError:
        from models import resnet18_from_nn

        print("torchvision is not installed: ResNet-18 built from torch.nn")
        ref = resnet18_from_nn(torch.nn)
    f64 = copy.deepcopy(ref).double()
    ref.train(args.train)
    f64.train(args.train)
    ours = copy.deepcopy(ref)
    wt.replace_convs(ours, handle=handle)
    x = torch.randn(args.n, 3, 224, 224)
    outs = [m(x.double() if m is f64 else x) for m in (ref, f64, ours)]
    dy = torch.randn_like(outs[0])
    for m, y in zip((ref, f64, ours), outs, strict=True):
        y.backward(dy.double() if m is f64 else dy)
    y64 = outs[1].detach().numpy()
    print(f"output: torch fp32 {rms_range(outs[0].detach().double().numpy(), y64):.2e}  "
          f"wticonv {rms_range(outs[2].detach().double().numpy(), y64):.2e}")
    worst = 0.0
    for (name, p), q, r in zip(ours.named_parameters(), ref.parameters(), f64.parameters(),
                               strict=True):
        g64 = r.grad.numpy()
        e_t = rms_range(q.grad.double().numpy(), g64)
        e_w = rms_range(p.grad.double().numpy(), g64)
        ratio = e_w / max(e_t, 1e-12)
        worst = max(worst, ratio)
        print(f"{name:32} torch fp32 {e_t:.2e}  wticonv {e_w:.2e}  ratio {ratio:6.1f}")
    print(f"largest ratio wticonv / torch fp32: {worst:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
