"""OpenCL devices as the drivers report them: :class:`DeviceInfo` and
:func:`list_devices`. Nothing here builds or runs anything on a device."""

from __future__ import annotations

from dataclasses import dataclass

import pyopencl as cl

from wticonv.errors import DeviceError

__all__ = ["DeviceInfo", "INSTALL_HINT", "list_devices"]


INSTALL_HINT = ("install an OpenCL driver: 'pip install \"wticonv[pocl]\"' (PoCL for the CPU) "
                 "or, as root on Debian/Ubuntu, 'apt-get install pocl-opencl-icd'")


@dataclass(frozen=True)
class DeviceInfo:
    """What OpenCL reports about a device.

    Attributes
    ----------
    platform_index, device_index : int
        Position in ``wticonv devices`` (the ``P:D`` of ``--device``).
    platform, name, vendor, driver_version, version : str
    kind : str
        ``"gpu"``, ``"cpu"``, ``"accelerator"`` or ``"other"`` (also a simulator such as
        Oclgrind, which reports every type at once).
    compute_units : int
    clock_mhz : int
        Maximum clock frequency, MHz.
    local_mem_bytes, global_mem_bytes, max_alloc_bytes : int
        Local memory per work-group, global memory, largest single buffer (bytes).
    max_work_group_size : int
    vector_width : int
        Preferred float vector width (CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT): 16 on
        AVX-512 CPUs, 8 on AVX2, 1 on most GPUs.
    """

    platform_index: int
    device_index: int
    platform: str
    name: str
    vendor: str
    driver_version: str
    version: str
    kind: str
    compute_units: int
    clock_mhz: int
    local_mem_bytes: int
    global_mem_bytes: int
    max_alloc_bytes: int
    max_work_group_size: int
    vector_width: int = 1

    @property
    def key(self) -> str:
        """Identifies device + driver in the databases: ``platform|name|driver version``."""
        return f"{self.platform}|{self.name}|{self.driver_version}"

    @property
    def index(self) -> str:
        """``"P:D"``."""
        return f"{self.platform_index}:{self.device_index}"


def _kind(dev: cl.Device) -> str:
    """The device's kind; ``"other"`` unless it reports exactly one of GPU, CPU and
    ACCELERATOR. A device reporting several is a simulator (Oclgrind reports all three),
    which must never be taken for a GPU or a CPU by default selection."""
    t = dev.type
    kinds = [name for name, bit in (("gpu", cl.device_type.GPU), ("cpu", cl.device_type.CPU),
                                    ("accelerator", cl.device_type.ACCELERATOR)) if t & bit]
    return kinds[0] if len(kinds) == 1 else "other"


def _info(dev: cl.Device, p: int, d: int) -> DeviceInfo:
    return DeviceInfo(
        platform_index=p, device_index=d, platform=dev.platform.name.strip(),
        name=dev.name.strip(), vendor=dev.vendor.strip(),
        driver_version=dev.driver_version.strip(), version=dev.version.strip(),
        kind=_kind(dev), compute_units=int(dev.max_compute_units),
        clock_mhz=int(dev.max_clock_frequency), local_mem_bytes=int(dev.local_mem_size),
        global_mem_bytes=int(dev.global_mem_size), max_alloc_bytes=int(dev.max_mem_alloc_size),
        max_work_group_size=int(dev.max_work_group_size),
        vector_width=max(1, int(dev.preferred_vector_width_float)))


def list_devices() -> list[tuple[DeviceInfo, cl.Device]]:
    """Every OpenCL device, in platform order, with its :class:`DeviceInfo`.

    Raises
    ------
    DeviceError
        If no OpenCL platform is installed.
    """
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        raise DeviceError(f"no OpenCL platform found ({e}); {INSTALL_HINT}") from None
    out = []
    for p, plat in enumerate(platforms):
        try:
            devices = plat.get_devices()
        except cl.Error:
            continue
        for d, dev in enumerate(devices):
            out.append((_info(dev, p, d), dev))
    if not out:
        raise DeviceError(f"no OpenCL device found; {INSTALL_HINT}")
    return out
