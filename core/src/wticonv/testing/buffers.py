"""Device buffers for the conformance checks: random host data, and outputs and workspaces
handed to the solver as sub-buffers with guard regions around them, so that a kernel
writing past its output fails the check it is in instead of corrupting the test process.
"""

from __future__ import annotations

import contextlib

import numpy as np

from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import OUTPUT_TENSOR
from wticonv.testing.failure import CheckFailure

__all__ = ["GUARD_BYTES", "random_data", "device_tensors", "guarded", "guards_intact"]


def random_data(problem: ConvProblem, seed: int = 0) -> dict:
    """Uniform [-1, 1) float32 x, w and y of ``problem`` (shapes ``problem.x_shape`` ...)."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in (("x", problem.x_shape), ("w", problem.w_shape),
                                ("y", problem.y_shape))}


#: Bytes of guard region on each side of the workspace and the output (rounded up to the
#: device's sub-buffer alignment).
GUARD_BYTES = 4096
_SENTINEL = 0x5A


def guarded(dev, nbytes: int):
    """``(whole, region, guard)``: a buffer of ``nbytes`` + 2 guards filled with the
    sentinel byte, and its middle ``nbytes`` as a sub-buffer (None when ``nbytes`` is 0)."""
    import pyopencl as cl

    align = max(dev.cl_device.mem_base_addr_align // 8, 4)
    guard = -(-GUARD_BYTES // align) * align
    whole = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes + 2 * guard)
    cl.enqueue_copy(dev.queue, whole, np.full(nbytes + 2 * guard, _SENTINEL, np.uint8))
    region = whole.get_sub_region(guard, nbytes) if nbytes else None
    return whole, region, guard


def guards_intact(dev, whole, nbytes: int, guard: int) -> bool:
    import pyopencl as cl

    host = np.empty(nbytes + 2 * guard, np.uint8)
    cl.enqueue_copy(dev.queue, host, whole)
    return bool((host[:guard] == _SENTINEL).all() and (host[guard + nbytes:] == _SENTINEL).all())


class _DeviceTensors:
    """A problem's tensors on the device: inputs uploaded, the output a guarded sub-buffer
    (see :func:`_guarded`)."""

    def __init__(self, dev, problem: ConvProblem, data: dict, out_fill=None) -> None:
        import pyopencl as cl

        from wticonv.problem.tensors import ConvTensors

        self.dev, self.problem, self.out = dev, problem, OUTPUT_TENSOR[problem.direction]
        self.shapes = {k: v.shape for k, v in data.items()}
        self.out_bytes = 4 * int(np.prod(self.shapes[self.out]))
        self.inputs = [k for k in data if k != self.out]
        self.bufs = {k: dev.upload(np.ascontiguousarray(data[k], np.float32))
                     for k in self.inputs}
        self.whole, self.bufs[self.out], self.guard = guarded(dev, self.out_bytes)
        if out_fill is not None:
            cl.enqueue_copy(dev.queue, self.bufs[self.out],
                            np.full(self.shapes[self.out], out_fill, np.float32))
        self.tensors = ConvTensors(self.bufs["x"], self.bufs["w"], self.bufs["y"])

    def download(self, name: str) -> np.ndarray:
        return self.dev.download(self.bufs[name], self.shapes[name])

    def output(self) -> np.ndarray:
        return self.download(self.out)

    def check_output_guards(self) -> None:
        if not guards_intact(self.dev, self.whole, self.out_bytes, self.guard):
            raise CheckFailure(f"{self.problem.key}: the run wrote outside its output tensor "
                               f"{self.out} ({self.out_bytes} bytes)")

    def release(self) -> None:
        for b in (*self.bufs.values(), self.whole):
            b.release()


@contextlib.contextmanager
def device_tensors(dev, problem: ConvProblem, data: dict, out_fill=None):
    t = _DeviceTensors(dev, problem, data, out_fill)
    try:
        yield t
    finally:
        t.release()


