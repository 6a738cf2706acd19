"""The wticonv conformance kit on example.direct: every check must pass."""

from wticonv.testing import parametrize_with_checks


@parametrize_with_checks(["example.direct"])
def test_conformance(solver_id, check, wticonv_handle):
    check(wticonv_handle)
