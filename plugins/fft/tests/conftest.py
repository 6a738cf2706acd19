"""Fixtures of this distribution's tests, so that they run from its sdist too (outside the
wticonv repository, whose conftest.py files are not shipped with it)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def handle(wticonv_handle):
    """The default handle (default device, every installed solver), shared by the session;
    ``wticonv_handle`` comes from wticonv's pytest plugin."""
    return wticonv_handle
