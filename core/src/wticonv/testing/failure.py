"""The exception every conformance check raises when a solver breaks the contract."""

from __future__ import annotations

__all__ = ["CheckFailure"]


class CheckFailure(AssertionError):
    """A solver broke the contract; the message says how, naming the hook or check, the
    problem (its find-db key and description) and the value that is wrong."""
