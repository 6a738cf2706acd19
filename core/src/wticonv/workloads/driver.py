"""MIOpenDriver ``conv`` command lines, parsed into problems and run options.

wticonv speaks MIOpenDriver's language so that existing network lists (MIOpen's
``test/perf_models/*`` files, DeepBench-derived lists) work unchanged. Flags and defaults
follow MIOpenDriver's ``conv`` driver (``driver/conv_driver.hpp``, ``AddCmdLineArgs``):

=======  ===================  =======  ============================================
short    long                 default  meaning
=======  ===================  =======  ============================================
-n       --batchsize          100      N
-c       --in_channels        3        C
-H       --in_h               32       H
-W       --in_w               32       W
-k       --out_channels       32       K
-y       --fil_h              3        R (filter height)
-x       --fil_w              3        S (filter width)
-p       --pad_h              0        zero padding, height
-q       --pad_w              0        zero padding, width
-u       --conv_stride_h      1        stride, height
-v       --conv_stride_w      1        stride, width
-l       --dilation_h         1        dilation, height
-j       --dilation_w         1        dilation, width
-g       --group_count        1        groups
-F       --forw               0        0 all, 1 fwd, 2 bwd, 4 wrw, 3 fwd+bwd, 5 fwd+wrw, 6 bwd+wrw
-V       --verify             1        verify against the float64 reference
-i       --iter               10       timed iterations
-t       --time               0        report kernel time (OpenCL profiling events)
-S       --solution           (none)   force a solver id (wticonv's ids, e.g. direct.naive)
-b       --bias               0        add a bias (forward only)
-z       --pad_mode           default  default, same or valid
-m       --mode               conv     only ``conv`` (transposed convolution is not supported)
-w       --wall               0        accepted for compatibility; ignored
-P       --printconv          1        accepted for compatibility; ignored
-s       --search             0        must be 0 (use find mode instead)
=======  ===================  =======  ============================================
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from wticonv.errors import DriverArgsError, ProblemError
from wticonv.problem.conv import ConvProblem

__all__ = ["DriverCommand", "parse_driver_args", "parse_driver_line", "to_driver_args"]

_FORW = {0: ("fwd", "bwd", "wrw"), 1: ("fwd",), 2: ("bwd",), 4: ("wrw",),
         3: ("fwd", "bwd"), 5: ("fwd", "wrw"), 6: ("bwd", "wrw")}
_COMMANDS = {"conv": "fp32", "convfp16": "fp16", "convbfp16": "bf16", "convint8": "int8"}


@dataclass(frozen=True)
class DriverCommand:
    """A parsed ``conv`` command line.

    Attributes
    ----------
    problem : ConvProblem
        The forward problem; :attr:`problems` gives one per requested direction.
    directions : tuple[str, ...]
        The directions selected by ``-F``.
    verify, iterations, time, bias : as the flags above.
    solver : str or None
        Solver id forced with ``-S``.
    directions_given : bool
        ``-F`` appeared on the command line (otherwise all directions, MIOpenDriver's
        default).
    perf_config : str or None
        Perf config of the forced solver, ``--perf-config`` (a wticonv flag, not
        MIOpenDriver's; needs ``-S``).
    """

    problem: ConvProblem
    directions: tuple[str, ...]
    verify: bool = True
    iterations: int = 10
    time: bool = False
    solver: str | None = None
    bias: bool = False
    directions_given: bool = False
    perf_config: str | None = None

    @property
    def problems(self) -> list[ConvProblem]:
        """One problem per direction in :attr:`directions`."""
        return [self.problem.with_direction(d) for d in self.directions]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse calls this instead of raising
        raise DriverArgsError(f"bad conv arguments: {message}")


def _positive_int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _build_parser() -> _Parser:
    p = _Parser(prog="conv", add_help=False, allow_abbrev=False, exit_on_error=False)
    add = p.add_argument
    for short, long, default in (
            ("-n", "--batchsize", 100), ("-c", "--in_channels", 3), ("-H", "--in_h", 32),
            ("-W", "--in_w", 32), ("-k", "--out_channels", 32), ("-y", "--fil_h", 3),
            ("-x", "--fil_w", 3), ("-p", "--pad_h", 0), ("-q", "--pad_w", 0),
            ("-u", "--conv_stride_h", 1), ("-v", "--conv_stride_w", 1),
            ("-l", "--dilation_h", 1), ("-j", "--dilation_w", 1), ("-g", "--group_count", 1),
            ("-F", "--forw", None), ("-V", "--verify", 1), ("-i", "--iter", 10),
            ("-t", "--time", 0), ("-b", "--bias", 0), ("-w", "--wall", 0),
            ("-P", "--printconv", 1), ("-s", "--search", 0), ("-r", "--pad_val", 0),
            ("-Y", "--trans_output_pad_h", 0), ("-X", "--trans_output_pad_w", 0),
            ("-Z", "--tensor_vect", 0), ("-_", "--spatial_dim", 2)):
        add(short, long, type=_positive_int, default=default, dest=long[2:])
    add("-S", "--solution", default=None, dest="solution")
    add("--perf-config", default=None, dest="perf_config")
    add("-z", "--pad_mode", default="default", dest="pad_mode")
    add("-m", "--mode", default="conv", dest="mode")
    return p


_PARSER = _build_parser()


def _same_pad(size: int, filt: int, stride: int) -> int:
    # MIOpen's "same" padding (MIOpenDriver SetConvDescriptorFromCmdLineArgs):
    # total = max(filt - stride, 0) if size % stride == 0 else max(filt - size % stride, 0)
    rem = size % stride
    total = max(filt - stride, 0) if rem == 0 else max(filt - rem, 0)
    return total // 2


def _check_flags(ns: argparse.Namespace) -> None:
    """DriverArgsError for a flag value wticonv does not support (naming the flag); sets an
    absent ``-F`` to 0 (all directions)."""
    if ns.perf_config is not None and ns.solution is None:
        raise DriverArgsError(f"bad conv arguments: --perf-config {ns.perf_config:.100} needs "
                              "-S SOLVER: a perf config belongs to one tunable solver "
                              "(`wticonv tune` times each one's)")
    if ns.mode != "conv":
        raise DriverArgsError(
            f"bad conv arguments: -m {ns.mode} is not supported; only -m conv "
            "(transposed convolution is not implemented)")
    if ns.forw is None:
        ns.forw = 0
    if ns.forw not in _FORW:
        raise DriverArgsError(
            f"bad conv arguments: -F {ns.forw} is not a direction set; use 0 (all), 1 (fwd), "
            "2 (bwd), 4 (wrw), 3, 5 or 6")
    if ns.spatial_dim != 2:
        raise DriverArgsError("bad conv arguments: only 2-D convolutions are supported (-_ 2)")
    if ns.search != 0:
        raise DriverArgsError("bad conv arguments: -s 1 (search) is not supported; wticonv "
                              "runs in immediate mode")
    for flag, name in (("-V", "verify"), ("-t", "time"), ("-b", "bias"), ("-w", "wall"),
                       ("-P", "printconv")):
        if getattr(ns, name) not in (0, 1):
            raise DriverArgsError(f"bad conv arguments: {flag} {getattr(ns, name)} must be 0 "
                                  "or 1")
    for flag, name in (("-r", "pad_val"), ("-Y", "trans_output_pad_h"),
                       ("-X", "trans_output_pad_w"), ("-Z", "tensor_vect")):
        if getattr(ns, name) != 0:
            raise DriverArgsError(f"bad conv arguments: {flag} must be 0 (not supported)")


def parse_driver_args(argv: Sequence[str]) -> DriverCommand:
    """Parse MIOpenDriver ``conv`` flags (without the program and ``conv`` words).

    Raises
    ------
    DriverArgsError
        On an unknown flag, a value that is not an integer, an unsupported mode, or a
        problem that is invalid (the message names the flag).
    """
    try:
        ns, extra = _PARSER.parse_known_args(list(argv))
    except argparse.ArgumentError as e:
        raise DriverArgsError(f"bad conv arguments: {e}") from None
    if extra:
        raise DriverArgsError(
            f"bad conv arguments: unknown argument(s) {' '.join(extra)}; the conv flags are "
            "-n -c -H -W -k -y -x -p -q -u -v -l -j -g -F -V -i -t -S -b -z -m, "
            "--perf-config "
            "(see 'wticonv conv --help')")
    forw_given = ns.forw is not None
    _check_flags(ns)
    pad_h, pad_w = ns.pad_h, ns.pad_w
    if ns.pad_mode == "same":
        pad_h = _same_pad(ns.in_h, ns.fil_h, max(ns.conv_stride_h, 1))
        pad_w = _same_pad(ns.in_w, ns.fil_w, max(ns.conv_stride_w, 1))
    elif ns.pad_mode == "valid":
        pad_h = pad_w = 0
    elif ns.pad_mode != "default":
        raise DriverArgsError(
            f"bad conv arguments: -z {ns.pad_mode} is unknown; use default, same or valid")
    try:
        problem = ConvProblem(
            n=ns.batchsize, c=ns.in_channels, h=ns.in_h, w=ns.in_w, k=ns.out_channels,
            r=ns.fil_h, s=ns.fil_w, pad_h=pad_h, pad_w=pad_w, stride_h=ns.conv_stride_h,
            stride_w=ns.conv_stride_w, dilation_h=ns.dilation_h, dilation_w=ns.dilation_w,
            groups=ns.group_count)
    except ProblemError as e:
        raise DriverArgsError(f"bad conv arguments: {e}") from None
    if ns.iter < 1:
        raise DriverArgsError(f"bad conv arguments: -i {ns.iter} must be at least 1")
    return DriverCommand(problem=problem, directions=_FORW[ns.forw], verify=bool(ns.verify),
                         iterations=ns.iter, time=bool(ns.time), solver=ns.solution,
                         bias=bool(ns.bias), directions_given=forw_given,
                         perf_config=ns.perf_config)


def parse_driver_line(line: str) -> DriverCommand:
    """Parse one line such as ``./bin/MIOpenDriver conv -n 16 -c 64 ...``.

    Words up to and including one that ends in ``MIOpenDriver`` are skipped; the next word
    must be ``conv`` (fp32). Raises :class:`DriverArgsError` otherwise.
    """
    words = shlex.split(line, comments=True)
    for i, word in enumerate(words):
        if word.endswith("MIOpenDriver"):
            words = words[i + 1:]
            break
    if not words:
        raise DriverArgsError("bad conv line: it is empty")
    command = words[0]
    if command not in _COMMANDS:
        raise DriverArgsError(
            f"bad conv line: expected the command 'conv', found {command!r}")
    if _COMMANDS[command] != "fp32":
        raise DriverArgsError(
            f"bad conv line: {command!r} asks for {_COMMANDS[command]}; wticonv computes in "
            "fp32 only (use 'conv')")
    return parse_driver_args(words[1:])


def to_driver_args(p: ConvProblem) -> str:
    """The MIOpenDriver flags for problem ``p`` (``-F`` from its direction)."""
    forw = {"fwd": 1, "bwd": 2, "wrw": 4}[p.direction]
    return (f"-n {p.n} -c {p.c} -H {p.h} -W {p.w} -k {p.k} -y {p.r} -x {p.s} "
            f"-p {p.pad_h} -q {p.pad_w} -u {p.stride_h} -v {p.stride_w} "
            f"-l {p.dilation_h} -j {p.dilation_w} -g {p.groups} -F {forw}")
