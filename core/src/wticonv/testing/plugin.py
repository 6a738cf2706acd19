"""wticonv's pytest plugin (entry point ``pytest11``): fixtures for solver conformance tests.

Loaded by pytest wherever wticonv is installed; it imports nothing from wticonv until a
fixture is used, so it costs nothing in test suites that do not use it.

Fixtures
--------
wticonv_handle
    A :class:`wticonv.Handle` on the default device with every installed solver, shared
    by the session (kernels built once serve every test).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def wticonv_handle():
    """The default handle, shared by the test session."""
    from wticonv.handle import get_handle

    return get_handle()
