"""Networks for ``wticonv bench``: built-in layer lists, driver-command files, ONNX models.

A network is a list of distinct convolution layers (forward problems at a chosen batch
size) with how often each occurs. Sources:

- a built-in name: ``resnet50``, ``vgg16``, ``mobilenetv2``, ``inception3`` (the conv layers
  listed in ``data/networks.csv``; input 224x224, Inception-v3 299x299);
- a corpus name (:func:`corpus_networks`): one of 46 networks of torchvision's model
  definitions (``regnet_y_800mf``, ``efficientnet_b0``, ``deeplabv3_resnet50``,
  ``fasterrcnn_resnet50_fpn``, ...), their conv layers in ``data/corpus.csv``, written by
  ``tools/make_corpus.py``; the development corpus the WTI models are judged on, held out
  network by network (docs/find-and-tune.md);
- a text file of MIOpenDriver command lines (``conv -n 16 -c 64 -H 56 ...``, one per line,
  ``#`` starts a comment), as in MIOpen's ``test/perf_models`` lists;
- an ``.onnx`` model: its 2-D ``Conv`` nodes, with shapes from ONNX shape inference (needs
  the ``onnx`` extra: ``pip install "wticonv[onnx]"``).
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
from dataclasses import dataclass
from pathlib import Path

from wticonv.errors import DriverArgsError, NetworkError, ProblemError
from wticonv.problem.conv import ConvProblem
from wticonv.workloads.driver import parse_driver_line
from wticonv.workloads.layers import Layer, Network, merge_layers

__all__ = ["Layer", "Network", "BUILTIN_NETWORKS", "load_network", "DEFAULT_BATCH",
           "CorpusNetwork", "corpus_networks"]

#: The built-in networks, by name.
BUILTIN_NETWORKS = ("resnet50", "vgg16", "mobilenetv2", "inception3")
#: Batch size used for built-in networks when none is given.
DEFAULT_BATCH = 1


@dataclass(frozen=True)
class CorpusNetwork:
    """A network of the development corpus (``data/corpus.csv``).

    Attributes
    ----------
    name : str
        torchvision's model name, e.g. ``"regnet_y_800mf"``.
    family : str
        Its family (``resnet``, ``grouped``, ``regnet``, ``mobile``, ``efficientnet``,
        ``modern``, ``segmentation``, ``detection``, ...): leave-one-family-out holds out
        all of one family at once.
    split : str
        ``"dev"``: models may be developed on it; ``"test"``: kept for the final held-out
        measurement.
    """

    name: str
    family: str
    split: str


@functools.lru_cache(maxsize=2)
def _rows(filename: str) -> tuple[dict, ...]:
    text = importlib.resources.files("wticonv").joinpath(f"data/{filename}").read_text()
    return tuple(csv.DictReader(text.splitlines()))


def corpus_networks(split: str | None = None) -> list[CorpusNetwork]:
    """The corpus's networks in file order, all or those of ``split`` ("dev"/"test").

    Raises ValueError for another ``split``."""
    if split not in (None, "dev", "test"):
        raise ValueError(f"split={split!r} must be 'dev', 'test' or None (all)")
    seen: dict[str, CorpusNetwork] = {}
    for row in _rows("corpus.csv"):
        seen.setdefault(row["network"], CorpusNetwork(row["network"], row["family"],
                                                       row["split"]))
    return [c for c in seen.values() if split is None or c.split == split]


def _builtin(name: str, n: int, filename: str = "networks.csv") -> Network:
    items = []
    for row in _rows(filename):
        if row["network"] != name:
            continue
        g = {k: int(row[k]) for k in ("C", "H", "W", "K", "R", "S", "stride", "pad_h", "pad_w",
                                      "dilation", "groups", "count")}
        p = ConvProblem(n=n, c=g["C"], h=g["H"], w=g["W"], k=g["K"], r=g["R"], s=g["S"],
                        pad_h=g["pad_h"], pad_w=g["pad_w"], stride_h=g["stride"],
                        stride_w=g["stride"], dilation_h=g["dilation"],
                        dilation_w=g["dilation"], groups=g["groups"])
        items.append((row["tag"] or f"{name} layer {len(items) + 1}", p, g["count"]))
    kind = "built-in" if filename == "networks.csv" else "corpus"
    return merge_layers(name, f"{kind} (data/{filename})", items)


_RUN_FLAGS = {"-S", "--solution", "-V", "--verify", "-i", "--iter", "-t", "--time", "-b",
              "--bias"}


def _driver_file(path: Path, n: int | None) -> Network:
    items, ignored = [], set()
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
        ignored |= _RUN_FLAGS & set(line.split())
        items.append((f"{path.name}:{lineno}", p, 1,
                      cmd.directions if cmd.directions_given else None))
    if not items:
        raise NetworkError(f"{path} holds no 'conv ...' line; write one MIOpenDriver conv "
                           "command per line, e.g. 'conv -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 "
                           "-x 3 -p 1 -q 1'")
    notes = []
    if ignored:
        notes.append(f"run flags on the lines ({', '.join(sorted(ignored))}) are ignored; use "
                     "bench's own -S, -i and --no-verify")
    if any(len(item) > 3 and item[3] is not None for item in items):
        notes.append("a line's -F limits that layer to its directions")
    return merge_layers(path.stem, str(path), items, notes)


def load_network(spec: str, n: int | None = None) -> Network:
    """Load a network by built-in name, driver-command file, or ``.onnx`` model.

    Parameters
    ----------
    spec : str
        A name from :data:`BUILTIN_NETWORKS` or :func:`corpus_networks`, or a path
        (names win: write ``./resnet50`` for a file of that name).
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
    if not key:
        raise NetworkError("the network is empty: give a built-in or corpus name (`wticonv "
                           "networks` lists them), a file of MIOpenDriver conv lines or an "
                           ".onnx model")
    if key in BUILTIN_NETWORKS:
        return _builtin(key, n if n is not None else DEFAULT_BATCH)
    if key in {c.name for c in corpus_networks()}:
        return _builtin(key, n if n is not None else DEFAULT_BATCH, "corpus.csv")
    path = Path(spec)
    kinds = (f"give a file of MIOpenDriver conv lines, an .onnx model, or a built-in name "
             f"({', '.join(BUILTIN_NETWORKS)})")
    if path.is_dir():
        raise NetworkError(f"network {spec!r} is a directory; {kinds}")
    if path.exists() and not path.is_file():
        raise NetworkError(f"network {spec!r} is not a regular file (a device, a pipe or a "
                           f"socket); {kinds}")
    if path.suffix.lower() == ".onnx":
        if not path.is_file():
            raise NetworkError(f"ONNX model {spec!r} does not exist")
        from wticonv.workloads.onnx import load_onnx

        return load_onnx(path, n)
    if path.is_file():
        return _driver_file(path, n)
    raise NetworkError(f"network {spec!r} is neither a built-in ({', '.join(BUILTIN_NETWORKS)}), "
                       "a corpus network (`wticonv networks` lists them) nor an existing "
                       "file (MIOpenDriver conv lines, or an .onnx model)")
