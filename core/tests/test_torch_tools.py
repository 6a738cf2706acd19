"""wticonv.torch under PyTorch's tools: torch.compile, torch.fx, copies and pickling,
fuse_conv_bn_eval, autocast, handles' lifetime, forked processes.

Skipped without torch, as test_torch.py. The compile tests use the ``aot_eager`` backend:
Dynamo traces the Python code (graph breaks, guards) and AOTAutograd runs the fake
implementations and the autograd formulas, without Inductor's code generation (seconds
on the 2-core CPU instead of tens of seconds).
"""

from __future__ import annotations

import copy
import gc
import io
import os
import pickle
import signal
import time
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
import wticonv  # noqa: E402
import wticonv.torch as wt  # noqa: E402
from torch import nn  # noqa: E402
from wticonv.problem.reference import rms_range  # noqa: E402


def _pair_of_models(seed: int = 0):
    """(torch's model, the same weights with wticonv's convolutions, unreplaced)."""
    torch.manual_seed(seed)
    ref = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(8, 4, 3, padding=1, padding_mode="replicate"))
    ours = copy.deepcopy(ref)
    return ref, ours


def _close(a, b, bound=1e-5) -> bool:
    return a.shape == b.shape and rms_range(a.detach().double().numpy(),
                                            b.detach().double().numpy()) < bound


@pytest.mark.parametrize("own_handle", [False, True])
def test_compile_fullgraph_with_and_without_a_handle(own_handle):
    """handle= used to break the graph (handles.handle_id took a lock): fullgraph=True
    raised Unsupported, and without it a 2-conv model had 3 graph breaks."""
    ref, ours = _pair_of_models()
    h = wticonv.Handle(wt.thread_handle().device, zero_copy=True) if own_handle else None
    wt.replace_convs(ours, handle=h)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(ours)(x)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(ours, fullgraph=True, backend="aot_eager")
    y, y_ref = compiled(x), ref(x)
    assert _close(y, y_ref)
    got = torch.autograd.grad(y.sum(), (x, ours[0].weight, ours[2].weight))
    want = torch.autograd.grad(y_ref.sum(), (x, ref[0].weight, ref[2].weight))
    for a, b in zip(got, want, strict=True):
        assert _close(a, b)


def test_compile_with_dynamic_shapes_and_same_padding():
    """padding="same" of a weight with dynamic shapes is a list of SymInts, which the
    fake implementation's geometry check must take as ints."""
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w: wt.conv2d(x, w, padding="same", layer="dyn"),
                             dynamic=True, fullgraph=True, backend="aot_eager")
    for xs, ws in (((1, 2, 8, 8), (3, 2, 3, 3)), ((2, 2, 9, 7), (3, 2, 5, 5))):
        x, w = torch.randn(xs), torch.randn(ws)
        assert _close(compiled(x, w), F.conv2d(x, w, padding="same"))


def test_compile_reports_wticonv_s_error_naming_the_layer():
    """A 2x2 picture into a 5x5 filter: the fake implementation made a tensor of size -2
    ('negative dimension'), reported as a TorchRuntimeError; now the functional's check
    raises during tracing, and torch.compile (without fullgraph) gives the
    LayerInputError itself."""
    model = nn.Sequential(nn.Conv2d(3, 4, 5))
    wt.replace_convs(model)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager")
    with pytest.raises(wt.LayerInputError, match=r"layer '0' \(forward\).*output h size < 1"
                       ) as e:
        compiled(torch.randn(1, 3, 2, 2))
    assert e.value.layer == "0" and isinstance(e.value.__cause__, wticonv.ProblemError)
    torch._dynamo.reset()           # fullgraph: Dynamo's own error, saying what to do
    with pytest.raises(torch._dynamo.exc.Unsupported,
                       match="wticonv.torch refuses this convolution; run it without "
                             "fullgraph=True"):
        torch.compile(model, backend="aot_eager", fullgraph=True)(torch.randn(1, 3, 2, 2))


def test_fx_symbolic_trace_records_one_call_per_convolution():
    """FX treats torch.nn's modules as leaves but traced into ours, whose functional
    refused its Proxy objects; conv2d_by_id is an FX leaf function now."""
    h = wticonv.Handle(wt.thread_handle().device, zero_copy=True)

    class Net(nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4),
                                      nn.ReLU(), nn.Conv2d(4, 4, 3, padding="same",
                                                           padding_mode="reflect"))
            self.w = nn.Parameter(torch.randn(2, 4, 1, 1))
            self.conv = conv

        def forward(self, x):
            return self.conv(self.body(x), self.w)

    torch.manual_seed(1)
    ref = Net(F.conv2d).eval()
    ours = copy.deepcopy(ref)
    ours.conv = lambda x, w: wt.conv2d(x, w, handle=h, layer="head")
    wt.replace_convs(ours, handle=h)
    gm = torch.fx.symbolic_trace(ours)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"
             and getattr(n.target, "__name__", "") == "conv2d_by_id"]
    assert len(calls) == 3
    assert [n.args[8] for n in calls] == ["body.0", "body.3", "head"]   # layer names
    assert [n.args[9] for n in calls] == [h.uid] * 3                      # handle ids
    x = torch.randn(2, 3, 8, 8)
    assert _close(gm(x), ref(x))
    gm2 = torch.fx.GraphModule(gm, gm.graph)       # the generated code runs as Python
    assert _close(gm2(x), gm(x), 1e-7)


def test_copies_keep_the_handle_and_pickling_leaves_it_out():
    ref, ours = _pair_of_models(2)
    h = wticonv.Handle(wt.thread_handle().device, zero_copy=True)
    wt.replace_convs(ours, handle=h)
    x = torch.randn(2, 3, 8, 8)
    y = ours(x)
    assert _close(y, ref(x))
    deep = copy.deepcopy(ours)
    assert deep[0].wticonv_handle is h and deep[0].weight is not ours[0].weight
    assert copy.copy(ours[0]).wticonv_handle is h
    assert _close(deep(x), y, 1e-7)
    for restored in (pickle.loads(pickle.dumps(ours)), _saved_and_loaded(ours)):
        assert isinstance(restored[0], wt.Conv2d) and restored[0].wticonv_handle is None
        assert restored[0].wticonv_name == "0" and restored[0]._wticonv_hid == 0
        assert _close(restored(x), y, 1e-6)           # on the thread's handle
    with pytest.raises(TypeError, match="wticonv.Handle .* cannot be pickled"):
        pickle.dumps(h)


def _saved_and_loaded(model):
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def test_fuse_conv_bn_eval_keeps_wticonv_and_the_handle():
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    torch.manual_seed(3)
    h = wticonv.Handle(wt.thread_handle().device, zero_copy=True)
    conv = wt.Conv2d(3, 4, 3, padding=1, handle=h).eval()
    bn = nn.BatchNorm2d(4).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 8, 8)
    fused = fuse_conv_bn_eval(conv, bn)
    assert isinstance(fused, wt.Conv2d) and fused.wticonv_handle is h
    assert _close(fused(x), bn(F.conv2d(x, conv.weight, conv.bias, padding=1)))


def test_handles_are_freed_with_their_users():
    """Every handle= used to stay in a registry for the life of the process (0.45 MiB
    each); the lookup is weak now, and an autograd graph keeps its handle until its
    backward has run."""
    from wticonv.handle import _by_uid

    dev = wt.thread_handle().device
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    gc.collect()
    before = len(_by_uid)
    refs = []
    for _ in range(3):
        h = wticonv.Handle(dev, zero_copy=True)
        refs.append(weakref.ref(h))
        y = wt.conv2d(x, w, handle=h)
        conv = wt.Conv2d(2, 3, 3, handle=wticonv.Handle(dev, zero_copy=True))
        refs.append(weakref.ref(conv.wticonv_handle))
        conv(x)
        del h
        gc.collect()
        assert refs[-2]() is not None       # y's graph holds it for the backward
        y.sum().backward()
    del y, conv
    gc.collect()
    assert [r() for r in refs] == [None] * 6
    assert len(_by_uid) == before


def test_autocast_regions_compute_in_float32():
    """In torch.autocast("cpu", bfloat16) a replaced conv fed bfloat16 activations raised
    'pass cast=True'; the ops' autocast rule casts their inputs to float32, and the
    result is float32 (torch's own conv gives bfloat16 there)."""
    ref, ours = _pair_of_models(4)
    wt.replace_convs(ours)
    x = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = ours(x)
        xb = x.bfloat16().requires_grad_()
        yb = ours(xb)
        torch_dtype = ref(x).dtype
    assert torch_dtype == torch.bfloat16
    assert y.dtype == torch.float32 and _close(y, ref(x))
    assert yb.dtype == torch.float32 and _close(yb, ref(xb.float()))
    yb.sum().backward()
    assert xb.grad.dtype == torch.bfloat16 and ours[0].weight.grad.dtype == torch.float32


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_an_error_naming_the_layer():
    """A child forked after the parent ran a convolution hung in clFinish."""
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    wt.conv2d(x, w)                       # the parent has opened the device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 3
        try:
            wt.conv2d(x, w, layer="stem")
        except wt.LayerError as e:
            code = 0 if (e.layer == "stem" and "'spawn'" in str(e)
                         and isinstance(e.__cause__, wticonv.DeviceError)) else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    status = None
    while status is None and time.monotonic() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        status = os.waitstatus_to_exitcode(st) if done else None
        time.sleep(0.05)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert status == 0
    assert wt.conv2d(x, w).shape == (1, 4, 6, 6)      # the parent still works
