"""Read the 2-D convolutions of an ONNX model (``Conv`` nodes) as a :class:`Network`.

Shapes come from the model's inputs, initializers and ONNX shape inference
(``onnx.shape_inference.infer_shapes``); attributes follow the ONNX ``Conv`` operator
specification (``auto_pad``, ``dilations``, ``group``, ``kernel_shape``, ``pads``,
``strides``). Padding that is not symmetric is folded into the input size (the bench pads
the input on the host, as the API does). Non-2-D convolutions are skipped with a note.
"""

from __future__ import annotations

from pathlib import Path

from wticonv.errors import NetworkError, ProblemError
from wticonv.problem.conv import ConvProblem
from wticonv.workloads.layers import Network, merge_layers

__all__ = ["load_onnx", "onnx_conv_pads"]


def onnx_conv_pads(auto_pad: str, pads: list[int] | None, in_hw: tuple[int, int],
                   kernel: tuple[int, int], strides: tuple[int, int],
                   dilations: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of an ONNX Conv, per its ``auto_pad`` rule.

    ``SAME_UPPER``/``SAME_LOWER``: output = ceil(input / stride), total padding
    ``max(0, (out - 1) * stride + (k - 1) * dilation + 1 - input)``, the odd pixel at the
    end (UPPER) or the beginning (LOWER). ``VALID``: none. ``NOTSET``: ``pads`` as given,
    ``[top, left, bottom, right]``.
    """
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for i in range(2):
            o = -(-in_hw[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in_hw[i])
            small = total // 2
            out.append((total - small, small) if auto_pad == "SAME_LOWER" else (small,
                                                                                 total - small))
        return out[0][0], out[1][0], out[0][1], out[1][1]
    if auto_pad == "VALID":
        return 0, 0, 0, 0
    p = list(pads) if pads else [0, 0, 0, 0]
    return p[0], p[1], p[2], p[3]


def _shape_table(model) -> dict[str, list]:
    table: dict[str, list] = {}
    for init in model.graph.initializer:
        table[init.name] = list(init.dims)
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            table[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                              for d in t.shape.dim]
    return table


def _elem_types(model) -> dict[str, int]:
    out = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if vi.type.HasField("tensor_type"):
            out[vi.name] = vi.type.tensor_type.elem_type
    for init in model.graph.initializer:
        out[init.name] = init.data_type
    return out


def load_onnx(path: Path, n: int | None = None) -> Network:
    """The distinct 2-D Conv layers of the ONNX model at ``path``.

    Raises
    ------
    NetworkError
        If ``onnx`` is not installed, the file is not a readable model, or a Conv node's
        shapes cannot be determined.
    """
    try:
        import onnx
    except ImportError:
        raise NetworkError("reading .onnx models needs the onnx package: "
                           "pip install \"wticonv[onnx]\"") from None
    try:
        model = onnx.load(str(path), load_external_data=False)
        model = onnx.shape_inference.infer_shapes(model)
    except Exception as e:  # noqa: BLE001 - onnx raises many types for bad files
        raise NetworkError(f"cannot read ONNX model {path}: {type(e).__name__}: {e}") from None
    shapes, types = _shape_table(model), _elem_types(model)
    items, notes, skipped = [], [], 0
    other = {}
    for idx, node in enumerate(model.graph.node):
        if node.op_type in ("ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv"):
            other[node.op_type] = other.get(node.op_type, 0) + 1
        if node.op_type != "Conv":
            continue
        label = node.name or f"Conv#{idx}"
        etype = types.get(node.input[0])
        if etype is not None and etype != onnx.TensorProto.FLOAT:
            notes.append(f"{label}: input type "
                         f"{onnx.TensorProto.DataType.Name(etype)} is benchmarked as FLOAT")
        p = _conv_problem(onnx, path, node, label, shapes, n, notes)
        if p is None:
            skipped += 1
        else:
            items.append((label, p, 1))
    if skipped:
        notes.append(f"{skipped} Conv node(s) that are not 2-D were skipped")
    for op, count in sorted(other.items()):
        notes.append(f"{count} {op} node(s) skipped (only Conv is benchmarked)")
    if not items:
        raise NetworkError(f"{path} has no 2-D Conv node")
    return merge_layers(path.stem, str(path), items, notes)


def _conv_problem(onnx, path: Path, node, label: str, shapes: dict, n: int | None,
                  notes: list[str]) -> ConvProblem | None:
    """The forward problem of one Conv ``node`` (None when it is not 2-D); asymmetric
    padding is folded into the input size, with a note. Raises NetworkError for unknown
    or symbolic shapes and for attributes that make no valid problem."""
    xs = shapes.get(node.input[0])
    ws = shapes.get(node.input[1]) if len(node.input) > 1 else None
    if xs is None or ws is None:
        raise NetworkError(f"{path}: Conv node {label!r}: the shape of its input or weight "
                           "is unknown (shape inference could not determine it)")
    if len(xs) != 4 or len(ws) != 4:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else str(auto_pad)
    batch = n if n is not None else (xs[0] if xs[0] else 1)
    c, h, w = xs[1], xs[2], xs[3]
    k, _, r, s = ws
    if None in (c, h, w, k, r, s):
        raise NetworkError(f"{path}: Conv node {label!r} has symbolic channel or spatial "
                           f"sizes (input {xs}, weight {ws}); fix them in the model")
    strides = tuple(attrs.get("strides", [1, 1]))
    dil = tuple(attrs.get("dilations", [1, 1]))
    t, left, b, right = onnx_conv_pads(auto_pad, attrs.get("pads"), (h, w), (r, s),
                                       strides, dil)
    ph, pw = min(t, b), min(left, right)
    if (t, left) != (b, right):
        notes.append(f"{label}: asymmetric padding {[t, left, b, right]} folded into the "
                     "input size")
    try:
        return ConvProblem(n=batch, c=c, h=h + (t - ph) + (b - ph), w=w + (left - pw) +
                           (right - pw), k=k, r=r, s=s, pad_h=ph, pad_w=pw,
                           stride_h=strides[0], stride_w=strides[1], dilation_h=dil[0],
                           dilation_w=dil[1], groups=int(attrs.get("group", 1)))
    except ProblemError as e:
        raise NetworkError(f"{path}: Conv node {label!r}: {e}") from None
