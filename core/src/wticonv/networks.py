"""Networks for ``wticonv bench``: built-in layer lists, driver-command files, ONNX models.

A network is a list of distinct convolution layers (forward problems at a chosen batch
size) with how often each occurs. Sources:

- a built-in name: ``resnet50``, ``vgg16``, ``mobilenetv2``, ``inception3`` (the conv layers
  listed in ``data/networks.csv``; input 224x224, Inception-v3 299x299);
- a text file of MIOpenDriver command lines (``conv -n 16 -c 64 -H 56 ...``, one per line,
  ``#`` starts a comment), as in MIOpen's ``test/perf_models`` lists;
- an ``.onnx`` model: its 2-D ``Conv`` nodes, with shapes from ONNX shape inference (needs
  the ``onnx`` extra: ``pip install "wticonv[onnx]"``).
"""

from __future__ import annotations

import csv
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path

from .driver import parse_driver_line
from .errors import DriverArgsError, NetworkError, ProblemError
from .problem import ConvProblem

__all__ = ["Layer", "Network", "BUILTIN_NETWORKS", "load_network", "DEFAULT_BATCH"]

#: The built-in networks, by name.
BUILTIN_NETWORKS = ("resnet50", "vgg16", "mobilenetv2", "inception3")
#: Batch size used for built-in networks when none is given.
DEFAULT_BATCH = 1


@dataclass(frozen=True)
class Layer:
    """One distinct convolution of a network.

    Attributes
    ----------
    name : str
        Where it comes from: the CSV tag, the ONNX node name(s), or ``file:line``.
    problem : ConvProblem
        The forward problem (the bench derives bwd and wrw from it).
    count : int
        How many layers of the network have exactly this problem.
    """

    name: str
    problem: ConvProblem
    count: int = 1


@dataclass
class Network:
    """A named list of distinct layers, in order of first appearance."""

    name: str
    source: str
    layers: list[Layer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total_layers(self) -> int:
        """Number of conv layers counting repeats."""
        return sum(layer.count for layer in self.layers)


def _dedupe(name: str, source: str, items: list[tuple[str, ConvProblem, int]],
            notes: list[str] | None = None) -> Network:
    merged: dict[ConvProblem, list] = {}
    for label, problem, count in items:
        if problem in merged:
            entry = merged[problem]
            entry[2] += count
            if label not in entry[0]:
                entry[0].append(label)
        else:
            merged[problem] = [[label], problem, count]
    layers = [Layer(", ".join(labels[:3]) + (" ..." if len(labels) > 3 else ""), p, c)
              for labels, p, c in merged.values()]
    return Network(name, source, layers, notes or [])


def _builtin(name: str, n: int) -> Network:
    text = importlib.resources.files("wticonv").joinpath("data/networks.csv").read_text()
    items = []
    for row in csv.DictReader(text.splitlines()):
        if row["network"] != name:
            continue
        g = {k: int(row[k]) for k in ("C", "H", "W", "K", "R", "S", "stride", "pad_h", "pad_w",
                                      "dilation", "groups", "count")}
        p = ConvProblem(n=n, c=g["C"], h=g["H"], w=g["W"], k=g["K"], r=g["R"], s=g["S"],
                        pad_h=g["pad_h"], pad_w=g["pad_w"], stride_h=g["stride"],
                        stride_w=g["stride"], dilation_h=g["dilation"],
                        dilation_w=g["dilation"], groups=g["groups"])
        items.append((row["tag"], p, g["count"]))
    return _dedupe(name, "built-in (data/networks.csv)", items)


def _driver_file(path: Path, n: int | None) -> Network:
    items = []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise NetworkError(f"cannot read network file {path}: {e}") from None
    for lineno, line in enumerate(lines, 1):
        if not line.split("#", 1)[0].strip():
            continue
        try:
            cmd = parse_driver_line(line)
            p = cmd.problem if n is None else cmd.problem.with_batch(n)
        except (DriverArgsError, ProblemError) as e:
            raise NetworkError(f"{path}:{lineno}: {e}") from None
        items.append((f"{path.name}:{lineno}", p, 1))
    if not items:
        raise NetworkError(f"{path} holds no 'conv ...' line; write one MIOpenDriver conv "
                           "command per line, e.g. 'conv -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 "
                           "-x 3 -p 1 -q 1'")
    return _dedupe(path.stem, str(path), items)


def load_network(spec: str, n: int | None = None) -> Network:
    """Load a network by built-in name, driver-command file, or ``.onnx`` model.

    Parameters
    ----------
    spec : str
        A name from :data:`BUILTIN_NETWORKS` or a path.
    n : int, optional
        Batch size. Built-in networks use :data:`DEFAULT_BATCH` when omitted; files keep
        their own (``-n`` in each line, the model's batch dimension, 1 when symbolic).

    Raises
    ------
    NetworkError
        Unknown name, unreadable file, or a line/node that is not a valid problem.
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise NetworkError(f"batch size n={n!r} must be a positive integer")
    key = spec.strip().lower()
    if key in BUILTIN_NETWORKS:
        return _builtin(key, n if n is not None else DEFAULT_BATCH)
    path = Path(spec)
    if path.suffix.lower() == ".onnx":
        if not path.is_file():
            raise NetworkError(f"ONNX model {spec!r} does not exist")
        from .onnx_models import load_onnx

        return load_onnx(path, n)
    if path.is_file():
        return _driver_file(path, n)
    raise NetworkError(f"network {spec!r} is neither a built-in ({', '.join(BUILTIN_NETWORKS)}) "
                       "nor an existing file (MIOpenDriver conv lines, or an .onnx model)")
