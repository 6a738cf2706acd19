"""click parameter types and checks for amounts (seconds, milliseconds) on the CLI."""

from __future__ import annotations

import click

__all__ = ["Amount", "finite"]


class Amount(click.FloatRange):
    """click's FloatRange that names what it wants (``'abc' is not a valid number of
    seconds``, not ``... a valid float range``)."""

    def __init__(self, unit: str, **bounds) -> None:
        super().__init__(**bounds)
        self.name = f"number of {unit}"


def finite(unit: str):
    """A click callback that refuses NaN and infinity (click's FloatRange lets NaN
    through), naming ``unit``."""
    def check(ctx, param, value):
        import math

        if value is not None and not math.isfinite(value):
            raise click.BadParameter(f"{value} is not a finite number of {unit}")
        return value
    return check
