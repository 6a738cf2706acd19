"""Who may register a solver id: the prefix of an id belongs to one distribution.

A solver id is ``<prefix>.<variant>``. The rule, applied to every solver loaded through
entry points, whatever order they are discovered in:

1. The prefix ``p`` belongs to the installed distribution named ``wticonv-p`` (``_`` in
   the prefix read as ``-``, names compared as pip compares them), when there is one,
   even if a filter (``WTICONV_LOAD_PLUGINS``, ``--no-plugin``) keeps it from loading.
   So ``direct.*`` belongs to ``wticonv-direct``: the built-in solvers keep their ids.
2. Otherwise it belongs to the one distribution that declares solvers with it.
3. When two or more distributions declare solvers with a prefix that no ``wticonv-p``
   owns, none of them is preferred: every solver with that prefix is quarantined, and
   each quarantine names all the claimants.

Solvers refused by rules 1 or 3 are quarantined with the reason; the others load as
before. Solvers registered by hand (:meth:`wticonv.contract.registry.SolverRegistry.register`, as
tests and the isolated conformance kit do) are not subject to the rule: only to unique
ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["prefix_owner", "norm_dist", "suggested_prefix", "claim_verdicts"]


def norm_dist(name: str) -> str:
    """A distribution name as pip compares them: lowercase, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def prefix_owner(prefix: str, installed: Iterable[str]) -> str | None:
    """The installed distribution (its name as given in ``installed``) named
    ``wticonv-<prefix>``, or None when there is none (rule 1)."""
    want = norm_dist(f"wticonv-{prefix}")
    for name in installed:
        if norm_dist(name) == want:
            return name
    return None


def suggested_prefix(distribution: str) -> str:
    """The prefix a distribution's solvers should carry: its name without ``wticonv-``,
    ``-`` and ``.`` as ``_``, e.g. ``wticonv-my-conv`` -> ``my_conv``."""
    name = norm_dist(distribution or "myplugin")
    if name.startswith("wticonv-") and len(name) > len("wticonv-"):
        name = name[len("wticonv-"):]
    return re.sub(r"[^a-z0-9_]", "_", name.replace("-", "_"))


def claim_verdicts(claims: Iterable[tuple[str, str]], installed: Iterable[str]
                   ) -> dict[tuple[str, str], str]:
    """Which claims break the rule, and why.

    Parameters
    ----------
    claims : iterable of (solver id, distribution)
        Every solver id a loaded entry point declares, with its distribution.
    installed : iterable of str
        The names of every installed distribution with ``wticonv.solvers`` entry points,
        loaded or not.

    Returns
    -------
    dict
        ``(solver id, distribution) -> reason`` for each refused claim (rules 1 and 3);
        claims not in it may register.
    """
    claims = list(claims)
    installed = list(installed)
    by_prefix: dict[str, set[str]] = {}
    for sid, dist in claims:
        if "." in sid:
            by_prefix.setdefault(sid.split(".", 1)[0], set()).add(dist)
    refused: dict[tuple[str, str], str] = {}
    for sid, dist in claims:
        if "." not in sid:
            continue                         # register() reports the malformed id
        prefix, variant = sid.split(".", 1)
        owner = prefix_owner(prefix, installed)
        if owner is not None:
            if norm_dist(owner) != norm_dist(dist):
                refused[(sid, dist)] = (
                    f"solver id {sid!r}: the prefix {prefix!r} belongs to the distribution "
                    f"{owner} (a prefix belongs to the distribution wticonv-<prefix>); "
                    f"name the solver after its own distribution, e.g. "
                    f"'{suggested_prefix(dist)}.{variant}'")
            continue
        claimants = sorted(by_prefix[prefix])
        if len(claimants) > 1:
            refused[(sid, dist)] = (
                f"solver id {sid!r}: the prefix {prefix!r} is claimed by "
                f"{' and '.join(claimants)}; neither is preferred, so no solver with it "
                "loads: uninstall all but one of them, or rename the solvers after their "
                f"own distribution (e.g. '{suggested_prefix(dist)}.{variant}')")
    return refused
