"""Solver plugins: discovery through entry points, validation, quarantine, and hook calls.

Discovery: every entry point of the group ``wticonv.solvers`` (read with
``importlib-metadata``) names either a solver object (one with a ``solver_id``) or a
module/object with a ``SOLVERS`` list of them. Each entry point is loaded on its own; one
that fails to import or to validate is *quarantined* with its reason and never stops the
others. ``wticonv solvers`` lists both.

Environment:

Solver ids: the prefix of an id (before the dot) belongs to one distribution, whatever
the order of discovery (:mod:`wticonv.contract.ownership`): ``direct.*`` to ``wticonv-direct``, and
so on. A solver claiming another distribution's prefix, or a prefix that two
distributions claim, is quarantined with the reason.

- ``WTICONV_LOAD_PLUGINS``: comma-separated distribution names; only their entry points
  load. Set but empty: no plugin loads (a warning says so).
- ``WTICONV_NO_PLUGINS``: comma-separated distribution names that do not load (what
  ``wticonv --no-plugin NAME`` sets, as pytest's ``-p no:NAME``).
- ``WTICONV_DEBUG=1``: tracebacks with errors, import failures and set-aside solvers.
- ``WTICONV_DISABLE_SOLVERS``: comma-separated solver ids that stay registered but are
  never selected (``explain`` says "disabled").
- ``WTICONV_TRACE=1``: print every hook call (solver, arguments, result, time) to stderr.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import time
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import importlib_metadata
import pluggy

from wticonv.contract import hookspecs
from wticonv.contract.answers import (
    declared_math,
    declared_max_wti,
    declared_scope,
    declared_tolerance,
)
from wticonv.contract.ownership import claim_verdicts, norm_dist, prefix_owner
from wticonv.errors import PluginError, SolverNotFoundError

__all__ = ["SolverRegistry", "SolverEntry", "Quarantined", "ENTRY_POINT_GROUP",
           "BUILT_IN_DISTRIBUTIONS", "prefix_owner", "debug_enabled", "filter_hint"]

ENTRY_POINT_GROUP = "wticonv.solvers"
#: The solver distributions made with the core (the isolated conformance kit keeps them).
BUILT_IN_DISTRIBUTIONS = ("wticonv-direct", "wticonv-gemm", "wticonv-winograd", "wticonv-fft")
#: The query hooks selection asks every solver, in order, with the arguments it passes
#: (a prefix of ``problem, device, workspace_limit, perf_config``).
QUERY_HOOKS = (("is_applicable", ("problem", "device", "workspace_limit")),
               ("is_dynamic", ()),
               ("workspace_size", ("problem", "device", "workspace_limit", "perf_config")),
               ("get_wti", ("problem", "device", "workspace_limit", "perf_config")))
_QUERY_ARGS = QUERY_HOOKS[2][1]
_ID_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")


@dataclass(frozen=True)
class SolverEntry:
    """A registered solver.

    Attributes
    ----------
    solver_id : str
    distribution, version : str
        The distribution that ships it and its version ("" when registered by hand).
    entry_point : str
        ``name = value`` of the entry point ("" when registered by hand).
    obj : object
        The solver object (the pluggy plugin).
    tunable : bool
        It implements the optional ``perf_configs`` hook (``wticonv tune`` searches it).
    precompiles : bool
        It implements the optional ``programs`` hook (its programs can be compiled ahead).
    tolerance, max_wti : float
        Its declared ``tolerance`` (rms_range) and ``max_wti``, checked at registration
        (:mod:`wticonv.contract.answers`), or their defaults.
    math : str
        Its declared numerical class (``"fp32"``, ``"3xtf32"`` or ``"tf32"``,
        :data:`wticonv.contract.answers.MATH_CLASSES`), ``"fp32"`` by default.
    scope : str
        What it covers, one line (:func:`wticonv.contract.answers.declared_scope`): its
        ``scope`` attribute, else its class docstring's first sentence, else "".
    """

    solver_id: str
    distribution: str
    version: str
    entry_point: str
    obj: Any = field(compare=False, repr=False)
    tunable: bool = False
    precompiles: bool = False
    tolerance: float = 1e-5
    max_wti: float = 1.0
    math: str = "fp32"
    scope: str = ""


@dataclass(frozen=True)
class Quarantined:
    """An entry point (or solver object) that was refused, and why.

    Attributes
    ----------
    entry_point : str
        ``name = value`` of the entry point.
    distribution, version : str
    reason : str
        One line: what is wrong and how to fix it (an import failure names the file and
        line where it was raised).
    solver_id : str
        The id the refused solver declares ("" when unknown: it failed to import, or the
        entry point names no solver).
    traceback : str
        The formatted traceback of an import failure ("" otherwise); shown with
        ``WTICONV_DEBUG=1`` / ``--debug``.
    """

    entry_point: str
    distribution: str
    version: str
    reason: str
    solver_id: str = ""
    traceback: str = field(default="", compare=False, repr=False)


def _env_list(name: str) -> list[str] | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


_norm_dist = norm_dist


def debug_enabled() -> bool:
    """``WTICONV_DEBUG`` is set to something other than "", 0, false or no."""
    return os.environ.get("WTICONV_DEBUG", "").lower() not in ("", "0", "false", "no")


def filter_hint() -> str:
    """The line printed while ``WTICONV_LOAD_PLUGINS`` is set but empty."""
    return ("wticonv: WTICONV_LOAD_PLUGINS is set but empty, so no solver plugin loads; "
            "unset it (or name distributions in it) to load the installed plugins")


def _where(error: BaseException) -> str:
    """`` (file F, line L)``: where an import failure was raised, the plugin's own file
    when the traceback passes through one ("" when unknown)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" (file {error.filename}, line {error.lineno})"
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "importlib" not in f.filename and not f.filename.startswith("<frozen")]
    if not frames:
        return ""
    return f" (file {frames[-1].filename}, line {frames[-1].lineno})"


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__))


class SolverRegistry:
    """The installed solvers, as pluggy plugins of project ``wticonv``.

    Parameters
    ----------
    load_entry_points : bool
        Discover plugins through entry points (honouring ``WTICONV_LOAD_PLUGINS``).
    disabled : iterable of str, optional
        Solver ids never selected; ``WTICONV_DISABLE_SOLVERS`` when omitted.
    trace : bool, optional
        Print hook calls to stderr; ``WTICONV_TRACE`` when omitted.
    """

    def __init__(self, load_entry_points: bool = True, disabled: Iterable[str] | None = None,
                 trace: bool | None = None) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs.SolverSpec)
        self.solvers: dict[str, SolverEntry] = {}
        self.quarantined: list[Quarantined] = []
        #: Distributions with solver entry points that a filter kept from loading ->
        #: the filter (``WTICONV_LOAD_PLUGINS`` or ``--no-plugin``).
        self.skipped: dict[str, str] = {}
        self.disabled: set[str] = set(disabled if disabled is not None
                                      else (_env_list("WTICONV_DISABLE_SOLVERS") or []))
        self._callers: dict[tuple[str, str], Any] = {}
        self._tracing = False
        if trace is None:
            trace = os.environ.get("WTICONV_TRACE", "").lower() not in ("", "0", "false", "no")
        if trace:
            self.enable_tracing()
        if load_entry_points:
            self.load_entry_points()

    # -------------------------------------------------------------------- discovery
    def load_entry_points(self) -> None:
        """Load every ``wticonv.solvers`` entry point (see module docstring), then register
        the solvers whose ids :mod:`wticonv.contract.ownership` allows, whatever the order of
        discovery; the others are quarantined with the reason."""
        only = _env_list("WTICONV_LOAD_PLUGINS")
        only_set = {_norm_dist(n) for n in only} if only is not None else None
        blocked = {_norm_dist(n) for n in _env_list("WTICONV_NO_PLUGINS") or []}
        seen = set()
        installed: dict[str, str] = {}           # normalised -> name, loaded or not
        loaded: list[tuple[Any, str, str, str]] = []
        for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.metadata["Name"] if ep.dist is not None else ""
            version = ep.dist.version if ep.dist is not None else ""
            if (dist, ep.name, ep.value) in seen:  # the same dist seen twice on sys.path
                continue
            seen.add((dist, ep.name, ep.value))
            installed.setdefault(_norm_dist(dist), dist)
            if only_set is not None and _norm_dist(dist) not in only_set:
                self.skipped.setdefault(dist, "WTICONV_LOAD_PLUGINS")
                continue
            if _norm_dist(dist) in blocked:
                self.skipped.setdefault(dist, "--no-plugin / WTICONV_NO_PLUGINS")
                continue
            label = f"{ep.name} = {ep.value}"
            try:
                obj = ep.load()
            except BaseException as e:  # noqa: BLE001 - a broken plugin must never be fatal
                if isinstance(e, KeyboardInterrupt):
                    raise
                self.quarantined.append(Quarantined(
                    label, dist, version, f"failed to import: {type(e).__name__}: {e}"
                    f"{_where(e)}", traceback=_traceback(e)))
                continue
            objs = self._solver_objects(obj)
            if isinstance(objs, str):
                self.quarantined.append(Quarantined(label, dist, version, objs))
                continue
            loaded += [(o, dist, version, label) for o in objs]
        refused = claim_verdicts(
            [(sid, dist) for o, dist, _, _ in loaded
             for sid in [getattr(o, "solver_id", None)] if isinstance(sid, str)],
            installed.values())
        for obj, dist, version, label in loaded:
            sid = getattr(obj, "solver_id", None)
            sid = sid if isinstance(sid, str) else ""
            if (sid, dist) in refused:
                self.quarantined.append(Quarantined(label, dist, version,
                                                    refused[(sid, dist)], sid))
                continue
            try:
                self.register(obj, distribution=dist, version=version, entry_point=label)
            except PluginError as e:
                self.quarantined.append(Quarantined(label, dist, version, str(e), sid))
        for name in sorted(((only_set or set()) | blocked) - set(installed)):
            var = ("WTICONV_LOAD_PLUGINS" if name in (only_set or set())
                   else "WTICONV_NO_PLUGINS (--no-plugin)")
            warnings.warn(f"wticonv: {var} names {name!r}, but no installed distribution "
                          f"with that name has {ENTRY_POINT_GROUP} entry points", stacklevel=3)
        if only == []:
            warnings.warn(filter_hint(), stacklevel=3)
        for sid in sorted(self.disabled - set(self.solvers)):
            warnings.warn(f"wticonv: WTICONV_DISABLE_SOLVERS names {sid!r}, which is not an "
                          "installed solver", stacklevel=3)

    @staticmethod
    def _solver_objects(loaded: Any) -> list[Any] | str:
        if hasattr(loaded, "solver_id"):
            return [loaded]
        solvers = getattr(loaded, "SOLVERS", None)
        if isinstance(solvers, (list, tuple)) and solvers:
            return list(solvers)
        return (f"the entry point names {type(loaded).__name__} {loaded!r:.60}, which is neither "
                "a solver (no 'solver_id' attribute) nor a module with a SOLVERS list")

    def register(self, obj: Any, distribution: str = "", version: str = "",
                 entry_point: str = "") -> SolverEntry:
        """Validate ``obj`` as a solver and register it as the pluggy plugin ``solver_id``.

        Raises
        ------
        PluginError
            If the id is missing, malformed or taken, the solver's ``hook_api`` versions do
            not include one this core supports, a hook is missing, a hook does not match its
            specification, or a hook is not a specified one.
        """
        sid = getattr(obj, "solver_id", None)
        if not isinstance(sid, str) or not _ID_RE.match(sid):
            raise PluginError(
                f"solver_id {sid!r} is invalid: use '<plugin>.<variant>', lowercase letters, "
                "digits and underscores, e.g. 'direct.naive'")
        if sid in self.solvers:
            other = self.solvers[sid]
            raise PluginError(f"solver id {sid!r} is already registered by "
                              f"{other.distribution or 'another solver'}")
        _check_hook_api(sid, obj)
        math_class = declared_math(sid, obj)
        tolerance, max_wti = declared_tolerance(sid, obj), declared_max_wti(sid, obj)
        missing = [h for h in hookspecs.HOOK_NAMES
                   if not hasattr(obj, h) or self.pm.parse_hookimpl_opts(obj, h) is None]
        if missing:
            raise PluginError(
                f"solver {sid!r} does not implement the hook(s) {', '.join(missing)} "
                "(each must be a method marked with @wticonv.hookimpl)")
        try:
            self.pm.register(obj, name=sid)
        except (pluggy.PluginValidationError, ValueError) as e:
            raise PluginError(f"solver {sid!r} does not match the hook specifications: {e}"
                              ) from None
        known = hookspecs.HOOK_NAMES + hookspecs.OPTIONAL_HOOK_NAMES
        implemented = [caller.name for caller in self.pm.get_hookcallers(obj) or []]
        unknown = [name for name in implemented if name not in known]
        if unknown:
            self.pm.unregister(obj)
            raise PluginError(f"solver {sid!r} implements unknown hook(s) {', '.join(unknown)}; "
                              f"the hooks are {', '.join(known)}")
        entry = SolverEntry(sid, distribution, version, entry_point, obj,
                            tunable="perf_configs" in implemented,
                            precompiles="programs" in implemented, tolerance=tolerance,
                            max_wti=max_wti, math=math_class,
                            scope=declared_scope(obj))
        self.solvers[sid] = entry
        self._callers.clear()
        return entry

    def unregister(self, solver_id: str) -> None:
        """Remove a solver (tests and interactive use)."""
        entry = self.solvers.pop(solver_id)
        self.pm.unregister(entry.obj)
        self._callers = {k: v for k, v in self._callers.items() if k[0] != solver_id}

    # ------------------------------------------------------------------- hook calls
    def ids(self) -> list[str]:
        """Registered solver ids, sorted."""
        return sorted(self.solvers)

    def get(self, solver_id: str) -> SolverEntry:
        """The entry of ``solver_id``; :class:`SolverNotFoundError` listing the ids if absent."""
        try:
            return self.solvers[solver_id]
        except KeyError:
            known = ", ".join(self.ids()) or "none (is a solver plugin installed?)"
            held = ""
            if self.skipped:
                held = ("; a plugin filter is active, not loaded: "
                        + ", ".join(f"{d} ({why})" for d, why in sorted(self.skipped.items())))
            close = (difflib.get_close_matches(solver_id, self.ids(), n=3, cutoff=0.75)
                     if isinstance(solver_id, str) else [])
            hint = ""
            if close:
                alts = close[0] if len(close) == 1 else (", ".join(close[:-1])
                                                          + f" or {close[-1]}")
                hint = f" (did you mean {alts}?)"
            raise SolverNotFoundError(
                f"no solver {solver_id!r} is installed{hint}; installed solvers: "
                f"{known}{held}"
            ) from None

    def call(self, solver_id: str, hook: str, **kwargs: Any) -> Any:
        """Call ``hook`` of one solver (plus any non-solver wrappers) and return its answer.

        A query hook with no wrapper around it, while tracing is off, calls the solver's
        method directly with the arguments it names (what pluggy would do, at a third of
        the cost: selection makes some 20 such calls per new problem)."""
        if hook in hookspecs.PERF_CONFIG_HOOKS:
            kwargs.setdefault("perf_config", None)
        caller = self.caller(solver_id, hook)
        if type(caller) is tuple:
            fn, names = caller
            return fn(*[kwargs[n] for n in names])
        return caller(**kwargs)

    def caller(self, solver_id: str, hook: str) -> Any:
        """What :meth:`call` calls for ``hook`` of one solver: ``(method, names of its
        arguments)`` where it calls the solver directly, else pluggy's hook caller."""
        caller = self._callers.get((solver_id, hook))
        if caller is None:
            self.get(solver_id)
            others = [e.obj for sid, e in self.solvers.items() if sid != solver_id]
            caller = self.pm.subset_hook_caller(hook, remove_plugins=others)
            impls = caller.get_hookimpls()
            if (hook != "run" and not self._tracing and len(impls) == 1
                    and not (impls[0].hookwrapper or impls[0].wrapper)):
                caller = (impls[0].function, impls[0].argnames)
            self._callers[(solver_id, hook)] = caller
        return caller

    def query_callers(self, solver_id: str) -> tuple:
        """Functions ``f(problem, device, workspace_limit, perf_config)`` calling one
        solver's :data:`QUERY_HOOKS` in their order, each as :meth:`call` would with the
        hook's :data:`QUERY_HOOKS` arguments (selection asks every solver these four)."""
        callers = self._callers.get((solver_id, "query"))
        if callers is None:
            callers = tuple(self._query_caller(solver_id, hook, names)
                            for hook, names in QUERY_HOOKS)
            self._callers[(solver_id, "query")] = callers
        return callers

    def _query_caller(self, solver_id: str, hook: str, names: tuple[str, ...]):
        caller = self.caller(solver_id, hook)
        if type(caller) is not tuple:
            def through_call(*values):
                return self.call(solver_id, hook, **dict(zip(names, values, strict=False)))
            return through_call
        fn, wanted = caller  # names of the hookspec's arguments (pluggy checks them)
        if not wanted:
            return lambda *values: fn()
        if len(wanted) == 1:
            i = _QUERY_ARGS.index(wanted[0])
            return lambda *values: fn(values[i])
        pick = itemgetter(*(_QUERY_ARGS.index(n) for n in wanted))
        return lambda *values: fn(*pick(values))

    def register_wrapper(self, plugin: Any, name: str | None = None) -> None:
        """Register a non-solver plugin (e.g. a ``run`` hookwrapper for tracing)."""
        self.pm.register(plugin, name=name)
        self._callers.clear()

    # ---------------------------------------------------------------------- tracing
    def enable_tracing(self, stream=None) -> None:
        """Print every hook call with its solver, arguments, result and time."""
        self._tracing = True
        self._callers.clear()
        out = stream if stream is not None else sys.stderr
        starts: list[float] = []

        def before(hook_name, hook_impls, kwargs):
            starts.append(time.perf_counter())

        def after(outcome, hook_name, hook_impls, kwargs):
            dt = (time.perf_counter() - starts.pop()) * 1e6
            who = ",".join(i.plugin_name for i in hook_impls) or "-"
            args = " ".join(f"{k}={_short(v)}" for k, v in kwargs.items() if k != "device")
            exc = outcome.exception
            res = f"raised {type(exc).__name__}: {exc}" if exc else _short(outcome.get_result())
            print(f"wticonv trace: {who}.{hook_name}({args}) -> {res} [{dt:.0f} us]", file=out)

        self.pm.add_hookcall_monitoring(before, after)


def _check_hook_api(sid: str, obj: Any) -> None:
    """PluginError unless the solver's ``hook_api`` (versions it was written for; absent:
    any) meets :data:`hookspecs.COMPATIBLE_HOOK_APIS`."""
    stated = getattr(obj, "hook_api", None)
    if stated is None:
        return
    versions = tuple(stated) if isinstance(stated, (tuple, list, set)) else (stated,)
    if not versions or not all(isinstance(v, int) and not isinstance(v, bool)
                               for v in versions):
        raise PluginError(f"solver {sid!r} states hook_api = {stated!r}; it must be a tuple "
                          f"of int versions, e.g. ({hookspecs.HOOK_API_VERSION},)")
    if set(versions) & set(hookspecs.COMPATIBLE_HOOK_APIS):
        return
    if max(versions) > hookspecs.HOOK_API_VERSION:
        raise PluginError(f"solver {sid!r} needs hook API {max(versions)}; this wticonv has "
                          f"hook API {hookspecs.HOOK_API_VERSION}: upgrade wticonv")
    raise PluginError(f"solver {sid!r} was written for hook API "
                      f"{', '.join(map(str, versions))}; this wticonv supports "
                      f"{', '.join(map(str, hookspecs.COMPATIBLE_HOOK_APIS))}: upgrade the "
                      "plugin")


def _short(v: Any) -> str:
    key = getattr(v, "key", None)
    if isinstance(key, str):
        return key
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
