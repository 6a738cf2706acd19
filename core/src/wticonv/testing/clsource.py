"""Read OpenCL C sources as a compiler would see them: enough to check launches by.

A small C preprocessor (object-like and function-like ``#define``, ``#undef``, ``#if``,
``#ifdef``, ``#ifndef``, ``#elif``, ``#else``, ``#endif``; ``#include`` lines are left
out, since the kernel runners splice them in before building) applied with a program's
``-D`` build options, then a reader of what the checks of :mod:`wticonv.testing.launches`
need:

- each kernel's parameters: name, C type, pointer or scalar (:func:`kernel_signatures`);
- for each NDRange dimension, the narrowest integer a kernel keeps its work-item or
  work-group id in (:class:`IdWidth`): ``get_global_id(0)`` stored in an ``int`` caps the
  global size at 2^31 work-items, ``get_group_id(1) * 64`` in an ``int`` caps the
  work-groups at 2^31 / 64.

It reads the kernels of this project and code written like them; it is not a full C
front end (no string literals, no ``#`` stringising, one level of parentheses in casts).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["preprocess", "Param", "Kernel", "IdWidth", "kernel_signatures"]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_SCALARS = {"char": 8, "uchar": 8, "short": 16, "ushort": 16, "int": 32, "uint": 32,
            "long": 64, "ulong": 64, "size_t": 64, "float": 32, "double": 64, "bool": 8}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_args(text: str, start: int) -> tuple[list[str], int] | None:
    """The comma-separated arguments of the parenthesised list opening at ``text[start]``
    (``"("``), and the index after its ``")"``; None if it is not closed."""
    depth, args, cur = 0, [], start + 1
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(text[cur:i])
                return [a.strip() for a in args], i + 1
        elif ch == "," and depth == 1:
            args.append(text[cur:i])
            cur = i + 1
    return None


class _Macros:
    def __init__(self) -> None:
        self.defs: dict[str, tuple[list[str] | None, str]] = {}

    def define(self, rest: str) -> None:
        m = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)$", rest, flags=re.S)
        if not m:
            return
        params = None if m.group(2) is None else [p.strip() for p in m.group(3).split(",")
                                                  if p.strip()]
        self.defs[m.group(1)] = (params, m.group(4).strip())

    def expand(self, text: str, disabled: frozenset = frozenset()) -> str:
        out, pos = [], 0
        for m in _IDENT.finditer(text):
            if m.start() < pos:
                continue
            name = m.group(0)
            if name not in self.defs or name in disabled:
                continue
            params, body = self.defs[name]
            if params is None:
                out.append(text[pos:m.start()])
                out.append(self.expand(body, disabled | {name}))
                pos = m.end()
                continue
            j = m.end()
            while j < len(text) and text[j] in " \t\n":
                j += 1
            if j >= len(text) or text[j] != "(":
                continue
            split = _split_args(text, j)
            if split is None:
                continue
            args, end = split
            if args == [""] and not params:
                args = []
            raw = dict(zip(params, args, strict=False))
            done = {p: self.expand(a, disabled) for p, a in raw.items()}

            def sub(mm, raw=raw, done=done, body=body):
                word = mm.group(0)
                if word not in raw:
                    return word
                before = body[:mm.start()].rstrip().endswith("##")
                after = body[mm.end():].lstrip().startswith("##")
                return raw[word] if before or after else done[word]

            replaced = re.sub(r"\s*##\s*", "", _IDENT.sub(sub, body))
            out.append(text[pos:m.start()])
            out.append(self.expand(replaced, disabled | {name}))
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def evaluate(self, expr: str) -> bool:
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: " 1 " if (m.group(1) or m.group(2)) in self.defs else " 0 ",
                      expr)
        expr = self.expand(expr)
        expr = _IDENT.sub(lambda m: m.group(0) if m.group(0) in ("and", "or", "not")
                          else "0", expr)
        expr = re.sub(r"(\d+)[uUlL]+\b", r"\1", expr)
        expr = expr.replace("&&", " and ").replace("||", " or ")
        expr = re.sub(r"!(?!=)", " not ", expr).replace("/", "//")
        try:
            return bool(eval(expr, {"__builtins__": {}}, {}))  # noqa: S307 - digits, operators
        except Exception:  # noqa: BLE001 - an unreadable condition counts as false
            return False


def _options_macros(options: str) -> _Macros:
    macros = _Macros()
    for opt in options.split():
        if opt.startswith("-D") and len(opt) > 2:
            name, _, value = opt[2:].partition("=")
            macros.define(f"{name} {value or '1'}")
    return macros


@functools.lru_cache(maxsize=256)
def preprocess(source: str, options: str = "") -> str:
    """``source`` after the preprocessor, with the ``-DNAME[=VALUE]`` of ``options``
    defined first: comments removed, inactive branches dropped, macros expanded."""
    macros = _options_macros(options)
    text = _strip_comments(source).replace("\\\n", " ")
    keep: list[str] = []
    stack: list[list[bool]] = []   # per open #if: [this branch active, some branch taken]

    def active() -> bool:
        return all(s[0] for s in stack)

    for line in text.split("\n"):
        m = _DIRECTIVE.match(line)
        if not m:
            keep.append(line if active() else "")
            continue
        word, rest = m.group(1), m.group(2).strip()
        keep.append("")
        if word in ("if", "ifdef", "ifndef"):
            outer = active()
            if word == "if":
                cond = outer and macros.evaluate(rest)
            else:
                cond = outer and ((rest.split()[0] in macros.defs) == (word == "ifdef"))
            stack.append([cond, cond])
        elif word == "elif" and stack:
            outer = all(s[0] for s in stack[:-1])
            cond = outer and not stack[-1][1] and macros.evaluate(rest)
            stack[-1] = [cond, stack[-1][1] or cond]
        elif word == "else" and stack:
            outer = all(s[0] for s in stack[:-1])
            stack[-1] = [outer and not stack[-1][1], True]
        elif word == "endif" and stack:
            stack.pop()
        elif not active():
            continue
        elif word == "define":
            macros.define(rest)
        elif word == "undef":
            macros.defs.pop(rest.split()[0], None)
    return macros.expand("\n".join(keep))


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``name``, base C ``ctype`` (``int``, ``long``, ``float``...),
    ``pointer`` for buffers."""

    name: str
    ctype: str
    pointer: bool


@dataclass(frozen=True)
class IdWidth:
    """Bits of the narrowest integer a kernel keeps an id of one dimension in, and the
    factor it multiplies that id by first (``int m0 = get_global_id(0) * 16``: 32, 16)."""

    bits: int = 64
    factor: int = 1

    def limit(self) -> int:
        """The most ids (work-items or work-groups) of that dimension that fit."""
        return (2 ** (self.bits - 1)) // max(1, self.factor)


@dataclass(frozen=True)
class Kernel:
    """A kernel as compiled: its parameters and, per dimension (0-2), the width its
    global ids (``global_ids``) and work-group ids (``group_ids``) are kept in."""

    name: str
    params: tuple[Param, ...]
    global_ids: tuple[IdWidth, IdWidth, IdWidth]
    group_ids: tuple[IdWidth, IdWidth, IdWidth]


def _param(text: str) -> Param:
    words = _IDENT.findall(text)
    ctype = next((w for w in reversed(words[:-1]) if w in _SCALARS), words[0] if words else "")
    if "unsigned" in words and ctype in ("int", "long", "char", "short"):
        ctype = "u" + ctype
    return Param(words[-1] if words else "", ctype, "*" in text)


def _functions(text: str) -> dict[str, tuple[list[Param], int, int]]:
    """Every function definition: name -> (parameters, body start, body end)."""
    out = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        name = m.group(1)
        if name in ("if", "for", "while", "switch", "return", "sizeof", "__attribute__"):
            continue
        split = _split_args(text, m.end() - 1)
        if split is None:
            continue
        args, end = split
        k = end
        while k < len(text) and text[k] in " \t\n":
            k += 1
        if k >= len(text) or text[k] != "{":
            continue
        depth = 0
        for e in range(k, len(text)):
            depth += {"{": 1, "}": -1}.get(text[e], 0)
            if depth == 0:
                break
        params = [_param(a) for a in args if a and a != "void"]
        out.setdefault(name, (params, k, e + 1))
    return out


def _const(text: str) -> int | None:
    """The value of a constant integer expression at the start of ``text`` (a number or a
    parenthesised expression of numbers), else None."""
    text = text.lstrip()
    if text.startswith("("):
        split = _split_args(text, 0)
        if split is None or len(split[0]) != 1:
            return None
        inner = split[0][0]
        if not re.fullmatch(r"[\d\s+*()-]+", inner):
            return None
        return int(eval(inner, {"__builtins__": {}}, {}))  # noqa: S307 - digits, operators
    m = re.match(r"\d+", text)
    return int(m.group(0)) if m else None


def _id_width(text: str, at: int, end: int, funcs: dict) -> IdWidth:
    """Width of the id read by the call ``text[at:end]`` (``get_global_id(d)``...)."""
    factor = 1
    after = text[end:].lstrip()
    if after.startswith("*") and not after.startswith("*="):
        factor = _const(after[1:]) or 1
    start = max(text.rfind(c, 0, at) for c in ";{}") + 1
    stmt = text[start:at]
    cast = re.search(r"\(\s*(?:unsigned\s+)?(\w+)\s*\)\s*$", stmt)
    if cast and cast.group(1) in _SCALARS:       # (long)get_global_id(0)
        return IdWidth(_SCALARS[cast.group(1)], factor)
    depth, i = 0, len(stmt) - 1          # the innermost parenthesis left open before it
    while i >= 0:
        depth += {")": 1, "(": -1}.get(stmt[i], 0)
        if depth < 0:
            break
        i -= 1
    if i >= 0:
        fm = re.search(r"([A-Za-z_]\w*)\s*$", stmt[:i])
        name = fm.group(1) if fm else ""
        if name in funcs:
            index = stmt[i + 1:].count(",")   # arguments before it (no nested calls)
            params = funcs[name][0]
            if index < len(params) and params[index].ctype in _SCALARS:
                return IdWidth(_SCALARS[params[index].ctype], factor)
        if name in ("min", "max", "clamp", "abs"):
            return _id_width(text, start + fm.start(1), end, funcs)
        return IdWidth(32, factor)        # an unknown call or expression: the narrowest
    decl = re.match(r"\s*(?:const\s+)?(?:unsigned\s+)?(\w+)\s+[A-Za-z_]", stmt)
    if decl and decl.group(1) in _SCALARS:
        return IdWidth(_SCALARS[decl.group(1)], factor)
    return IdWidth(32, factor)            # an assignment: assume the narrowest


def _narrowest(widths: list[IdWidth]) -> IdWidth:
    return min(widths, key=IdWidth.limit, default=IdWidth())


@functools.lru_cache(maxsize=256)
def kernel_signatures(source: str, options: str = "") -> dict[str, Kernel]:
    """Every ``__kernel`` of ``source`` built with ``options``: name -> :class:`Kernel`.

    Ids used in functions the kernel calls (``inline`` helpers) count where they are read.
    """
    text = preprocess(source, options)
    funcs = _functions(text)
    kernels = {}
    for m in re.finditer(r"__kernel\b", text):
        head = re.match(r"__kernel\s+(?:__attribute__\s*\(\(.*?\)\)\s*)*void\s+(\w+)\s*\(",
                        text[m.start():], flags=re.S)
        if not head or head.group(1) not in funcs:
            continue
        name = head.group(1)
        params, b0, b1 = funcs[name]
        reach, todo = {name}, [name]
        while todo:                          # the kernel and every function it calls
            _, s, e = funcs[todo.pop()]
            for call in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text[s:e]):
                if call.group(1) in funcs and call.group(1) not in reach:
                    reach.add(call.group(1))
                    todo.append(call.group(1))
        ids: dict[str, list[list[IdWidth]]] = {"global": [[], [], []], "group": [[], [], []]}
        for fname in reach:
            _, s, e = funcs[fname]
            for call in re.finditer(r"get_(global|group)_id\s*\(\s*(\d)\s*\)", text[s:e]):
                width = _id_width(text, s + call.start(), s + call.end(), funcs)
                ids[call.group(1)][int(call.group(2))].append(width)
        kernels[name] = Kernel(name, tuple(params),
                               tuple(_narrowest(w) for w in ids["global"]),
                               tuple(_narrowest(w) for w in ids["group"]))
    return kernels
