"""Find-db keys and MIOpenDriver arguments: formats, round trips, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wticonv import ConvProblem, DriverArgsError, KeyFormatError
from wticonv.workloads.driver import parse_driver_args, parse_driver_line, to_driver_args


def test_key_matches_miopen_example():
    p = ConvProblem(n=16, c=64, h=56, w=56, k=64, r=3, s=3, pad_h=1, pad_w=1)
    assert p.key == "64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F"


def test_backward_keys_swap_in_and_out_like_miopen():
    p = ConvProblem(n=2, c=3, h=224, w=224, k=64, r=7, s=7, pad_h=3, pad_w=3, stride_h=2,
                    stride_w=2)
    assert p.key == "3-224-224-7x7-64-112-112-2-3x3-2x2-1x1-0-NCHW-FP32-F"
    assert p.with_direction("bwd").key == "64-112-112-7x7-3-224-224-2-3x3-2x2-1x1-0-NCHW-FP32-B"
    assert p.with_direction("wrw").key == "64-112-112-7x7-3-224-224-2-3x3-2x2-1x1-0-NCHW-FP32-W"


def test_groups_suffix():
    p = ConvProblem(n=8, c=32, h=112, w=112, k=32, r=3, s=3, pad_h=1, pad_w=1, groups=32)
    assert p.key.endswith("-NCHW-FP32-F_g32")
    assert ConvProblem.from_key(p.key) == p


problems = st.builds(
    lambda n, c_g, k_g, g, h, w, r, s, ph, pw, u, v, dh, dw, d: (
        dict(n=n, c=c_g * g, k=k_g * g, groups=g, h=h + dh * (r - 1), w=w + dw * (s - 1), r=r,
             s=s, pad_h=ph, pad_w=pw, stride_h=u, stride_w=v, dilation_h=dh, dilation_w=dw,
             direction=d)),
    st.integers(1, 64), st.integers(1, 16), st.integers(1, 16), st.integers(1, 4),
    st.integers(1, 300), st.integers(1, 300), st.integers(1, 11), st.integers(1, 11),
    st.integers(0, 5), st.integers(0, 5), st.integers(1, 4), st.integers(1, 4),
    st.integers(1, 3), st.integers(1, 3), st.sampled_from(["fwd", "bwd", "wrw"]))


@settings(max_examples=300, deadline=None)
@given(problems)
def test_key_round_trip(kw):
    p = ConvProblem(**kw)
    assert ConvProblem.from_key(p.key) == p


@settings(max_examples=300, deadline=None)
@given(problems)
def test_driver_args_round_trip(kw):
    p = ConvProblem(**kw)
    cmd = parse_driver_args(to_driver_args(p).split())
    assert cmd.problems == [p]


@pytest.mark.parametrize("key, fragment", [
    ("garbage", "expected MIOpen's format"),
    ("64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP16-F", "dtype='fp16' is not supported"),
    ("64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NHWC-FP32-F", "layout='NHWC' is not supported"),
    ("64-56-56-3x3-64-55-56-16-1x1-1x1-1x1-0-NCHW-FP32-F", "output size is 55x56"),
    ("64-56-56-3x3-64-56-56-0-1x1-1x1-1x1-0-NCHW-FP32-F", "n=0 must be a positive"),
    ("64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F_g3", "groups=3 must divide c=64"),
])
def test_bad_keys(key, fragment):
    with pytest.raises(KeyFormatError) as e:
        ConvProblem.from_key(key)
    assert fragment in str(e.value)


def test_short_and_long_driver_flags_agree():
    short = parse_driver_args("-n 16 -c 64 -H 56 -W 56 -k 128 -y 3 -x 1 -p 1 -q 0 -u 2 -v 1 "
                              "-l 1 -j 2 -g 2 -F 2 -V 0 -i 5 -t 1 -S direct.naive".split())
    long = parse_driver_args(
        "--batchsize 16 --in_channels 64 --in_h 56 --in_w 56 --out_channels 128 --fil_h 3 "
        "--fil_w 1 --pad_h 1 --pad_w 0 --conv_stride_h 2 --conv_stride_w 1 --dilation_h 1 "
        "--dilation_w 2 --group_count 2 --forw 2 --verify 0 --iter 5 --time 1 "
        "--solution direct.naive".split())
    assert short == long
    assert short.problem == ConvProblem(n=16, c=64, h=56, w=56, k=128, r=3, s=1, pad_h=1,
                                        pad_w=0, stride_h=2, stride_w=1, dilation_h=1,
                                        dilation_w=2, groups=2)
    assert short.directions == ("bwd",)
    assert (short.verify, short.iterations, short.time, short.solver) == (
        False, 5, True, "direct.naive")


@pytest.mark.parametrize("forw, dirs", [(0, ("fwd", "bwd", "wrw")), (1, ("fwd",)),
                                        (2, ("bwd",)), (4, ("wrw",)), (3, ("fwd", "bwd")),
                                        (5, ("fwd", "wrw")), (6, ("bwd", "wrw"))])
def test_forw_flag(forw, dirs):
    cmd = parse_driver_args(["-F", str(forw)])
    assert cmd.directions == dirs
    assert [p.direction for p in cmd.problems] == list(dirs)


def test_miopen_driver_defaults():
    cmd = parse_driver_args([])
    assert cmd.problem == ConvProblem(n=100, c=3, h=32, w=32, k=32, r=3, s=3)
    assert cmd.iterations == 10 and cmd.verify


def test_same_pad_mode_follows_miopen():
    # MIOpen: total = max(filt - stride, 0) when size % stride == 0, then halved
    cmd = parse_driver_args("-H 224 -W 223 -y 7 -x 7 -u 2 -v 2 -z same".split())
    assert (cmd.problem.pad_h, cmd.problem.pad_w) == (2, 3)


def test_driver_line_forms():
    cmd = parse_driver_line("./bin/MIOpenDriver conv -n 4 -c 8 -H 9 -W 9 -k 2 -y 1 -x 1  # c")
    assert cmd.problem.n == 4 and cmd.problem.r == 1
    assert parse_driver_line("conv -n 2").problem.n == 2


@pytest.mark.parametrize("argv, fragment", [
    (["--bogus", "1"], "unknown argument(s) --bogus 1"),
    (["-n", "abc"], "'abc' is not an integer"),
    (["-m", "trans"], "-m trans is not supported"),
    (["-F", "7"], "-F 7 is not a direction set"),
    (["-g", "5"], "groups=5 must divide c=3"),
    (["-i", "0"], "-i 0 must be at least 1"),
    (["-s", "1"], "-s 1 (search) is not supported"),
    (["-z", "weird"], "-z weird is unknown"),
])
def test_bad_driver_args(argv, fragment):
    with pytest.raises(DriverArgsError) as e:
        parse_driver_args(argv)
    assert fragment in str(e.value)


def test_bad_driver_lines():
    with pytest.raises(DriverArgsError, match="fp16"):
        parse_driver_line("MIOpenDriver convfp16 -n 1")
    with pytest.raises(DriverArgsError, match="expected the command 'conv'"):
        parse_driver_line("pool -n 1")
