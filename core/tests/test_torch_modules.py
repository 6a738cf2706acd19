"""wticonv.torch's modules: Conv2d as a drop-in for torch.nn.Conv2d, replace_convs and
its report, the layer an error names, arguments checked when given, a model's layers
ranked once per shape. The ops: test_torch.py; threads, profiles, training and whole
models: test_torch_training.py.

Skipped without torch (``pip install "wticonv[torch]"``; ``make test`` installs it).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
import wticonv  # noqa: E402
import wticonv.torch as wt  # noqa: E402
from torch import nn  # noqa: E402
from wticonv.problem.reference import rms_range  # noqa: E402


def test_errors_name_the_layer():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 5))
    report = wt.replace_convs(model)
    assert report.replaced == ["0", "2"]
    with pytest.raises(wt.LayerInputError, match=r"layer '2' \(forward\).*ProblemError") as e:
        model(torch.randn(1, 3, 6, 6))          # layer 2 gets 4x4 pictures: too small
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)
    assert e.value.layer == "2" and isinstance(e.value.__cause__, wticonv.ProblemError)
    with pytest.raises(RuntimeError, match=r"layer '0'.*channels"):
        model(torch.randn(1, 2, 9, 9))


class _MyConv(nn.Conv2d):
    pass


def test_replace_convs_reports_and_shares_parameters():
    shared = nn.Conv2d(4, 4, 3, padding=1)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), shared, nn.ReLU(), shared,
                          nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"),
                          _MyConv(4, 4, 1), nn.Conv2d(4, 2, 1).double(),
                          wt.Conv2d(2, 2, 1))
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    report = wt.replace_convs(model)
    # the module at 1 and 3 is one module: both names listed, counted once
    assert report.replaced == ["0", "1", "3", "4"] and report.count == 3
    assert report.shared == {"3": "1"}
    assert set(report.left) == {"5", "6"}
    assert "subclass" in report.left["5"] and "float64" in report.left["6"]
    assert report.already == ["7"]
    assert model[1] is model[3] and isinstance(model[1], wt.Conv2d)
    assert model[1].wticonv_name == "1"
    assert type(model[5]) is _MyConv and type(model[6]) is nn.Conv2d
    assert list(model.parameters()) == params     # the same Parameter objects
    assert model.state_dict().keys() == ref.keys()
    text = str(report)
    assert "3 replaced, 2 left alone, 1 already" in text
    assert "one module at 2 places: 1, 3 (errors name it '1')" in text
    again = wt.replace_convs(model)
    assert again.already == ["0", "1", "3", "4", "7"] and again.shared == {"3": "1"}
    assert again.count == 0 and "0 replaced, 2 left alone, 4 already" in str(again)
    assert wt.replace_convs(nn.Conv2d(1, 1, 1)).left[""].startswith("the model itself")


def test_replace_convs_names_a_module_shared_inside_two_containers():
    block = nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.ReLU())
    left = _MyConv(2, 2, 1)
    model = nn.Sequential(block, block, left, left)
    report = wt.replace_convs(model)
    assert report.replaced == ["0.0", "1.0"] and report.count == 1
    assert list(report.left) == ["2", "3"] and report.left["3"] == report.left["2"]
    assert report.shared == {"1.0": "0.0", "3": "2"}
    assert model[0][0] is model[1][0] and isinstance(model[0][0], wt.Conv2d)
    assert "1 replaced, 1 left alone, 0 already" in str(report)


@pytest.mark.parametrize("kwargs", [
    dict(padding="same"), dict(padding="valid", bias=False), dict(padding=(2, 1), stride=2),
    dict(padding=1, padding_mode="reflect"), dict(padding=(1, 2), padding_mode="circular"),
    dict(padding=1, padding_mode="replicate", dilation=2, groups=2)])
def test_conv2d_is_a_drop_in(kwargs):
    torch.manual_seed(0)
    ref = nn.Conv2d(4, 6, 3, **kwargs)
    ours = wt.Conv2d(4, 6, 3, name="dropin", **kwargs)
    assert ours.state_dict().keys() == ref.state_dict().keys()
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(2, 4, 9, 8, requires_grad=True)
    y_ref, y = ref(x), ours(x)
    assert y.shape == y_ref.shape
    assert rms_range(y.detach().numpy(), y_ref.detach().numpy()) < 1e-5
    dy = torch.randn_like(y)
    g_ref = torch.autograd.grad(y_ref, [x, *ref.parameters()], dy)
    g = torch.autograd.grad(y, [x, *ours.parameters()], dy)
    for a, b in zip(g, g_ref, strict=True):
        assert rms_range(a.numpy(), b.numpy()) < 1e-5


def test_arguments_are_checked_when_given():
    """Not at the first forward, where a bad handle= or cast= used to surface."""
    with pytest.raises(wticonv.ArgumentError, match=r"Conv2d\(handle=...\).*not a wticonv"):
        wt.Conv2d(1, 1, 1, handle=42)
    with pytest.raises(wticonv.ArgumentError, match=r"Conv2d\(cast='no'\).*True or False"):
        wt.Conv2d(1, 1, 1, cast="no")
    with pytest.raises(wticonv.ArgumentError, match="name must be a str"):
        wt.Conv2d(1, 1, 1, name=3)
    model = nn.Sequential(nn.Conv2d(1, 1, 1))
    with pytest.raises(wticonv.ArgumentError, match=r"replace_convs\(handle=...\): handle="):
        wt.replace_convs(model, handle="gpu")
    with pytest.raises(wticonv.ArgumentError, match=r"replace_convs\(cast=1\)"):
        wt.replace_convs(model, cast=1)
    assert type(model[0]) is nn.Conv2d               # the model was not changed
    conv = wt.Conv2d(1, 1, 1)
    with pytest.raises(wticonv.ArgumentError, match="wticonv_handle"):
        conv.wticonv_handle = "gpu"
    h = wt.thread_handle()
    conv.wticonv_handle = h
    assert conv.wticonv_handle is h and conv._wticonv_hid == h.uid
    with pytest.raises(wt.LayerInputError, match="cast='no' must be True or False"):
        wt.conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1), cast="no")


def test_selection_is_ranked_once_per_shape(monkeypatch):
    import wticonv.handle as handle_mod

    calls = []
    real = handle_mod.select

    def counting(registry, problem, *a, **kw):
        calls.append(problem.key)
        return real(registry, problem, *a, **kw)

    monkeypatch.setattr(handle_mod, "select", counting)
    h = wticonv.Handle(wt.thread_handle().device, zero_copy=True)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, 2))
    wt.replace_convs(model, handle=h)
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    counts = []
    for _ in range(3):
        model(x).sum().backward()
        counts.append(len(calls))
    # 2 layers x 3 directions (the first layer's bwd: x requires grad), ranked in step 1
    assert counts == [6, 6, 6] and len(set(calls)) == 6


def test_integer_likes_and_one_tuples_as_torch_takes_them():
    """NumPy integers and 1-tuples, which torch.nn.Conv2d and F.conv2d take, work too."""
    import numpy as np

    torch.manual_seed(3)
    x = torch.randn(2, 3, 9, 9)
    ref = torch.nn.Conv2d(3, 4, 3, stride=np.int64(2), padding=np.int64(1))
    ours = wt.Conv2d(3, 4, 3, stride=np.int64(2), padding=np.int64(1))
    ours.load_state_dict(ref.state_dict())
    assert torch.allclose(ours(x), ref(x), atol=1e-5)
    w = torch.randn(4, 1, 3, 3)
    got = wt.conv2d(x[:, :1], w, padding=(1,), stride=(np.int32(1),), groups=np.int64(1))
    want = torch.nn.functional.conv2d(x[:, :1], w, padding=(1,))
    assert got.shape == want.shape == (2, 4, 9, 9)
    assert torch.allclose(got, want, atol=1e-5)


def test_replace_convs_names_unnamed_wticonv_layers_by_their_path():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3),
                            torch.nn.Sequential(wt.Conv2d(8, 8, 3)))
    report = wt.replace_convs(m)
    assert report.already == ["1.0"] and m[1][0].wticonv_name == "1.0"
    with pytest.raises(wt.LayerInputError, match="layer '1.0'"):
        m(torch.randn(1, 3, 4, 4))                 # 2x2 after the first: too small


def test_conv2d_refuses_four_paddings_as_torch_does():
    for mode in ("zeros", "reflect"):
        with pytest.raises(ValueError, match=r"padding=\(0, 1, 2, 3\).*wticonv.torch.conv2d "
                                             r"takes \(top, left, bottom, right\)"):
            wt.Conv2d(4, 6, 3, padding=(0, 1, 2, 3), padding_mode=mode)


def test_replace_convs_again_with_cast_sets_it_on_wticonv_layers():
    """A model replaced, then converted with .half(): the error says how to allow it, and
    replace_convs(model, cast=True) again does (it used to leave wticonv layers as they
    were, and the error came back)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3))
    wt.replace_convs(model)
    model.half()
    x = torch.randn(1, 3, 5, 5).half()
    with pytest.raises(wt.LayerInputError, match=r"layer.wticonv_cast = True") as e:
        model(x)
    assert "layer '0'" in str(e.value)
    report = wt.replace_convs(model, cast=True)
    assert report.already == ["0"] and report.count == 0 and model[0].wticonv_cast
    assert report.already_given == ["cast=True"]
    assert "1 already wticonv's (given cast=True)" in str(report)
    h = wticonv.Handle()
    again = wt.replace_convs(model, handle=h)
    assert again.already_given == ["handle"] and model[0].wticonv_handle is h
    assert "(given handle)" in str(again) and "given" not in str(wt.replace_convs(model))
    fresh = wt.replace_convs(nn.Sequential(nn.Conv2d(3, 4, 3)), cast=True)
    assert fresh.replaced == ["0"] and fresh.already == [] and fresh.already_given == []
    # a model that is itself wticonv's Conv2d takes what was asked, as a layer of one does
    single = wt.Conv2d(3, 4, 3)
    alone = wt.replace_convs(single, cast=True)
    assert single.wticonv_cast and alone.already == [""] and alone.left == {}
    assert alone.already_given == ["cast=True"] and alone.count == 0
    y = model(x)
    assert y.dtype == torch.float16 and y.shape == (1, 4, 3, 3)
    ref = F.conv2d(x.float(), model[0].weight.float(), model[0].bias.float())
    assert rms_range(y.detach().float().numpy(), ref.detach().numpy()) < 1e-3   # float16
    assert "cast=True" in repr(model[0]) and "name='0'" in repr(model[0])


def test_a_shared_module_is_one_of_count_and_each_of_its_names_replaced():
    conv = nn.Conv2d(2, 2, 1)
    model = nn.Module()
    model.a, model.b, model.c = conv, conv, nn.Conv2d(2, 2, 1)
    report = wt.replace_convs(model)
    assert report.count == 2 and sorted(report.replaced) == ["a", "b", "c"]
    assert report.shared == {"b": "a"}


def test_meta_weights_with_a_real_input_are_refused_and_a_meta_input_gives_shapes():
    """A real input with weights on the meta device (no data) is refused with how to
    materialize them; a meta input takes weights on any device and gives a meta result of
    torch's shape, as torch.nn.functional.conv2d does."""
    x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3, device="meta")
    with pytest.raises(wt.LayerInputError, match=r"weight is on the meta device.*input is "
                                                  r"on cpu.*to_empty\(device='cpu'\)"):
        wt.conv2d(x, w, layer="stem")
    with torch.autocast("cpu", dtype=torch.bfloat16):       # checked under autocast too
        with pytest.raises(wt.LayerInputError, match="weight is on the meta device"):
            wt.Conv2d(2, 3, 3, device="meta")(x)
    with pytest.raises(wt.LayerInputError, match=r"backward data.*weight is on the meta"):
        torch.ops.wticonv.conv2d_input(w, torch.ones(1, 3, 3, 3), [1, 2, 5, 5], [1, 1],
                                       [0, 0, 0, 0], [1, 1], 1, "stem", 0)   # the raw op
    xm, wc = torch.empty(2, 2, 9, 7, device="meta"), torch.randn(3, 2, 3, 3)
    y = wt.conv2d(xm, wc, stride=2, padding=1, layer="stem")
    ref = F.conv2d(xm, wc, stride=2, padding=1)
    assert y.device.type == "meta" and y.shape == ref.shape == (2, 3, 5, 4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tensors_on_different_devices_are_refused_naming_both():
    """torch.nn.functional.conv2d refuses an input and a weight on different devices;
    so does wticonv (it used to copy each to the host on its own and run)."""
    x, w = torch.randn(1, 2, 5, 5, device="cuda"), torch.randn(3, 2, 3, 3)
    with pytest.raises(wt.LayerInputError, match=r"input is on cuda:0 but weight is on cpu.*"
                                                  r"model.to\('cuda:0'\)"):
        wt.conv2d(x, w, layer="stem")


def test_cast_and_name_set_on_a_layer_are_checked_as_given_to_the_constructor():
    conv = wt.Conv2d(3, 4, 3)
    with pytest.raises(wticonv.ArgumentError, match=r"cast='False'.*True or False"):
        conv.wticonv_cast = "False"
    with pytest.raises(wticonv.ArgumentError, match="name"):
        conv.wticonv_name = 5
    assert conv.wticonv_cast is False and conv.wticonv_name == ""
    conv.wticonv_cast, conv.wticonv_name = True, "stem"
    assert "cast=True" in repr(conv) and "name='stem'" in repr(conv)


def test_the_raw_op_names_only_the_geometry_argument_that_is_wrong():
    """A 2-value padding given to the op (which takes 4) is the one named; the valid
    stride and dilation are not."""
    with pytest.raises(wt.LayerInputError) as e:
        torch.ops.wticonv.conv2d(torch.ones(1, 2, 5, 5), torch.ones(3, 2, 3, 3), None,
                                 [2, 1], [1, 0], [1, 2], 1, "", 0)
    assert "padding=[1, 0] needs 4 ints" in str(e.value)
    assert "stride" not in str(e.value) and "dilation" not in str(e.value)
