"""Cold program builds in a helper process, so a compiler crash cannot end the caller.

A driver that passed the probe may still abort on one solver's kernel. So a program that
is neither in memory nor stored as a binary (:mod:`wticonv.runtime.programs`) is compiled by a
helper: one child process per device and user process (:func:`main` of this module, see
:mod:`wticonv.runtime.isolation`), started at the first cold build and kept for the next
ones. It builds the source and fetches the program binary (PoCL
generates the machine code of every kernel then: the step that aborts on an unknown CPU),
and returns it; the user's process loads the binary, which the program cache also
stores. A warm cache never starts the helper.

If the helper dies (abort, signal) or takes longer than :data:`BUILD_TIMEOUT_S`
(``WTICONV_BUILD_TIMEOUT``), the build raises :class:`~wticonv.errors.KernelBuildError`
naming what happened and the last error line the compiler printed, the helper is
restarted for the next build, and the solver is set aside for the problem as for any
build error. A driver that returns no binary has its program built again in the user's
process (the helper has shown that it builds).

Protocol: each request and reply is a 4-byte big-endian length and a pickle. Request:
``(source, options)``; reply: ``("ok", binary_bytes, seconds)``, ``("error", build_log,
seconds)``, where ``seconds`` is the time the helper spent building.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import BinaryIO

from wticonv.errors import DeviceError, KernelBuildError
from wticonv.runtime.isolation import (
    child_argv,
    child_env,
    describe_exit,
    error_tail,
    timeout_from_env,
)

__all__ = ["BUILD_JOBS", "BUILD_TIMEOUT_S", "BuildHelper", "build_jobs", "close_all",
           "helper_for", "real_key"]

#: Seconds one build may take in the helper before it is killed (``WTICONV_BUILD_TIMEOUT``
#: overrides). The largest built-in programs take 2-5 s with PoCL on a 2-core machine.
BUILD_TIMEOUT_S = 300.0

#: Most helpers that compile at once when programs are compiled ahead
#: (:meth:`wticonv.runtime.programs.ProgramCache.precompile`; ``WTICONV_BUILD_JOBS``
#: overrides, 1 compiles one at a time). Each NVIDIA helper holds a CUDA context (about a
#: second to start), each PoCL one a copy of LLVM; a cold calibration on the H200 compiled
#: 61 programs in 39 s one at a time (0.64 s each, benchmarks/calibrate_profile.py).
BUILD_JOBS = 8


def build_jobs() -> int:
    """Helpers to compile with at once: ``WTICONV_BUILD_JOBS`` (a whole number from 1 to
    64), else :data:`BUILD_JOBS` or the CPUs this process may use, whichever is fewer.

    Raises DeviceError if ``WTICONV_BUILD_JOBS`` is set to anything else."""
    raw = os.environ.get("WTICONV_BUILD_JOBS", "").strip()
    if raw:
        if not (raw.isdigit() and 1 <= int(raw) <= 64):
            raise DeviceError(f"WTICONV_BUILD_JOBS={raw!r} is not a whole number from 1 to "
                              "64; unset it or set e.g. WTICONV_BUILD_JOBS=4")
        return int(raw)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(BUILD_JOBS, cpus))


_helpers: dict[tuple[int, int, str], BuildHelper] = {}
_helpers_lock = threading.Lock()


def real_key(cl_device) -> str:
    """``platform|name|driver version`` as the driver reports them for ``cl_device`` (the
    key the helper finds its device by)."""
    return (f"{cl_device.platform.name.strip()}|{cl_device.name.strip()}|"
            f"{cl_device.driver_version.strip()}")


def helper_for(platform_index: int, device_index: int, device_key: str) -> BuildHelper:
    """The build helper of one device in this process (made on first use; the process is
    started at the first build). ``device_key`` is :func:`real_key` of the device."""
    key = (platform_index, device_index, device_key)
    with _helpers_lock:
        helper = _helpers.get(key)
        if helper is None:
            if not _helpers:
                atexit.register(close_all)
            helper = _helpers[key] = BuildHelper(platform_index, device_index, device_key)
        return helper


def close_all() -> None:
    """End every build helper of this process (at exit; a later build starts one again)."""
    with _helpers_lock:
        helpers = list(_helpers.values())
    for helper in helpers:
        helper.close()


def _send(stream: BinaryIO, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class BuildHelper:
    """A child process that compiles OpenCL programs for one device.

    Parameters
    ----------
    platform_index, device_index : int
        The device's ``P:D``.
    device_key : str
        :func:`real_key` of the device: the helper builds for the device of that platform,
        name and driver version (at ``P:D`` if several match).
    """

    def __init__(self, platform_index: int, device_index: int, device_key: str) -> None:
        self.platform_index, self.device_index = platform_index, device_index
        self.device_key = device_key
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._lock = threading.Lock()
        #: Processes started so far (a restart after a crash counts).
        self.starts = 0
        #: Seconds the helper spent on the last build (what isolation adds is the rest of
        #: the call's time: the round trip; see benchmarks/build_isolation.py).
        self.last_build_s = 0.0

    def sibling(self) -> BuildHelper:
        """Another helper for the same device (started at its first build), to compile
        beside this one."""
        return BuildHelper(self.platform_index, self.device_index, self.device_key)

    def _start(self) -> subprocess.Popen:
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            child_argv("wticonv.runtime.build_helper", str(self.platform_index),
                       str(self.device_index), self.device_key),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=child_env("build"), start_new_session=True)
        self.starts += 1
        return self._proc

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return error_tail(self._stderr.read()[-20000:].decode(errors="replace"))

    def _stop(self, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        """End the helper process (a later build starts a new one)."""
        with self._lock:
            self._stop(kill=False)

    def build(self, source: str, options: str, device_name: str,
              timeout: float | None = None) -> bytes | None:
        """Compile ``source`` with ``options`` in the helper; return the program binary
        (None when the driver gives none).

        Raises
        ------
        KernelBuildError
            The compiler rejected the source (the message carries the build log), the
            helper died (how, and the compiler's last error line), or the build took longer
            than ``timeout`` seconds (default :data:`BUILD_TIMEOUT_S`).
        """
        timeout = timeout if timeout is not None else timeout_from_env(
            "WTICONV_BUILD_TIMEOUT", BUILD_TIMEOUT_S)
        head = f"OpenCL program failed to build on {device_name} (options {options!r})"
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None \
                else self._start()
            try:
                _send(proc.stdin, (source, options))
                deadline = time.monotonic() + timeout
                size = struct.unpack(">I", _read_exact(proc.stdout.fileno(), 4, deadline))[0]
                status, payload, self.last_build_s = pickle.loads(
                    _read_exact(proc.stdout.fileno(), size, deadline))
            except TimeoutError:
                self._stop(kill=True)
                raise KernelBuildError(
                    f"{head}:\nerror: the compiler hung: no answer within {timeout:g} s in "
                    "its helper process, which was killed (WTICONV_BUILD_TIMEOUT sets the "
                    "limit)") from None
            except (EOFError, OSError, pickle.UnpicklingError, struct.error):
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                how = describe_exit(proc.returncode) if proc.returncode is not None \
                    else "stopped answering"
                tail = self._stderr_tail()
                self._stop(kill=True)
                raise KernelBuildError(
                    f"{head}:\nerror: the compiler {how} in its helper process"
                    f"{': ' + tail if tail else ''}") from None
        if status == "error":
            raise KernelBuildError(f"{head}:\n{payload}")
        return payload or None


def _serve(platform_index: int, device_index: int, key: str) -> int:
    import pyopencl as cl

    # The device is found by what the driver says it is (platform, name, driver version:
    # a stand-in DeviceInfo may call it something else); P:D picks among equals.
    found = []
    for p, plat in enumerate(cl.get_platforms()):
        try:
            devices = plat.get_devices()
        except cl.Error:
            continue
        for d, dev in enumerate(devices):
            if real_key(dev) == key:
                found.append(((p, d) != (platform_index, device_index), dev))
    if not found:
        print(f"wticonv.runtime.build_helper: no OpenCL device {key!r} (expected at "
              f"{platform_index}:{device_index})", file=sys.stderr)
        return 3
    found.sort(key=lambda pair: pair[0])
    found = [dev for _, dev in found]
    dev = found[0]
    ctx = cl.Context([dev])
    # The replies get their own descriptor; whatever a driver prints to standard output
    # goes to standard error instead of into the protocol.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        head = inp.read(4)
        if len(head) < 4:
            return 0
        source, options = pickle.loads(inp.read(struct.unpack(">I", head)[0]))
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", cl.CompilerWarning)
                prg = cl.Program(ctx, source).build(options=options)
            binary = prg.get_info(cl.program_info.BINARIES)[0]
            reply = ("ok", bytes(binary) if binary else b"")
        except (cl.Error, RuntimeError) as e:
            reply = ("error", str(e))
        _send(out, (*reply, time.perf_counter() - start))


def main(argv: list[str] | None = None) -> int:
    """The helper: ``python -m wticonv.runtime.build_helper PLATFORM DEVICE DEVICE_KEY``; serves
    build requests on stdin until it closes."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m wticonv.runtime.build_helper PLATFORM DEVICE DEVICE_KEY",
              file=sys.stderr)
        return 2
    return _serve(int(args[0]), int(args[1]), args[2])


if __name__ == "__main__":  # pragma: no cover - run as a child
    sys.exit(main())
