"""Handle(zero_copy=True): compute over the caller's arrays on a device in host memory."""

from __future__ import annotations

import numpy as np
import pytest
import wticonv
from wticonv.handle import get_handle
from wticonv.runtime.device import Device


@pytest.fixture(scope="module")
def handles():
    plain = get_handle()
    return plain, wticonv.Handle(plain.device, zero_copy=True)


@pytest.mark.parametrize("direction", ["fwd", "bwd", "wrw"])
def test_zero_copy_gives_the_same_results(handles, direction, monkeypatch):
    plain, shared = handles
    p = wticonv.ConvProblem(n=2, c=3, h=7, w=6, k=4, r=3, s=3, pad_h=1, pad_w=1,
                            direction=direction)
    rng = np.random.default_rng(0)
    arrays = {"x": rng.standard_normal(p.x_shape, np.float32),
              "w": rng.standard_normal(p.w_shape, np.float32),
              "y": rng.standard_normal(p.y_shape, np.float32)}
    del arrays[{"fwd": "y", "bwd": "x", "wrw": "w"}[direction]]
    before = {k: v.copy() for k, v in arrays.items()}
    uploads = []
    real = Device.upload
    monkeypatch.setattr(Device, "upload", lambda self, a, what="": uploads.append(what)
                        or real(self, a, what))
    expected = plain.compute(p, **arrays)
    n_plain = len(uploads)
    got = shared.compute(p, **arrays)
    assert n_plain == 2
    assert len(uploads) == n_plain + (0 if shared.device.host_unified_memory else 2)
    np.testing.assert_array_equal(got, expected)
    for k, v in arrays.items():
        np.testing.assert_array_equal(v, before[k])          # inputs left as they were
    ro = {k: v.copy() for k, v in arrays.items()}
    for v in ro.values():
        v.flags.writeable = False                   # uploaded instead: pyopencl needs write
    np.testing.assert_array_equal(shared.compute(p, **ro), expected)


def test_zero_copy_must_be_a_bool():
    with pytest.raises(wticonv.ArgumentError, match="zero_copy"):
        wticonv.Handle(get_handle().device, zero_copy=1)


def test_wrap_refuses_what_it_cannot_share(handles):
    dev = handles[0].device
    with pytest.raises(wticonv.TensorError, match="C-contiguous"):
        dev.wrap(np.zeros((4, 4), np.float32)[:, ::2])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(wticonv.TensorError, match="read-only"):
        dev.wrap(ro, writable=True)
