"""``wticonv networks``: the networks a command takes by name (built-ins and the corpus)."""

from __future__ import annotations

import click

from wticonv.cli.commands import _emit_json, _json_option, _trace_option, cli
from wticonv.workloads.networks import BUILTIN_NETWORKS, corpus_networks, load_network


def network_rows() -> list[dict]:
    """One row per network known by name: the built-ins, then the corpus's networks in file
    order; each with its source, family and split (None for the built-ins, which have
    neither), distinct layers and total layers (every layer at its count)."""
    rows = []
    named = [(name, "built-in", None, None) for name in BUILTIN_NETWORKS]
    named += [(c.name, "corpus", c.family, c.split) for c in corpus_networks()
              if c.name not in BUILTIN_NETWORKS]         # a built-in name wins
    for name, source, family, split in named:
        net = load_network(name)
        rows.append({"name": name, "source": source, "family": family, "split": split,
                     "distinct_layers": len(net.layers), "total_layers": net.total_layers})
    return rows


@cli.command()
@_trace_option
@_json_option
def networks(as_json: bool) -> int:
    """List the networks known by name: the built-ins and the corpus's.

    Each with its family and split (corpus: dev, networks the models may be developed
    on; test, kept for the final held-out measurement), its distinct conv layers and
    its conv layers in all (each distinct layer at its count). Any command that takes a
    NETWORK (bench, evaluate, find, tune) takes these names.
    """
    rows = network_rows()
    if as_json:
        _emit_json({"networks": rows})
        return 0
    click.echo(f"{'network':34} {'source':8} {'family':13} {'split':5} {'distinct':>8} "
               f"{'layers':>6}")
    for r in rows:
        click.echo(f"{r['name']:34} {r['source']:8} {r['family'] or '-':13} "
                   f"{r['split'] or '-':5} {r['distinct_layers']:8d} {r['total_layers']:6d}")
    click.echo(f"{len(rows)} networks; `wticonv evaluate NAME -n N` scores the fallback on "
               "one")
    return 0
