"""Timed runs of forced solvers, the primitive of find, tune, calibrate and evaluate.

Times come from OpenCL profiling events (kernel time, ms). :func:`timed_together`
interleaves the solvers' runs, one of each per round, so that a machine whose speed
drifts slows every solver alike, and a solver's time is the fastest of its timed runs
(:data:`STATISTIC`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from wticonv.errors import ArgumentError, WticonvError
from wticonv.measuring.inputs import check_host, timing_inputs
from wticonv.problem.conv import ConvProblem
from wticonv.problem.tensors import OUTPUT_TENSOR, ConvTensors

__all__ = ["check_limits", "problem_tensors", "timed", "timed_together", "STATISTIC",
           "SHORT_RUN_MS", "SHORT_RUNS"]

#: How a solver's timed runs become its time: the fastest. A constant: :func:`timed` and
#: :func:`timed_together` take it as their ``statistic`` default when they are defined
#: (pass ``statistic=`` for another). Interference from the rest of
#: the machine (other processes, other tenants of a shared host, clock changes) only ever
#: adds time, so the minimum is the most reproducible estimate of what the kernel takes
#: (J. Chen and J. Revels, "Robust benchmarking in noisy environments", arXiv:1608.04295,
#: 2016). Measured on a 2-core AMD EPYC (Zen 4) guest, PoCL 3.1, N=4, 3 runs per solver,
#: two evaluations each of regnet_y_3_2gf, efficientnet_b2 and resnet34 (300 cases): with
#: the median, one evaluation's fastest solvers were within 10 % of the other's best in
#: 89.7 % of the cases (time-weighted geometric mean 1.024-1.027); with the minimum, in
#: 93.0-94.7 % (1.009-1.011); docs/find-and-tune.md, "Measured (2026-12-04): a third CPU"
#: (raw files benchmarks/results/evaluate-3nets-n4-cpu-zen4-*.csv).
STATISTIC = min

#: Kernels faster than this (ms) are timed :data:`SHORT_RUNS` times the runs asked for: a
#: 5 us kernel's fastest of 3 runs can be a slow one (an interrupt, a thread woken late:
#: one such run costs more than the kernel), and more runs cost little. On a 2-core Zen 4
#: (PoCL 3.1) `evaluate` timed `direct.tiled` at 13.3 us on a 1x1 layer of 1x1 pictures
#: that three later `find` runs timed at 4.7-5.7 us, and scored its choice 2.28x off
#: (docs/find-and-tune.md, "the Zen 4 of the issue").
SHORT_RUN_MS = 0.05
SHORT_RUNS = 4


@contextmanager
def problem_tensors(handle, problem: ConvProblem) -> Iterator[ConvTensors]:
    """Device buffers for ``problem``'s three tensors, the inputs random (uniform [-1, 1),
    :func:`wticonv.measuring.inputs.timing_inputs`),
    allocated and uploaded once for every solver timed on it, released afterwards.

    Raises
    ------
    DeviceMemoryError, HostMemoryError
        If a tensor does not fit the device's largest buffer or the host's memory.
    """
    dev = handle.device
    shapes = {"x": problem.x_shape, "w": problem.w_shape, "y": problem.y_shape}
    for name, shape in shapes.items():
        dev.check_alloc(4 * math.prod(shape), f"tensor {name} {shape}")
    check_host(sum(4 * math.prod(s) for s in shapes.values()), f"the arrays of {problem.key}")
    data = timing_inputs(problem)
    bufs = {}
    try:
        for name, shape in shapes.items():
            bufs[name] = (dev.upload(data.pop(name)) if name != OUTPUT_TENSOR[problem.direction]
                          else dev.alloc(4 * math.prod(shape)))
        yield ConvTensors(bufs["x"], bufs["w"], bufs["y"])
    finally:
        for b in bufs.values():
            b.release()


def check_limits(iterations: int, time_cap_ms: float, workspace_limit) -> None:
    """ArgumentError unless iterations >= 1, time_cap_ms > 0 and workspace_limit is None or
    a non-negative int (find and tune check before measuring anything)."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ArgumentError(f"iterations={iterations!r} must be an integer >= 1")
    if not time_cap_ms > 0:
        raise ArgumentError(f"time_cap_ms={time_cap_ms!r} must be > 0 (milliseconds)")
    if workspace_limit is not None and (isinstance(workspace_limit, bool) or not isinstance(
            workspace_limit, int) or workspace_limit < 0):
        raise ArgumentError(f"workspace_limit={workspace_limit!r} must be a non-negative "
                            "integer number of bytes, or None for no limit")


def timed(handle, problem: ConvProblem, iterations: int, time_cap_ms: float,
          workspace_limit: int | None, solver: str, perf_config: str | None = None,
          tensors: ConvTensors | None = None, statistic=STATISTIC
          ) -> tuple[float, int, bool, int, str | None]:
    """Time one solver (forced) on ``problem``: one untimed run (kernel builds, warm-up),
    then timed runs until ``iterations`` of them or ``time_cap_ms`` of kernel time (at
    least one). ``tensors`` (from :func:`problem_tensors`) are allocated when not given.

    Returns (``statistic`` of the timed runs in ms, the fastest by default; timed runs;
    cut short by the cap; workspace bytes; perf config used). Raises as
    :meth:`Handle.select` and :meth:`Handle.run`.
    """
    out = timed_together(handle, problem, iterations, time_cap_ms, workspace_limit,
                         {solver: perf_config}, tensors, statistic)[solver]
    if isinstance(out, WticonvError):
        raise out
    return out


def timed_together(handle, problem: ConvProblem, iterations: int, time_cap_ms: float,
                   workspace_limit: int | None, solvers: dict[str, str | None],
                   tensors: ConvTensors | None = None, statistic=STATISTIC
                   ) -> dict[str, tuple[float, int, bool, int, str | None] | WticonvError]:
    """Time several solvers (each forced, with its perf config from ``solvers``, a
    ``{solver id: perf config or None}`` dict) on ``problem`` as :func:`timed` does, their
    timed runs interleaved: one run of each solver per round, for up to ``iterations``
    rounds, a solver leaving once it has used ``time_cap_ms``. A machine whose speed
    drifts (a shared CPU, a GPU changing clocks) then slows every solver's runs alike,
    instead of one solver's runs all at once. A solver whose runs all took under
    :data:`SHORT_RUN_MS` stays for :data:`SHORT_RUNS` times as many rounds.

    Returns ``{solver id: the tuple timed returns, or the WticonvError it raised}``.
    """
    if tensors is None:
        with problem_tensors(handle, problem) as t:
            return timed_together(handle, problem, iterations, time_cap_ms, workspace_limit,
                                  solvers, t, statistic)
    out: dict = {}
    runs: dict[str, tuple] = {}
    for sid, config in solvers.items():     # warm-up: kernel builds, first-use set-up
        try:
            sel = handle.select(problem, workspace_limit, sid, config)
            first = handle.run(problem, tensors, selection=sel)
            runs[sid] = (first.selection_used(), first, [])
        except WticonvError as e:
            out[sid] = e
    active = list(runs)
    while active:
        for sid in list(active):
            sel, first, times = runs[sid]
            try:
                times.append(handle.run(problem, tensors, selection=sel).kernel_ms)
            except WticonvError as e:
                out[sid] = e
                active.remove(sid)
                continue
            enough = iterations * (SHORT_RUNS if max(times) < SHORT_RUN_MS else 1)
            if len(times) >= enough or sum(times) >= time_cap_ms:
                active.remove(sid)
    for sid, (_sel, first, times) in runs.items():
        if sid not in out:
            out[sid] = (statistic(times), len(times), len(times) < iterations,
                        first.workspace, first.verdict.perf_config
                        if first.verdict is not None else solvers[sid])
    return {sid: out[sid] for sid in solvers}
