"""The program cache: one OpenCL build per (device, source, build options).

Programs are looked up in memory first, then in the on-disk store (program binaries in
SQLite, see :mod:`wticonv.db.store`), and built from source only when neither has them. A
build from source runs in the device's build helper (:mod:`wticonv.runtime.build_helper`), so that
a compiler crash ends the helper, not the caller; the binary it returns is loaded here and
stored. A program that builds without any of the kernels its source declares is a build
error too. The counters tell tests and ``wticonv bench`` how many builds really happened.

:meth:`ProgramCache.precompile` compiles many programs ahead, several at once in build
helpers (what calibrate, find and evaluate do with the programs their solvers name).
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pyopencl as cl

from wticonv.errors import KernelBuildError, StoreError
from wticonv.runtime.isolation import isolation_enabled
from wticonv.runtime.ptx import deferred, defers, undefer

__all__ = ["ProgramCache", "BuildCounters"]

# Bump when the way programs are built or stored changes, to invalidate stored binaries
# ("2": stored with a SHA-256 of their bytes; "3": sources that defer PTX lines are stored
# undeferred, wticonv.runtime.ptx, or refused).
_CACHE_FORMAT = "3"


@dataclass
class BuildCounters:
    """How programs were obtained in this process.

    Attributes
    ----------
    source_builds : int
        Programs compiled from OpenCL C source (the slow path: about a second each on PoCL),
        in the build helper or in this process.
    isolated_builds : int
        Of those, the ones compiled in the build helper.
    binary_loads : int
        Programs loaded from binaries stored on disk by an earlier process.
    memory_hits : int
        Requests answered by a program already built in this process.
    """

    source_builds: int = 0
    isolated_builds: int = 0
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
    store : wticonv.db.store.Store or None
        Where binaries persist; None keeps them in memory only.
    helper : wticonv.runtime.build_helper.BuildHelper or None
        Compiles programs from source in a child process; None (or ``WTICONV_ISOLATE=0``)
        compiles them in this process.
    """

    def __init__(self, context: cl.Context, device: cl.Device, device_key: str,
                 store=None, helper=None) -> None:
        self.helper = helper
        self.context = context
        self.device = device
        self.device_key = device_key
        self.store = store
        self.counters = BuildCounters()
        self._programs: dict[str, cl.Program] = {}
        self._lock = threading.Lock()
        self._recorders: list[set[str]] = []

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
            If the compiler rejects the source (the message carries the build log), dies or
            hangs in the build helper, or builds none of the source's kernels.
        """
        key = self.digest(source, options)
        with self._lock:
            for seen in self._recorders:
                seen.add(key)
            prg = self._programs.get(key)
            if prg is not None:
                self.counters.memory_hits += 1
                return prg
            prg = self._load_binary(key, options, source)
            if prg is None:
                prg, binary = self._build_cold(source, options)
                _check_kernels(prg, source, self.device, options)
                self.counters.source_builds += 1
                if self.store is not None:
                    try:
                        if binary is None:
                            binary = prg.get_info(cl.program_info.BINARIES)[0]
                        if binary:
                            self.store.put_program_binary(self.device_key, key, bytes(binary))
                    except (cl.Error, OSError, StoreError):  # an unwritable cache is no error
                        pass
            else:
                self.counters.binary_loads += 1
            self._programs[key] = prg
            return prg

    @contextlib.contextmanager
    def recording(self) -> Iterator[set[str]]:
        """``with cache.recording() as seen:`` collects the :meth:`digest` of every program
        :meth:`build` is asked for inside the block, built or found (the conformance kit
        compares them with a solver's ``programs`` hook)."""
        seen: set[str] = set()
        with self._lock:
            self._recorders.append(seen)
        try:
            yield seen
        finally:
            with self._lock:
                self._recorders.remove(seen)

    def note_use(self, source: str, options: str) -> None:
        """Tell the :meth:`recording` blocks open now that a program is used again without
        asking :meth:`build` (a kernel object kept by the caller, as the host kit keeps
        them); nothing happens when none is open."""
        if self._recorders:
            key = self.digest(source, options)
            with self._lock:
                for seen in self._recorders:
                    seen.add(key)

    def precompile(self, programs: Iterable[tuple[str, str]], jobs: int | None = None,
                   progress: Callable[[int, int], None] | None = None) -> int:
        """Compile the ``(source, options)`` pairs of ``programs`` that are neither in
        memory nor stored, up to ``jobs`` at once (default
        :func:`wticonv.runtime.build_helper.build_jobs`), each in its own build helper,
        and keep them as :meth:`build` would: a later :meth:`build` of one is a memory hit.

        A program that fails to compile here is left out: :meth:`build` compiles it again
        when a solver asks for it and raises its error there, where the solver is set
        aside. Without a build helper (``WTICONV_ISOLATE=0``) nothing is compiled ahead.
        ``progress`` is called with (programs done, programs to compile) as each ends.

        Returns the number of programs compiled here.
        """
        from wticonv.runtime.build_helper import build_jobs

        todo: dict[str, tuple[str, str]] = {}
        with self._lock:
            for source, options in programs:
                key = self.digest(source, options)
                if key in todo or key in self._programs:
                    continue
                prg = self._load_binary(key, options, source)
                if prg is not None:
                    self.counters.binary_loads += 1
                    self._programs[key] = prg
                else:
                    todo[key] = (source, options)
        if not todo or self.helper is None or not isolation_enabled():
            return 0
        jobs = max(1, min(jobs or build_jobs(), len(todo)))
        work: queue.Queue = queue.Queue()
        for item in todo.items():
            work.put(item)
        done: queue.Queue = queue.Queue()
        helpers = [self.helper] + [self.helper.sibling() for _ in range(jobs - 1)]
        name = self.device.name.strip()

        def compile_some(helper) -> None:
            while True:
                try:
                    key, (source, options) = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    done.put((key, source, options, helper.build(source, options, name)))
                except Exception:  # noqa: BLE001 - build() compiles it again and reports
                    done.put((key, source, options, None))

        threads = [threading.Thread(target=compile_some, args=(h,), daemon=True,
                                    name=f"wticonv-precompile-{i}")
                   for i, h in enumerate(helpers)]
        for t in threads:
            t.start()
        built = 0
        try:
            for i in range(len(todo)):
                key, source, options, binary = done.get()
                if binary is not None and self._keep(key, source, options, binary):
                    built += 1
                if progress is not None:
                    progress(i + 1, len(todo))
        finally:
            for t in threads:
                t.join()
            for h in helpers[1:]:
                h.close()
        return built

    def _keep(self, key: str, source: str, options: str, binary: bytes) -> bool:
        """Load ``binary``, compiled from ``source`` in a build helper, into memory and the
        store as :meth:`build` would; False (nothing kept) if it cannot be used."""
        self.counters.isolated_builds += 1
        try:
            if defers(source):
                prg, binary = self._undefer(None, binary, source, options)
            else:
                prg = _from_binary(self.context, self.device, binary, options, source)
            _check_kernels(prg, source, self.device, options)
        except (cl.Error, RuntimeError, KernelBuildError):
            return False
        with self._lock:
            self.counters.source_builds += 1
            self._programs.setdefault(key, prg)
        if self.store is not None and binary:
            try:
                self.store.put_program_binary(self.device_key, key, bytes(binary))
            except (OSError, StoreError):
                pass
        return True

    def _build_cold(self, source: str, options: str) -> tuple[cl.Program, bytes | None]:
        """Build from source: in the helper when there is one (then load its binary here),
        else in this process; a source that defers PTX lines is built from its undeferred
        PTX (:meth:`_undefer`). Returns the program and its binary (None: ask the
        program)."""
        if self.helper is not None and isolation_enabled():
            binary = self.helper.build(source, options, self.device.name.strip())
            self.counters.isolated_builds += 1
            if binary and defers(source):    # never loaded as it came: it lacks those lines
                return self._undefer(None, binary, source, options)
            if binary:
                try:
                    return _from_binary(self.context, self.device, binary, options,
                                        source), binary
                except (cl.Error, RuntimeError):
                    pass    # a binary this context cannot load: build here (it builds)
        return self._undefer(self._build_source(source, options), None, source, options)

    def _undefer(self, prg: cl.Program | None, binary: bytes | None, source: str,
                 options: str) -> tuple[cl.Program, bytes | None]:
        """A program whose source defers PTX lines (:mod:`wticonv.runtime.ptx`) built from
        its undeferred PTX (``binary``, or ``prg``'s when None), with that PTX as its
        binary; any other as it is.

        Raises KernelBuildError if such a source was not compiled to PTX (a driver other
        than NVIDIA's): built as it is, the deferred instructions would be missing."""
        if not defers(source):
            return prg, binary
        try:
            if binary is None:
                binary = bytes(prg.get_info(cl.program_info.BINARIES)[0])
        except cl.Error:
            binary = b""
        if not deferred(binary):
            raise KernelBuildError(
                f"OpenCL program refused on {self.device.name.strip()} (options "
                f"{options!r}): its source defers PTX lines (a string literal or asm line "
                "starting with //@, wticonv.runtime.ptx), which only NVIDIA's OpenCL driver "
                "builds, and this driver did not return PTX with those lines")
        ptx = undefer(binary)
        try:
            return _from_binary(self.context, self.device, ptx, options, source), ptx
        except (cl.Error, RuntimeError) as e:
            raise KernelBuildError(
                f"OpenCL program failed to build on {self.device.name.strip()} from its "
                f"undeferred PTX (options {options!r}):\n{e}") from None

    def _load_binary(self, key: str, options: str, source: str) -> cl.Program | None:
        if self.store is None:
            return None
        try:
            binary = self.store.get_program_binary(self.device_key, key)
        except StoreError:      # a cache that cannot be read: build from source
            return None
        if binary is None:
            return None
        try:
            return _from_binary(self.context, self.device, binary, options, source)
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


def _from_binary(context: cl.Context, device: cl.Device, binary: bytes, options: str,
                 source: str) -> cl.Program:
    """The program of ``binary``, built. It is told its ``source``: pyopencl looks for a
    program's source whenever it makes a kernel object, and on a program made from a
    binary the lookup asks the driver for a kernel named ``_source`` (an API error that
    Oclgrind reports)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cl.CompilerWarning)
        prg = cl.Program(context, [device], [binary]).build(options=options)
    prg._source = source
    return prg


_KERNEL_DECL = re.compile(r"\b(?:__kernel|kernel)\b")


def _check_kernels(prg: cl.Program, source: str, device: cl.Device, options: str) -> None:
    """Raise KernelBuildError if ``prg`` has no kernel although ``source`` declares some (a
    driver that reports success and builds nothing)."""
    if not _KERNEL_DECL.search(source):
        return
    # The count, not the names: NVIDIA's driver (580) crashes the process when asked for
    # the (empty) names of a program without kernels (seen on the H200).
    try:
        count = int(prg.get_info(cl.program_info.NUM_KERNELS))
    except cl.Error:
        count = 0
    if count == 0:
        raise KernelBuildError(
            f"OpenCL program failed to build on {device.name.strip()} (options {options!r}):"
            "\nerror: the driver reported success but built none of the program's kernels")
