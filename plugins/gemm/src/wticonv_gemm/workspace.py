"""How much workspace a solver may take: the caller's limit, or a default cap.

With no limit from the caller, solvers that can work in chunks keep their workspace under
1 GiB and an eighth of the device's memory (but at least ``minimum`` bytes, their smallest
piece): a bigger chunk barely helps (a 110 MiB im2col buffer for 16 images ran no faster
than a 7 MiB one) and costs memory the caller may need. Never more than the device's
largest buffer.
"""

from __future__ import annotations

__all__ = ["room", "DEFAULT_CAP_BYTES", "DEFAULT_CAP_SHARE"]

DEFAULT_CAP_BYTES = 2**30
DEFAULT_CAP_SHARE = 8


def room(device, workspace_limit: int | None, minimum: int = 0) -> int:
    """Bytes of workspace a chunking solver may use on ``device`` (see module docstring)."""
    if workspace_limit is None:
        cap = min(DEFAULT_CAP_BYTES, device.info.global_mem_bytes // DEFAULT_CAP_SHARE)
        return min(max(cap, minimum), device.info.max_alloc_bytes)
    return min(workspace_limit, device.info.max_alloc_bytes)
