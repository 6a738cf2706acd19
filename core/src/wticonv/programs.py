"""The program cache: one OpenCL build per (device, source, build options).

Programs are looked up in memory first, then in the on-disk store (program binaries in
SQLite, see :mod:`wticonv.store`), and built from source only when neither has them. The
counters tell tests and ``wticonv bench`` how many builds really happened.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
from dataclasses import dataclass

import pyopencl as cl

from .errors import KernelBuildError, StoreError

__all__ = ["ProgramCache", "BuildCounters"]

# Bump when the way programs are built or stored changes, to invalidate stored binaries
# ("2": stored with a SHA-256 of their bytes).
_CACHE_FORMAT = "2"


@dataclass
class BuildCounters:
    """How programs were obtained in this process.

    Attributes
    ----------
    source_builds : int
        Programs compiled from OpenCL C source (the slow path: about a second each on PoCL).
    binary_loads : int
        Programs loaded from binaries stored on disk by an earlier process.
    memory_hits : int
        Requests answered by a program already built in this process.
    """

    source_builds: int = 0
    binary_loads: int = 0
    memory_hits: int = 0

    @property
    def builds(self) -> int:
        """Programs built in this process (from source or from a stored binary)."""
        return self.source_builds + self.binary_loads


class ProgramCache:
    """Builds and caches OpenCL programs for one device.

    Parameters
    ----------
    context : pyopencl.Context
    device : pyopencl.Device
    device_key : str
        Identifies device + driver in the store.
    store : wticonv.store.Store or None
        Where binaries persist; None keeps them in memory only.
    """

    def __init__(self, context: cl.Context, device: cl.Device, device_key: str,
                 store=None) -> None:
        self.context = context
        self.device = device
        self.device_key = device_key
        self.store = store
        self.counters = BuildCounters()
        self._programs: dict[str, cl.Program] = {}
        self._lock = threading.Lock()

    @staticmethod
    def digest(source: str, options: str) -> str:
        """SHA-256 of the cache format, build options and source."""
        h = hashlib.sha256()
        for part in (_CACHE_FORMAT, options, source):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()

    def build(self, source: str, options: str = "") -> cl.Program:
        """Return the built program for ``source`` with ``options``.

        Raises
        ------
        KernelBuildError
            If the compiler rejects the source; the message carries the build log.
        """
        key = self.digest(source, options)
        with self._lock:
            prg = self._programs.get(key)
            if prg is not None:
                self.counters.memory_hits += 1
                return prg
            prg = self._load_binary(key, options)
            if prg is None:
                prg = self._build_source(source, options)
                self.counters.source_builds += 1
                if self.store is not None:
                    try:
                        binary = prg.get_info(cl.program_info.BINARIES)[0]
                        if binary:
                            self.store.put_program_binary(self.device_key, key, bytes(binary))
                    except (cl.Error, OSError, StoreError):  # an unwritable cache is no error
                        pass
            else:
                self.counters.binary_loads += 1
            self._programs[key] = prg
            return prg

    def _load_binary(self, key: str, options: str) -> cl.Program | None:
        if self.store is None:
            return None
        try:
            binary = self.store.get_program_binary(self.device_key, key)
        except StoreError:      # a cache that cannot be read: build from source
            return None
        if binary is None:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(self.context, [self.device], [binary]).build(options=options)
        except (cl.Error, RuntimeError):
            try:
                self.store.delete_program_binary(self.device_key, key)
            except StoreError:
                pass
            return None

    def _build_source(self, source: str, options: str) -> cl.Program:
        try:
            with warnings.catch_warnings():
                # Drivers print informational compiler output (NVIDIA does for every
                # build); errors still raise, with the log, below.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(self.context, source).build(options=options)
        except (cl.Error, RuntimeError) as e:
            raise KernelBuildError(
                f"OpenCL program failed to build on {self.device.name.strip()} "
                f"(options {options!r}):\n{e}") from None
