"""The ONNX project's own Conv test cases, run through wticonv's public API.

Every 2-D ``Conv`` case of the backend test data shipped in the ``onnx`` package
(``node/test_*conv*`` and ``pytorch-converted/test_Conv2d*``): inputs and expected outputs
are the ``.pb`` files stored with each model. Attributes (``auto_pad``, ``pads``,
``strides``, ``dilations``, ``group``) are mapped as the ONNX Conv specification says.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import wticonv
from wticonv.workloads.onnx import onnx_conv_pads

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _is_2d_conv_case(path: str) -> bool:
    model = onnx.load(os.path.join(path, "model.onnx"))
    if [n.op_type for n in model.graph.node] != ["Conv"]:
        return False
    shape = model.graph.input[0].type.tensor_type.shape
    return len(shape.dim) == 4


CASES = sorted(p for p in glob.glob(os.path.join(DATA, "node", "test_*conv*"))
               + glob.glob(os.path.join(DATA, "pytorch-converted", "test_Conv2d*"))
               if _is_2d_conv_case(p))


def test_the_onnx_package_ships_the_cases():
    names = {os.path.basename(p) for p in CASES}
    assert {"test_basic_conv_with_padding", "test_conv_with_autopad_same",
            "test_conv_with_strides_and_asymmetric_padding", "test_Conv2d_dilated",
            "test_Conv2d_depthwise_with_multiplier", "test_Conv2d_groups"} <= names
    assert len(CASES) >= 17


def _read_pb(path: str) -> np.ndarray:
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("case", CASES, ids=os.path.basename)
def test_onnx_conv_case(case, handle):
    model = onnx.load(os.path.join(case, "model.onnx"))
    node = model.graph.node[0]
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    feeds = [i.name for i in model.graph.input if i.name not in values]
    for data_set in sorted(glob.glob(os.path.join(case, "test_data_set_*"))):
        inputs = sorted(glob.glob(os.path.join(data_set, "input_*.pb")))
        env = dict(values)
        env.update({name: _read_pb(p) for name, p in zip(feeds, inputs)})
        x, w = env[node.input[0]], env[node.input[1]]
        bias = env[node.input[2]] if len(node.input) > 2 and node.input[2] else None
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        auto_pad = attrs.get("auto_pad", b"NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        strides = tuple(attrs.get("strides", (1, 1)))
        dilations = tuple(attrs.get("dilations", (1, 1)))
        pads = onnx_conv_pads(auto_pad, attrs.get("pads"), x.shape[2:], w.shape[2:], strides,
                              dilations)
        y = wticonv.conv2d(x, w, bias, stride=strides, padding=pads, dilation=dilations,
                           groups=int(attrs.get("group", 1)), handle=handle)
        expected = _read_pb(os.path.join(data_set, "output_0.pb"))
        assert y.shape == expected.shape
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
