"""wticonv-gemm's SGEMM: one GEMM of a convolution, its launch and its cost.

**The public interface of wticonv-gemm.** Its other modules are private to it and may
change in any release; this one is what another plugin may import (wticonv-winograd runs
its batched multiply with it), and it changes only with a new major version:

- planning: :class:`GemmOp` (one strided, batched, grouped ``C = A * B (+ C)``) with its
  :class:`Operand` and :class:`ColMap` addressing; :func:`gemm_launch` (the
  :class:`wticonv.runtime.kit.Launch` of an op on a CPU or a GPU, with its modelled
  efficiency; ``math="3xtf32"`` or ``"tf32"`` puts it on the tensor cores of NVIDIA GPUs
  that have them, and ``tc`` picks one of :class:`TcConfig`'s tiles); :func:`gemm_configs`
  (the tuning names of an op: the blocks, GPU tiles or tensor-core tiles a ``config``
  argument of :func:`gemm_launch` selects, for a solver's ``perf_configs``); the GPU split-K
  helpers :func:`gpu_splits`, :func:`most_gpu_splits` and :func:`splitk_reduce_launch`;
- the cost model: :func:`predict_seconds` and :func:`wti` (predicted time and WTI of a
  list of launches, from their cost fields and the device's measured figures; see
  docs/wti-models.md);
- :data:`KERNELS`, the library of this plugin's kernel files that the launches name.
  Run the launches, with launches of your own, through :func:`wticonv.runtime.kit.enqueue`.

A :class:`GemmOp` is what the kernels in ``kernels/sgemm_*.cl`` compute::

    C[g](m, n) = sum_b sum_k A[g](b, m, k) * B[g](b, k, n)   (+ C[g](m, n) when beta)

with every operand addressed by element strides (64-bit), a two-level batch reduction
``b -> (b // nb2, b % nb2)`` and image-mapped columns (:class:`ColMap`), so that the
convolution GEMMs read and write NCHW tensors where they are. Operands name a buffer
(``"x"``, ``"w"``, ``"y"`` or ``"ws"``), bound to real ``pyopencl.Buffer`` objects only
when the op is enqueued; a plan can therefore be built and checked for any size without
allocating anything. Launches are :class:`wticonv.runtime.kit.Launch` descriptions of
:data:`KERNELS`' files, enqueued with :func:`wticonv.runtime.kit.enqueue`.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
from wticonv.runtime.kit import KernelLibrary, Launch

from . import params, tensorcore
from .tensorcore import TcConfig
from .wti import predict_seconds, wti

__all__ = ["KERNELS", "ColMap", "Operand", "GemmOp", "TcConfig", "gemm_launch", "gemm_configs",
           "splitk_reduce_launch", "gpu_splits", "most_gpu_splits", "predict_seconds", "wti"]

#: The plugin's kernel files (kernels/*.cl) and their kernels built per device.
KERNELS = KernelLibrary("wticonv_gemm")

_BIG = 2**31 - 1


# ColMap, Operand and GemmOp fill their fields at once (``__dict__.update``) rather than
# through the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field, the
# larger part of planning a GEMM): ranking a new problem plans several.


@dataclass(frozen=True, init=False)
class ColMap:
    """Offset of column n: ``(n // P)*ns + ((n % P) // Wo)*hs + ((n % P) % Wo)*ws``."""

    P: int
    Wo: int
    ns: int
    hs: int
    ws: int

    def __init__(self, P: int = _BIG, Wo: int = _BIG, ns: int = 0, hs: int = 0,
                 ws: int = 1) -> None:
        self.__dict__.update(P=P, Wo=Wo, ns=ns, hs=hs, ws=ws)

    @staticmethod
    def strided(ld: int) -> ColMap:
        """Columns ``ld`` elements apart (column n at ``n * ld``)."""
        return ColMap(ws=ld)

    def offset(self, n: int) -> int:
        """The offset of column ``n`` (Python ints: exact at any size)."""
        q, p = divmod(n, self.P)
        ho, wo = divmod(p, self.Wo)
        return q * self.ns + ho * self.hs + wo * self.ws

    def args(self) -> list:
        return [np.int32(self.P), np.int32(self.Wo), np.int64(self.ns), np.int64(self.hs),
                np.int64(self.ws)]


_DENSE = ColMap()


@dataclass(frozen=True, init=False)
class Operand:
    """Where an operand lives: buffer name and strides in elements.

    ``off`` start, ``gs`` per group, ``bs``/``bs2`` per batch-reduction level, ``ms`` per
    row (A and C), ``ks`` per k (A and B), ``cols`` the column map (B and C).
    """

    buffer: str
    off: int
    gs: int
    bs: int
    bs2: int
    ms: int
    ks: int
    cols: ColMap

    def __init__(self, buffer: str, off: int = 0, gs: int = 0, bs: int = 0, bs2: int = 0,
                 ms: int = 0, ks: int = 0, cols: ColMap = _DENSE) -> None:
        self.__dict__.update(buffer=buffer, off=off, gs=gs, bs=bs, bs2=bs2, ms=ms, ks=ks,
                             cols=cols)


@dataclass(frozen=True, init=False)
class GemmOp:
    """``C = A * B (+ C)`` for ``groups`` groups; sizes are Python ints."""

    M: int
    N: int
    K: int
    a: Operand
    b: Operand
    c: Operand
    groups: int
    nb: int
    nb2: int
    beta: int
    #: GPU split-K over the batch reduction: ``splits`` layers of work-groups, each summing
    #: ``ceil(nb / splits)`` batch terms into C + s * ``c_ss`` (partial sums).
    splits: int
    c_ss: int

    def __init__(self, M: int, N: int, K: int, a: Operand, b: Operand, c: Operand,
                 groups: int = 1, nb: int = 1, nb2: int = 1, beta: int = 0, splits: int = 1,
                 c_ss: int = 0) -> None:
        self.__dict__.update(M=M, N=N, K=K, a=a, b=b, c=c, groups=groups, nb=nb, nb2=nb2,
                             beta=beta, splits=splits, c_ss=c_ss)

    @property
    def flops(self) -> int:
        """Multiply-adds x 2 of the op."""
        return 2 * self.M * self.N * self.K * self.nb * self.groups

    def max_offsets(self) -> dict[str, int]:
        """Largest element offset each operand reaches (for bounds checks and tests)."""
        b1, b2 = (self.nb - 1) // self.nb2, min(self.nb, self.nb2) - 1
        a, b, c = self.a, self.b, self.c
        g = self.groups - 1
        last_col = max(c.cols.offset(self.N - 1), 0)
        return {
            "a": a.off + g * a.gs + b1 * a.bs + b2 * a.bs2 + (self.M - 1) * a.ms
            + (self.K - 1) * a.ks,
            "b": b.off + g * b.gs + b1 * b.bs + b2 * b.bs2 + (self.K - 1) * b.ks
            + b.cols.offset(self.N - 1),
            "c": c.off + g * c.gs + (self.M - 1) * c.ms + last_col,
        }


def _check_int32(op: GemmOp) -> None:
    if max(op.M, op.N, op.K, op.nb, op.nb2, op.groups) <= _BIG:
        return
    for name in ("M", "N", "K", "nb", "nb2", "groups"):
        if getattr(op, name) > _BIG:
            raise ValueError(f"GEMM {name}={getattr(op, name)} exceeds a 32-bit kernel argument")


def _traffic(op: GemmOp) -> int:
    """Bytes a GEMM moves at least: A and B read once, C written (and read when beta)."""
    per_group = op.M * op.K * op.nb + op.K * op.nb * op.N + op.M * op.N * (1 + op.beta)
    return 4 * op.groups * per_group


#: Float4 loads of B across whole pictures only from this many pixels per picture: on
#: smaller pictures (8x8 to 14x14) a tile's columns span several pictures and the float4
#: variant ran 1.1-2x slower than the scalar one on the H200 (gemm.1x1 forward at N=32,
#: C = 256-2048: 8x8 0.39 ms against 9x9 0.34 ms; 16x16 and up no slower).
VEC_MIN_PICTURE = 256


def _vec_aligned(op: GemmOp, min_picture: int = VEC_MIN_PICTURE) -> bool:
    """The GPU kernels' float4 loads apply: A contiguous along k; B's columns contiguous in
    runs of 4 (a dense matrix, or whole pictures of P pixels, P a multiple of 4 and at
    least ``min_picture``, as x in a stride-1 1x1 convolution); every stride and offset a
    multiple of 4 elements (16 bytes).
    """
    a, b = op.a, op.b
    cols = b.cols
    dense = cols.ws == 1 and cols.ns == 0 and cols.hs == 0 and cols.P >= op.N
    pictures = (cols.ws == 1 and cols.hs == cols.Wo and cols.P % 4 == 0
                and cols.P >= min_picture)
    strides = (a.ms, a.off, a.gs, a.bs, a.bs2, b.ks, b.off, b.gs, b.bs, b.bs2, cols.ns)
    return (a.ks == 1 and b.ks != 1 and (dense or pictures)
            and all(v % 4 == 0 for v in strides))


def _cpu_nt_args(op: GemmOp, rb: int, cb: int) -> tuple:
    a, b, c, i64 = op.a, op.b, op.c, np.int64
    return (*_sizes(op), a.buffer, i64(a.off), i64(a.gs), i64(a.bs), i64(a.bs2), i64(a.ms),
            b.buffer, i64(b.off), i64(b.gs), i64(b.bs), i64(b.bs2), *b.cols.args(),
            c.buffer, i64(c.off), i64(c.gs), i64(c.ms), *c.cols.args(), np.int32(op.beta),
            np.int32(rb), np.int32(cb))


def _cpu_nn_args(op: GemmOp, b_len: int | None, rb: int, cb: int) -> tuple:
    a, b, c, i64 = op.a, op.b, op.c, np.int64
    if b_len is None:
        b_len = op.max_offsets()["b"] + 1
    return (*_sizes(op), a.buffer, i64(a.off), i64(a.gs), i64(a.bs), i64(a.bs2), i64(a.ms),
            i64(a.ks), b.buffer, i64(b.off), i64(b.gs), i64(b.bs), i64(b.bs2), i64(b.ks),
            *b.cols.args(), i64(b_len), c.buffer, i64(c.off), i64(c.gs), i64(c.ms),
            *c.cols.args(), np.int32(op.beta), np.int32(rb), np.int32(cb))


def _gpu_args(op: GemmOp, nbs: int) -> tuple:
    a, b, c, i64 = op.a, op.b, op.c, np.int64
    return (*_sizes(op), a.buffer, i64(a.off), i64(a.gs), i64(a.bs), i64(a.bs2), i64(a.ms),
            i64(a.ks), b.buffer, i64(b.off), i64(b.gs), i64(b.bs), i64(b.bs2), i64(b.ks),
            *b.cols.args(), c.buffer, i64(c.off), i64(c.gs), i64(c.ms), *c.cols.args(),
            np.int32(op.beta), np.int32(op.groups), np.int32(nbs), i64(op.c_ss))


def _sizes(op: GemmOp) -> tuple:
    return (np.int32(op.M), np.int32(op.N), np.int32(op.K), np.int32(op.nb), np.int32(op.nb2))


#: Block limits (row blocks, column blocks) whose blockings :func:`gemm_configs` offers
#: for the CPU kernels, besides the default ones (params.CPU_NN_MAX_BLOCKS and
#: params.CPU_NT_MAX_BLOCKS): fewer rows and more columns per work-item, or the reverse,
#: trade re-reads of A against copies of B's panels (sgemm_nn) or of B's rows (sgemm_nt).
#: sgemm_nt's blocks hold at most RB x CB = 32 tiles (its GEMM_NT_MAXB).
CPU_NN_TUNE_BLOCKS = ((16, 16), (16, 8), (8, 16), (8, 8), (16, 4), (4, 16))
CPU_NT_TUNE_BLOCKS = ((4, 8), (8, 4), (4, 4), (2, 16), (16, 2))


def _cpu_kernel(op: GemmOp, vector_width: int) -> tuple[str, params.CpuConfig]:
    """The CPU kernel of ``op`` (``"sgemm_nt"`` where A and B are both contiguous along k,
    else ``"sgemm_nn"``) and its configuration."""
    nn_cfg, nt_cfg = params.cpu_configs(vector_width)
    if op.a.ks == 1 and op.b.ks == 1:
        return "sgemm_nt", nt_cfg
    return "sgemm_nn", nn_cfg


def _blocks_name(rb: int, cb: int) -> str:
    return f"r{rb}c{cb}"


def _parse_blocks(config: str, kernel: str) -> tuple[int, int]:
    """``(RB, CB)`` of a CPU tuning name ``"r<RB>c<CB>"``; ValueError for another name or
    for blocks the kernel cannot take (sgemm_nt: RB x CB at most its GEMM_NT_MAXB)."""
    body = config[1:] if config.startswith("r") else ""
    rb, sep, cb = body.partition("c")
    digits = sep and (rb + cb).isascii() and rb.isdigit() and cb.isdigit()
    if digits and 1 <= int(rb) <= 64 and 1 <= int(cb) <= 64:
        if kernel == "sgemm_nn" or int(rb) * int(cb) <= params.CPU_NT_MAX_TILES:
            return int(rb), int(cb)
    raise ValueError(f"no GEMM config {config!r} for {kernel} on a CPU: CPU configs are "
                     f"'r<RB>c<CB>', row and column blocks of 1 to 64 per work-item"
                     + ("" if kernel == "sgemm_nn" else
                        f" (RB x CB at most {params.CPU_NT_MAX_TILES})"))


def _gpu_name(cfg: params.GpuConfig) -> str:
    return f"t{cfg.mwg}x{cfg.nwg}x{cfg.kwg}"


def _tc_tiles(math: str, wgmma: bool) -> tuple[TcConfig, ...]:
    return tensorcore.TC_CONFIGS[math] + (tensorcore.WG_CONFIGS[math] if wgmma else ())


def gemm_configs(op: GemmOp, kind: str, compute_units: int, vector_width: int = 16,
                 math: str = "fp32", wgmma: bool = False) -> list[str]:
    """The tuning names of ``op`` on a device of ``kind``: each a ``config`` that
    :func:`gemm_launch` accepts, computing the same C at another speed. Distinct names,
    the heuristics' own choice first (what ``config=None`` runs); one name (nothing to
    tune) or more.

    - CPUs: ``"r<RB>c<CB>"``, the row and column blocks of tiles one work-item takes
      (params.cpu_nn_blocks / cpu_nt_blocks under each of :data:`CPU_NN_TUNE_BLOCKS` or
      :data:`CPU_NT_TUNE_BLOCKS`' limits, distinct blockings only). Run-time arguments:
      one build serves them all.
    - GPUs, ``math="fp32"``: ``"t<MWG>x<NWG>x<KWG>"``, each tile of params.GPU_CONFIGS.
    - GPUs, ``"3xtf32"`` or ``"tf32"``: each tile's :attr:`TcConfig.label` of
      tensorcore.TC_CONFIGS, and with ``wgmma`` (compute capability 9.0:
      :func:`wticonv.runtime.kit.wgmma`) those of tensorcore.WG_CONFIGS too, which the
      heuristic never picks (its model is not fitted to them): tuning may.
    """
    if kind == "cpu":
        kernel, cfg = _cpu_kernel(op, vector_width)
        tiles = (-(-op.M // cfg.mr), -(-op.N // cfg.nr))
        limits = CPU_NT_TUNE_BLOCKS if kernel == "sgemm_nt" else CPU_NN_TUNE_BLOCKS
        blocks = params.cpu_nt_blocks if kernel == "sgemm_nt" else params.cpu_nn_blocks
        names = [_blocks_name(*blocks(op.M, op.N, op.groups, compute_units, cfg))]
        for most in limits:
            name = _blocks_name(*params.blocks_within(*tiles, op.groups, compute_units, most))
            if name not in names:
                names.append(name)
        return names
    if math == "fp32":
        first = params.gpu_config(op.M, op.N, op.K * op.nb, op.groups * op.splits,
                                  compute_units)
        return [_gpu_name(c) for c in (first, *(c for c in params.GPU_CONFIGS
                                                 if c != first))]
    first = tensorcore.tc_config(math, op.M, op.N, op.K * op.nb, op.groups * op.splits,
                                 compute_units, _vec_aligned(op, min_picture=4))
    return [c.label for c in (first, *(c for c in _tc_tiles(math, wgmma) if c != first))]


def gemm_launch(op: GemmOp, kind: str, compute_units: int, b_len: int | None = None,
                vector_width: int = 16, vec: bool | None = None,
                math: str = "fp32", tc: TcConfig | None = None,
                config: str | None = None) -> Launch:
    """The launch of ``op`` on a device of ``kind`` (``"cpu"`` or ``"gpu"``); its arguments
    are built when first read.

    ``math``: ``"fp32"`` (the CUDA-core or CPU kernel), or ``"3xtf32"`` or ``"tf32"``
    for the tensor-core kernel (kernels/nv/sgemm_tc.cl; GPUs for which
    :func:`wticonv.runtime.kit.tensor_cores` holds: the caller checks), with 16-byte loads
    wherever they apply (``vec`` is not read), in tile configuration ``tc`` (default: the
    best predicted of :data:`wticonv_gemm.tensorcore.TC_CONFIGS`). Raises ValueError for
    another class, or a tensor-core class on a CPU.

    ``b_len`` (elements of B's buffer) bounds the CPU kernel's vector loads;
    ``vector_width`` is a CPU's preferred float vector width (see params.cpu_configs).
    ``vec`` (GPUs): True or False asks for the float4-load variant or the scalar one (True
    is honoured only where float4 loads apply to ``op``); None (the default) takes float4
    where it applies and is predicted faster (params.VEC_LATENCY: not on small grids).
    ``config``: a tuning name of :func:`gemm_configs` (blocks on CPUs, the tile on GPUs),
    or None for the heuristics' choice; ValueError names the accepted forms for another.
    """
    _check_int32(op)
    if op.splits > 1 and kind == "cpu":
        raise ValueError("split-K is a GPU plan; CPU kernels reduce in one work-item")
    if math != "fp32":
        if math not in tensorcore.TC_CONFIGS or kind != "gpu":
            raise ValueError(f"no {math!r} GEMM on a {kind}: tensor-core classes "
                             f"({', '.join(tensorcore.TC_CONFIGS)}) run on GPUs only")
        if config is not None:
            if tc is not None:
                raise ValueError("gemm_launch takes a tile as tc or as config, not both")
            tc = next((c for c in _tc_tiles(math, True) if c.label == config), None)
            if tc is None:
                raise ValueError(f"no {math} GEMM tile {config!r}: the tiles are "
                                 + ", ".join(c.label for c in _tc_tiles(math, True)))
        return _tc_launch(op, math, compute_units, tc)
    a, b = op.a, op.b
    if kind == "cpu":
        kernel, cfg = _cpu_kernel(op, vector_width)
        if config is not None:
            rb, cb = _parse_blocks(config, kernel)
        else:
            blocks = params.cpu_nt_blocks if kernel == "sgemm_nt" else params.cpu_nn_blocks
            rb, cb = blocks(op.M, op.N, op.groups, compute_units, cfg)
        grid = (-(-op.M // (cfg.mr * rb)), -(-op.N // (cfg.nr * cb)), op.groups)
        if kernel == "sgemm_nt":
            return KERNELS.launch("sgemm_cpu.cl", "sgemm_nt", cfg.options, grid, (1, 1, 1),
                          lambda: _cpu_nt_args(op, rb, cb),
                          op.flops, params.cpu_nt_efficiency(op.M, op.N, op.K, op.groups,
                                                             compute_units, cfg),
                          _traffic(op), prod(grid) * params.CPU_NT_ITEM_S / compute_units)
        contiguous = b.cols.ws == 1 and (b.cols.P >= cfg.vw or b.cols.P >= op.N)
        return KERNELS.launch("sgemm_cpu.cl", "sgemm_nn", cfg.options, grid, (1, 1, 1),
                      lambda: _cpu_nn_args(op, b_len, rb, cb),
                      op.flops, params.cpu_nn_efficiency(op.M, op.N, op.K * op.nb, op.groups,
                                                         compute_units, contiguous, cfg,
                                                         scattered=op.c.cols.ws > 1),
                      _traffic(op), prod(grid) * params.CPU_NN_ITEM_S / compute_units)
    if config is None:
        cfg = params.gpu_config(op.M, op.N, op.K * op.nb, op.groups * op.splits,
                                compute_units)
    else:
        cfg = next((c for c in params.GPU_CONFIGS if _gpu_name(c) == config), None)
        if cfg is None:
            raise ValueError(f"no fp32 GPU GEMM tile {config!r}: the tiles are "
                             + ", ".join(_gpu_name(c) for c in params.GPU_CONFIGS))
    nbs = -(-op.nb // op.splits)
    grid = (-(-op.N // cfg.nwg) * cfg.ndimc, -(-op.M // cfg.mwg) * cfg.mdimc,
            op.groups * op.splits)
    mapped = b.cols.ns != 0 or b.cols.hs != 0      # pixels of pictures, not a dense matrix

    def eff_of(vec: bool) -> float:
        return params.efficiency(cfg, op.M, op.N, op.K * nbs, op.groups * op.splits,
                                 compute_units, vec, mapped, b_kfast=b.ks == 1)

    # float4 loads where they apply and are predicted faster (not on small grids)
    can = cfg.vec_ok() and _vec_aligned(op)
    eff = eff_of(False)
    if can and vec is not False:
        eff_vec = eff_of(True)
        if vec or eff_vec > eff:
            eff, vec = eff_vec, True
    vec = bool(vec and can)
    options = cfg.options(a_kfast=a.ks == 1, b_kfast=b.ks == 1, vec=vec)
    return KERNELS.launch("sgemm_gpu.cl", "sgemm", options, grid, (cfg.ndimc, cfg.mdimc, 1),
                  lambda: _gpu_args(op, nbs), op.flops, eff, _traffic(op))


def _c_pairs(op: GemmOp) -> bool:
    """C's columns come in contiguous, 8-byte-aligned pairs (2n, 2n + 1): unit column
    stride, pairs that never cross a picture row (a dense matrix; rows of an even number
    of pixels, or whole pictures of an even number, as y in NCHW) and even offsets."""
    c = op.c
    cols = c.cols
    if cols.ws != 1:
        return False
    dense = cols.ns == 0 and cols.hs == 0 and cols.P >= op.N
    rows = cols.Wo % 2 == 0 and cols.P % 2 == 0
    pictures = cols.Wo == cols.P and cols.P % 2 == 0
    return ((dense or rows or pictures)
            and all(v % 2 == 0 for v in (c.off, c.gs, c.ms, cols.ns, cols.hs, op.c_ss)))


def _tc_launch(op: GemmOp, math: str, compute_units: int, cfg: TcConfig | None) -> Launch:
    """The tensor-core kernel's launch of ``op`` (see :func:`gemm_launch`)."""
    a, b = op.a, op.b
    vec = _vec_aligned(op, min_picture=4)
    a_kfast, b_kfast = a.ks == 1, b.ks == 1
    if cfg is None:
        cfg = tensorcore.tc_config(math, op.M, op.N, op.K * op.nb, op.groups * op.splits,
                                   compute_units, vec)
    vec = vec and tensorcore.tc_vec_ok(cfg)
    nbs = -(-op.nb // op.splits)
    eff = tensorcore.tc_efficiency(cfg, op.M, op.N, op.K * nbs, op.groups * op.splits,
                                   compute_units, vec, b_kfast, k_term=op.K)
    grid = (-(-op.N // cfg.bn) * cfg.threads, -(-op.M // cfg.bm), op.groups * op.splits)
    options = cfg.options(math == "3xtf32", vec, a_kfast, b_kfast, _c_pairs(op))
    path, name = cfg.kernel
    return KERNELS.launch(path, name, options, grid, (cfg.threads, 1, 1),
                          lambda: _gpu_args(op, nbs), op.flops, eff, _traffic(op))


def gpu_splits(M: int, N: int, K: int, nb: int, groups: int, compute_units: int) -> int:
    """How many split-K layers a GPU GEMM with a batch reduction of ``nb`` terms needs so
    that its work-groups fill the device (two per compute unit), at most ``nb``."""
    cfg = params.gpu_config(M, N, K * nb, groups, compute_units)
    tiles = -(-M // cfg.mwg) * -(-N // cfg.nwg) * groups
    if tiles >= 2 * compute_units or nb < 2:
        return 1
    want = min(nb, -(-2 * compute_units // tiles))
    per = -(-nb // want)
    return -(-nb // per)


def most_gpu_splits(M: int, N: int, groups: int, compute_units: int) -> int:
    """An upper bound on :func:`gpu_splits` over every K and nb: its split count is at most
    ``ceil(2 x compute units / tiles)``, and no configuration has fewer tiles than the one
    with the largest tile; 1 where even that fills the device. Lets a layout search take
    its largest chunk at once when that chunk fits with this many partial sums."""
    mwg = max(c.mwg for c in params.GPU_CONFIGS)
    nwg = max(c.nwg for c in params.GPU_CONFIGS)
    tiles = -(-M // mwg) * -(-N // nwg) * groups
    return 1 if tiles >= 2 * compute_units else -(-2 * compute_units // tiles)


def splitk_reduce_launch(part: str, part_off: int, c: str, count: int, splits: int,
                         beta: int, c_off: int = 0) -> Launch:
    """``c[c_off + i] (+)= sum_s part[part_off + s*count + i]`` (kernel splitk_reduce)."""
    local = 256
    return KERNELS.launch("sgemm_gpu.cl", "splitk_reduce",
                          params.GPU_CONFIGS[0].options(True, False),
                  (-(-count // local) * local,), (local,),
                  lambda: (part, np.int64(part_off), c, np.int64(c_off), np.int64(count),
                           np.int32(splits), np.int32(beta)),
                  bytes=4 * count * (splits + 1 + beta))
