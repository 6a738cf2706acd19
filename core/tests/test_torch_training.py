"""wticonv.torch at work: one handle per thread, wt.profile, a small CNN trained as with
torch's convolutions, ResNet-18 against torch. The ops: test_torch.py; Conv2d and
replace_convs: test_torch_modules.py.

Skipped without torch (``pip install "wticonv[torch]"``; ``make test`` installs it). The
resnet18 test uses torchvision where it is installed (else the same network built from
torch.nn, benchmarks/models.py).
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
import wticonv.torch as wt  # noqa: E402
from torch import nn  # noqa: E402
from wticonv.problem.reference import rms_range  # noqa: E402


def test_one_handle_per_thread():
    seen = {}

    def work(i):
        seen[i] = (wt.thread_handle(), wt.thread_handle())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (a1, a2), (b1, b2) = seen[0], seen[1]
    assert a1 is a2 and b1 is b2 and a1 is not b1
    assert a1.device is b1.device and a1.zero_copy
    with pytest.raises(wt.LayerInputError, match="not a wticonv.Handle"):
        wt.conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1), handle="gpu")


def test_profile_splits_the_time():
    x = torch.randn(2, 3, 16, 16, requires_grad=True)
    conv = wt.Conv2d(3, 8, 3, padding=1)
    with wt.profile() as t:
        conv(x).sum().backward()
    assert t.calls == {"fwd": 1, "bwd": 1, "wrw": 1}
    assert t.kernel_ms > 0 and t.copy_ms == 0.0
    assert t.total_ms >= t.kernel_ms and t.host_ms == pytest.approx(t.total_ms - t.kernel_ms)


def test_profile_counts_layout_and_dtype_copies():
    """The NCHW copy of a channels_last input, the result's conversion back and
    cast=True's casts are copies: counted in copy_ms (and the wall time), not calls."""
    conv = wt.Conv2d(16, 16, 1)
    x = torch.randn(8, 16, 32, 32).contiguous(memory_format=torch.channels_last)
    with torch.no_grad(), wt.profile() as t:
        y = conv(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert t.calls["fwd"] == 1 and 0 < t.copy_ms < t.total_ms
    conv64 = wt.Conv2d(16, 16, 1, cast=True).double()
    with torch.no_grad(), wt.profile() as t64:
        y64 = conv64(torch.randn(8, 16, 32, 32, dtype=torch.float64))
    assert y64.dtype == torch.float64
    assert t64.calls["fwd"] == 1 and 0 < t64.copy_ms < t64.total_ms


def test_profile_counts_convolutions_of_other_threads():
    """PyTorch runs the backward of CUDA tensors on its own thread: a profile opened in
    the training loop's thread counts the convolutions of every thread."""
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    with wt.profile() as t:
        worker = threading.Thread(target=lambda: wt.conv2d(x, w, padding=1))
        worker.start()
        worker.join()
    assert t.calls == {"fwd": 1, "bwd": 0, "wrw": 0} and t.total_ms > 0


def test_nested_and_concurrent_profiles_each_count_every_call():
    """Open scopes are told apart by identity, not by their (possibly equal) times: an
    inner or another thread's scope that closes leaves the others open and counting."""
    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    with wt.profile() as outer:
        with wt.profile() as inner:
            pass                                # closes holding the same (zero) times
        wt.conv2d(x, w)
        wt.conv2d(x, w)
        opened, release = threading.Event(), threading.Event()
        seen = {}

        def other():
            with wt.profile() as t:
                opened.set()
                release.wait(10)
            seen["t"] = t

        worker = threading.Thread(target=other)
        worker.start()
        opened.wait(10)
        wt.conv2d(x, w)                         # counted by both open scopes
        release.set()
        worker.join()
        wt.conv2d(x, w)
    assert inner.calls == {"fwd": 0, "bwd": 0, "wrw": 0}
    assert outer.calls == {"fwd": 4, "bwd": 0, "wrw": 0}
    assert seen["t"].calls == {"fwd": 1, "bwd": 0, "wrw": 0}
    from wticonv.torch import timing

    assert timing.active() == []


class _SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU(),
            nn.Conv2d(16, 16, 1), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def _train(model, data, labels, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for i in range(steps):
        j = i % len(data)
        opt.zero_grad()
        loss = F.cross_entropy(model(data[j]), labels[j])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


@pytest.mark.slow
def test_small_cnn_trains_as_with_torch_convs():
    """100 SGD steps from the same weights, torch's convolutions against wticonv's.

    Tolerance: every convolution of wticonv and oneDNN is float32 with rms_range
    differences of about 1e-7 to 1e-6 (each sums in its own order); 100 steps of SGD with
    momentum carry them forward and grow them slowly (measured on the 2-core CPU: at most
    5.2e-5 relative on the loss, at step ~90 where the loss is small, and 6e-6 on the
    weights). 1e-3 allows 20 times the loss's and 160 times the weights' and still fails on
    any real error: a wrong or missing gradient changes the loss curve by percents within
    a few steps.
    """
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    # learnable: the class is the input channel with a raised mean (class 3: none)
    labels = [torch.randint(0, 4, (8,), generator=g) for _ in range(4)]
    data = [torch.randn(8, 3, 12, 12, generator=g)
            + F.one_hot(y, 4)[:, :3, None, None].float() for y in labels]
    ref = _SmallCNN()
    ours = _SmallCNN()
    ours.load_state_dict(ref.state_dict())
    assert wt.replace_convs(ours).count == 4
    loss_ref = _train(ref, data, labels, 100)
    loss_ours = _train(ours, data, labels, 100)
    assert loss_ref[-10:].mean() < 0.3 * loss_ref[:4].mean()      # it learned (1.42 -> 0.17)
    rel = np.abs(loss_ours - loss_ref) / np.abs(loss_ref)
    assert rel.max() < 1e-3, f"loss curves differ by {rel.max():.2e} (step {rel.argmax()})"
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values(),
                                strict=True):
        err = ((a - b).norm() / b.norm()).item()
        assert err < 1e-3, f"{name}: relative difference {err:.2e}"


def _models():
    """benchmarks/models.py (torch.nn-only networks and model helpers)."""
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[2] / "benchmarks")
    if path not in sys.path:
        sys.path.insert(0, path)
    import models

    return models


def _resnet18():
    """torchvision's resnet18 (no weights), or where torchvision is missing the same
    network built from torch.nn (benchmarks/models.py)."""
    try:
        import torchvision
    except ImportError:
        return _models().resnet18_from_nn(torch.nn)
    return torchvision.models.resnet18(weights=None)


def _replaced(ref):
    ours = copy.deepcopy(ref)
    report = wt.replace_convs(ours)
    assert report.count == 20 and not report.left
    return ours


def test_resnet18_matches_torch():
    """ResNet-18, N=2, in eval mode: the output, and every parameter's gradient, against
    torch's own FP32 convolutions.

    Eval mode, because in training mode batch norm over two images makes the gradients
    jump under any rounding: a random relative change of 1.5e-6 in one convolution's
    output (Winograd F(4x4, 3x3)'s rounding, within the solvers' declared tolerance)
    moved the gradients of torch's own FP32 model by up to 1.1e-2 (rms over norm, against
    float64), and by 1.1e-6 in eval mode (benchmarks/torch_resnet18_errors.py measures
    ours and torch's against float64).

    The gradients are compared on the same network with its kinks smoothed (ReLU ->
    SiLU, max pool -> average pool; every convolution as it was). A ReLU or a max pool
    turns an FP32 rounding difference into a different gradient path wherever a value
    lies within the rounding of zero or of its window's maximum: relative noise of 1e-6
    added to every convolution output (within the declared tolerance of 1e-5) moved the
    gradients of the ReLU network by up to 2.5e-4 (3 of 4 seeds above 5e-5), and 1e-5
    moved those of the smoothed network by 2e-6 at most. On the H100 the ReLU network's
    gradients differed by up to 1.1e-3 though every one of its 59 convolution calls was
    within 3e-7 of float64 (torch_resnet18_errors.py --per-call, docs/pytorch.md).
    Bounds: 1e-4 (rms_range) for the output and the gradients, 50x the smoothed
    network's response to 1e-5 noise, and far below a wrong result."""
    torch.manual_seed(0)
    ref = _resnet18().eval()
    ours = _replaced(ref)
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        y_ref, y = ref(x), ours(x)
    assert rms_range(y.numpy(), y_ref.numpy()) < 1e-4
    ref = _models().without_kinks(ref, torch.nn)
    ours = _replaced(ref)
    y_ref, y = ref(x), ours(x)
    dy = torch.randn_like(y)
    y_ref.backward(dy)
    y.backward(dy)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        err = rms_range(p.grad.numpy(), q.grad.numpy())
        assert err < 1e-4, f"{name}: gradient rms_range {err:.2e}"
