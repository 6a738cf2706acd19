"""Winograd minimal-filtering transforms F(m, r), derived here (Toom-Cook construction).

For a 1-D correlation of an input tile d (alpha = m + r - 1 values) with a filter g (r
values), y_i = sum_k d_{i+k} g_k (i < m), Winograd's algorithm computes

    y = A^T [ (G g) * (B^T d) ]          (* elementwise; alpha multiplications, not m*r)

and the 2-D F(m x m', r x r') nests two 1-D transforms: Y = A_h^T [ (G_h g G_w^T) *
(B_h^T d B_w) ] A_w (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
CVPR 2016, section 4).

Construction (our own, checked exactly here): pick alpha - 1 distinct finite points p_j
plus the point at infinity. Then

- A^T (m x alpha): column j is (1, p_j, p_j^2, ..., p_j^(m-1)); the infinity column is
  (0, ..., 0, 1);
- G (alpha x r): row j is (1, p_j, ..., p_j^(r-1)) / prod_{l != j} (p_j - p_l); the
  infinity row is (0, ..., 0, 1);
- B^T (alpha x alpha) is the unique matrix for which the identity above holds for every d
  and g: a linear system in its entries, solved in exact rational arithmetic
  (``fractions.Fraction``), so the matrices are exact and the check is an equality.

Points: F(2, 3) uses 0, 1, -1 (the matrices of Lavin & Gray up to row scaling); F(4, 3)
uses 0, 1, -1, 1/2, -1/2 (points of small magnitude keep fp32 rounding low: with 2 and -2
instead, the transforms' entries reach 5 and 8). F(m, 1) is the identity (no transform
along that axis).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

__all__ = ["Transform", "winograd_transform", "DEFAULT_POINTS"]

#: Finite interpolation points per (m, r) (the point at infinity is always added).
DEFAULT_POINTS = {
    (2, 3): (0, 1, -1),
    (4, 3): (0, 1, -1, Fraction(1, 2), Fraction(-1, 2)),
    (2, 2): (0, 1),
    (4, 2): (0, 1, -1, Fraction(1, 2)),
    (6, 3): (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)),
}

Matrix = tuple[tuple[Fraction, ...], ...]


@dataclass(frozen=True)
class Transform:
    """The matrices of F(m, r): ``AT`` (m x alpha), ``G`` (alpha x r), ``BT`` (alpha x
    alpha), exact (``Fraction``)."""

    m: int
    r: int
    AT: Matrix
    G: Matrix
    BT: Matrix

    @property
    def alpha(self) -> int:
        """Tile size m + r - 1 (multiplications per output tile along one axis)."""
        return self.m + self.r - 1

    def floats(self, name: str) -> list[list[float]]:
        """One matrix (``"AT"``, ``"G"`` or ``"BT"``) as floats."""
        return [[float(v) for v in row] for row in getattr(self, name)]


def _solve(rows: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction]:
    """Least-norm-free exact solve of a consistent (possibly over-determined) system by
    Gaussian elimination; raises ValueError if it is inconsistent or under-determined."""
    n = len(rows[0])
    aug = [list(r) + [b] for r, b in zip(rows, rhs, strict=False)]
    pivots = []
    row = 0
    for col in range(n):
        piv = next((i for i in range(row, len(aug)) if aug[i][col] != 0), None)
        if piv is None:
            continue
        aug[row], aug[piv] = aug[piv], aug[row]
        pv = aug[row][col]
        aug[row] = [v / pv for v in aug[row]]
        for i in range(len(aug)):
            if i != row and aug[i][col] != 0:
                f = aug[i][col]
                aug[i] = [a - f * b for a, b in zip(aug[i], aug[row], strict=False)]
        pivots.append(col)
        row += 1
    if len(pivots) != n:
        raise ValueError("the transform is not determined by these points")
    if any(all(v == 0 for v in r[:-1]) and r[-1] != 0 for r in aug):
        raise ValueError("no transform fits these points")
    x = [Fraction(0)] * n
    for i, col in enumerate(pivots):
        x[col] = aug[i][-1]
    return x


@cache
def winograd_transform(m: int, r: int, points: tuple | None = None) -> Transform:
    """The exact transform matrices of F(m, r) (see module docstring).

    Raises ValueError for unsupported sizes or points that do not give a transform.
    """
    if m < 1 or r < 1:
        raise ValueError(f"F({m}, {r}): m and r must be positive")
    if r == 1:
        one = Fraction(1)
        eye = tuple(tuple(one if i == j else Fraction(0) for j in range(m)) for i in range(m))
        return Transform(m, 1, eye, tuple((one,) for _ in range(m)), eye)
    alpha = m + r - 1
    pts = tuple(Fraction(p) for p in (points or DEFAULT_POINTS.get((m, r)) or ()))
    if len(pts) != alpha - 1 or len(set(pts)) != len(pts):
        raise ValueError(f"F({m}, {r}) needs {alpha - 1} distinct finite points, got {pts}")
    AT = [[p ** i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    G = []
    for j, p in enumerate(pts):
        f = Fraction(1)
        for l, q in enumerate(pts):
            if l != j:
                f *= p - q
        G.append([p ** k / f for k in range(r)])
    G.append([Fraction(int(k == r - 1)) for k in range(r)])
    # sum_j AT[i][j] G[j][k] BT[j][l] = [l == i + k] for every i < m, k < r: one system per l
    BT_cols = []
    for l in range(alpha):
        rows, rhs = [], []
        for i in range(m):
            for k in range(r):
                rows.append([AT[i][j] * G[j][k] for j in range(alpha)])
                rhs.append(Fraction(int(l == i + k)))
        BT_cols.append(_solve(rows, rhs))
    BT = [[BT_cols[l][j] for l in range(alpha)] for j in range(alpha)]
    return Transform(m, r, tuple(map(tuple, AT)), tuple(map(tuple, G)), tuple(map(tuple, BT)))
