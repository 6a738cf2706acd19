"""The wticonv conformance kit on example.direct: every check must pass."""

from wticonv.testing import parametrize_with_checks


# isolated=True: only this solver and wticonv's built-in solvers are loaded, so other
# installed plugins never show up here (see wticonv's plugin guide, "Testing in isolation").
@parametrize_with_checks(["example.direct"], isolated=True)
def test_conformance(solver_id, check, wticonv_handle):
    check(wticonv_handle)
