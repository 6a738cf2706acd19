"""wticonv-example: the solver example.direct (see solver.py)."""
