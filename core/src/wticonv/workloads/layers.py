"""A network's layers: what every workload reader (built-in tables, MIOpenDriver files,
ONNX models) produces."""

from __future__ import annotations

from dataclasses import dataclass, field

from wticonv.problem.conv import ConvProblem

__all__ = ["Layer", "Network", "merge_layers"]


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
    directions : tuple of str, or None
        The only directions to run for this layer (a driver line's ``-F``); None: all that
        the bench asks for.
    """

    name: str
    problem: ConvProblem
    count: int = 1
    directions: tuple[str, ...] | None = None


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


def merge_layers(name: str, source: str, items: list[tuple], notes: list[str] | None = None
            ) -> Network:
    """The network ``name`` (read from ``source``) of ``items``, ``(label, problem,
    count[, directions])`` each, with equal problems merged into one layer (counts added,
    labels joined, directions united)."""
    merged: dict[ConvProblem, list] = {}
    for item in items:
        label, problem, count = item[:3]
        dirs = item[3] if len(item) > 3 else None
        if problem in merged:
            entry = merged[problem]
            entry[2] += count
            if label not in entry[0]:
                entry[0].append(label)
            if entry[3] is not None:
                entry[3] = None if dirs is None else tuple(sorted(set(entry[3]) | set(dirs)))
        else:
            merged[problem] = [[label], problem, count, dirs]
    layers = [Layer(", ".join(labels[:3]) + (" ..." if len(labels) > 3 else ""), p, c,
                    None if d is None else tuple(x for x in ("fwd", "bwd", "wrw") if x in d))
              for labels, p, c, d in merged.values()]
    return Network(name, source, layers, notes or [])
