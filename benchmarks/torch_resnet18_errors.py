"""Gradient errors of ResNet-18 (N=2) through wticonv.torch and through torch's own FP32
convolutions, each against a float64 copy of the model: the noise floor the test's
tolerance is set from (core/tests/test_torch_training.py::test_resnet18_matches_torch).

    python benchmarks/torch_resnet18_errors.py [--device cpu|gpu] [--per-call]

``--per-call`` also checks every convolution wticonv runs inside the model (forward,
backward data, backward weights) against torch's float64 result of the same call, and
prints each call's error with the solver that ran it: where a gradient error starts.
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
    ap.add_argument("--without-kinks", action="store_true",
                    help="ReLU -> SiLU, max pool -> average pool (models.without_kinks), "
                         "as the test compares gradients")
    ap.add_argument("--per-call", action="store_true",
                    help="check each convolution call against float64 as it runs")
    ap.add_argument("--poison-workspace", action="store_true",
                    help="fill the handle's workspace with NaN before every run: a solver "
                         "that reads workspace it did not write then returns NaN")
    args = ap.parse_args(argv)
    handle = wticonv.Handle(args.device, zero_copy=True)
    torch = load_torch(handle)
    import wticonv.torch as wt

    if args.per_call:
        _check_each_call(torch, handle)
    if args.poison_workspace:
        _poison_workspace()

    torch.manual_seed(0)
    try:
        import torchvision

        ref = torchvision.models.resnet18(weights=None)
    except ImportError:
        from models import resnet18_from_nn

        print("torchvision is not installed: ResNet-18 built from torch.nn")
        ref = resnet18_from_nn(torch.nn)
    if args.without_kinks:
        from models import without_kinks

        without_kinks(ref, torch.nn)
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


def _poison_workspace() -> None:
    import numpy as np
    import pyopencl as cl

    from wticonv.handle import Handle

    real = Handle._get_workspace

    def poisoned(self, nbytes):
        ws = real(self, nbytes)
        if ws is not None:
            cl.enqueue_fill_buffer(self.device.queue, ws, np.float32(np.nan), 0, nbytes)
        return ws
    Handle._get_workspace = poisoned


def _check_each_call(torch, handle) -> None:
    """Wrap wticonv.api's three functions (which wticonv.torch's ops call at run time) so
    that each call's result is compared with torch's float64 result of the same call
    (the solver that ran: ``benchmarks/solver_errors.py`` lists the choices by shape)."""
    import numpy as np

    import wticonv.api as api
    from wticonv.handle import Handle

    F, G = torch.nn.functional, torch.nn.grad
    ran: list = []
    real_run = Handle.run

    def run(self, *a, **k):
        result = real_run(self, *a, **k)
        ran.append(f"{result.solver_id} (workspace {result.workspace} B)")
        return result
    Handle.run = run

    def t64(a):
        return torch.from_numpy(np.asarray(a, dtype=np.float64))

    def wrap(name, ref):
        real = getattr(api, name)

        def checked(*a, **k):
            ran.clear()
            out = real(*a, **k)
            geo = {g: k[g] for g in ("stride", "padding", "dilation", "groups") if g in k}
            pad = geo.get("padding", 0)
            if isinstance(pad, tuple) and len(pad) == 4:     # (top, left, bottom, right)
                assert pad[:2] == pad[2:], "asymmetric padding: not checked here"
                geo["padding"] = pad[:2]
            want = ref(*a, **geo).numpy()
            print(f"call {name:13} {tuple(want.shape)!s:20} {geo} "
                  f"err {rms_range(np.asarray(out, np.float64), want):.2e} {', '.join(ran)}")
            return out
        setattr(api, name, checked)

    wrap("conv2d", lambda x, w, b=None, **g: F.conv2d(t64(x), t64(w), **g))
    wrap("conv2d_input", lambda size, w, dy, **g: G.conv2d_input(size, t64(w), t64(dy), **g))
    wrap("conv2d_weight", lambda x, size, dy, **g: G.conv2d_weight(t64(x), size, t64(dy),
                                                                   **g))


if __name__ == "__main__":
    sys.exit(main())
