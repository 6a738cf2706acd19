"""The handle as an object: its uid and weak lookup, copies, pickling, and forked children."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import signal
import time
import warnings
import weakref

import numpy as np
import pytest
import wticonv
from wticonv.errors import DeviceError
from wticonv.handle import Handle, handle_by_uid


def test_uids_name_live_handles_only(handle):
    a, b = Handle(handle.device), Handle(handle.device)
    assert a.uid != b.uid and a.uid > 0 and b.uid > 0
    assert handle_by_uid(a.uid) is a and handle_by_uid(b.uid) is b
    uid, ref = a.uid, weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None                    # the lookup kept nothing alive
    assert handle_by_uid(uid) is None and handle_by_uid(b.uid) is b
    c = Handle(handle.device)
    assert c.uid not in (uid, b.uid)        # never reused


def test_copies_are_the_handle_and_pickling_says_what_to_do(handle):
    h = Handle(handle.device, zero_copy=True)
    assert copy.copy(h) is h and copy.deepcopy(h) is h
    box = copy.deepcopy({"handle": h, "list": [1]})
    assert box["handle"] is h
    with pytest.raises(TypeError, match="cannot be pickled.*wticonv.Handle\\(device\\)"):
        pickle.dumps(h)


def _in_fork(fn, timeout: float = 30.0) -> int:
    """Run ``fn()`` in a forked child: 0 if it returned True, 1 if False, 2 if it raised
    something else, -1 if it did not end within ``timeout`` seconds (then killed)."""
    with warnings.catch_warnings():        # Python 3.12+: fork with threads is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if fn() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1


def _refused(fn) -> bool:
    try:
        fn()
    except DeviceError as e:
        return "is a fork of process" in str(e) and "'spawn'" in str(e)
    return False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_is_refused_instead_of_hanging(handle):
    """A child forked after the parent ran a convolution gets the parent's OpenCL
    context and queue without the driver's threads: PoCL's clFinish there waited
    forever. Every way in (the parent's handle, a new handle on its device, a new
    device) is refused with the fix, and the parent still works afterwards."""
    p = wticonv.ConvProblem(n=1, c=2, h=5, w=5, k=3, r=3, s=3)
    x = np.ones(p.x_shape, np.float32)
    w = np.ones(p.w_shape, np.float32)
    y = handle.compute(p, x=x, w=w)          # the parent has used the device
    assert float(y[0, 0, 0, 0]) == 18.0

    def child() -> bool:
        return (_refused(lambda: handle.compute(p, x=x, w=w))
                and _refused(lambda: Handle(handle.device).compute(p, x=x, w=w))
                and _refused(lambda: handle.select(p))
                and _refused(lambda: Handle()))

    assert _in_fork(child) == 0
    assert np.array_equal(handle.compute(p, x=x, w=w), y)
