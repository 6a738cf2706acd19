"""A solver id's prefix belongs to one distribution (issue 17).

Before, any distribution could declare ``solver_id = "direct.naive"``: whichever entry
point was discovered first kept the id, the real one was quarantined as "already
registered", and ``conv -S direct.naive`` ran the impostor.
"""

from __future__ import annotations

import pytest
from wticonv.contract.registry import SolverRegistry

IMPOSTOR = '''
from wticonv_direct.naive import NaiveSolver
class Impostor(NaiveSolver):
    solver_id = "direct.naive"
solver = Impostor()
'''

SOLVER = '''
from wticonv_direct.naive import NaiveSolver
class S(NaiveSolver):
    solver_id = "{sid}"
solver = S()
'''


@pytest.fixture(params=["discovered-first", "discovered-last"])
def order(request, monkeypatch):
    """Entry points in discovery order, or reversed: the outcome must not depend on it."""
    import importlib_metadata
    from wticonv.contract import registry as plugins
    real = importlib_metadata.entry_points

    def entry_points(**kw):
        eps = list(real(**kw))
        return eps if request.param == "discovered-first" else eps[::-1]

    monkeypatch.setattr(plugins.importlib_metadata, "entry_points", entry_points)
    return request.param


def test_an_impostor_never_takes_a_built_in_id(fake_dist, order):
    from wticonv_direct.naive import solver as real

    fake_dist("wticonv-broken", {"fake_impostor": IMPOSTOR}, {"naive": "fake_impostor:solver"})
    reg = SolverRegistry()
    entry = reg.get("direct.naive")
    assert entry.distribution == "wticonv-direct" and entry.obj is real
    held = [q for q in reg.quarantined if q.distribution == "wticonv-broken"]
    assert len(held) == 1 and held[0].solver_id == "direct.naive"
    assert "the prefix 'direct' belongs to the distribution wticonv-direct" in held[0].reason
    assert "broken." in held[0].reason           # it says what to call the solver instead
    assert not [q for q in reg.quarantined if q.distribution == "wticonv-direct"]


def test_two_claimants_of_one_prefix_are_both_reported_and_neither_preferred(fake_dist,
                                                                              order):
    fake_dist("acme-fast", {"fake_acme_a": SOLVER.format(sid="acme.conv")},
              {"conv": "fake_acme_a:solver"})
    fake_dist("acme-small", {"fake_acme_b": SOLVER.format(sid="acme.small")},
              {"small": "fake_acme_b:solver"})
    reg = SolverRegistry()
    assert not [sid for sid in reg.ids() if sid.startswith("acme.")]
    held = {q.distribution: q for q in reg.quarantined if q.solver_id.startswith("acme.")}
    assert set(held) == {"acme-fast", "acme-small"}
    for q in held.values():
        assert "the prefix 'acme' is claimed by acme-fast and acme-small" in q.reason
        assert "neither is preferred" in q.reason


def test_a_prefix_with_one_claimant_belongs_to_it(fake_dist):
    fake_dist("acme-fast", {"fake_acme_a": SOLVER.format(sid="acme.conv")},
              {"conv": "fake_acme_a:solver"})
    reg = SolverRegistry()
    assert reg.get("acme.conv").distribution == "acme-fast"
    from wticonv.contract.registry import prefix_owner

    assert prefix_owner("direct", ["wticonv-direct", "acme-fast"]) == "wticonv-direct"
    assert prefix_owner("my_conv", ["wticonv-my-conv"]) == "wticonv-my-conv"
    assert prefix_owner("acme", ["wticonv-direct", "acme-fast"]) is None


def test_the_owner_is_kept_even_when_a_filter_leaves_it_out(fake_dist, monkeypatch):
    fake_dist("wticonv-broken", {"fake_impostor": IMPOSTOR}, {"naive": "fake_impostor:solver"})
    monkeypatch.setenv("WTICONV_LOAD_PLUGINS", "wticonv-broken")
    reg = SolverRegistry()
    assert reg.ids() == []
    assert "belongs to the distribution wticonv-direct" in reg.quarantined[0].reason
