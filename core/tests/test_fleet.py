"""wticonv.fleet on a local Dask cluster of two PoCL workers (processes, one thread each)
on the CPU: the records of a fleet run against a serial run's, killed and hung workers,
a task failing twice, resume after an interrupted run, resource pinning.

The problems are tiny and three solvers run (the others are disabled), so that the
module runs in well under a minute on a 2-core machine; the workers keep their stores
(and compiled programs) in the test cache directory's fleet/ folder between runs.
"""

from __future__ import annotations

import math

import pytest

distributed = pytest.importorskip("distributed")

from wticonv import ConvProblem  # noqa: E402
from wticonv.db.store import Store  # noqa: E402
from wticonv.fleet import Fleet, device_resource, jobs  # noqa: E402
from wticonv.fleet.runner import Task, run_tasks  # noqa: E402
from wticonv.measuring import timing  # noqa: E402

KEEP = ("direct.naive", "gemm.im2col", "gemm.1x1")
PROBLEMS = [ConvProblem(1, 4, 8, 8, 4, 3, 3, pad_h=1, pad_w=1),
            ConvProblem(2, 4, 6, 6, 8, 1, 1),
            ConvProblem(1, 4, 7, 7, 4, 3, 3, stride_h=2, stride_w=2).with_direction("bwd")]


@pytest.fixture(scope="module")
def fleet():
    """Two workers on the CPU device (the same resource), a scheduler that fails a task
    after two of its workers died."""
    with Fleet(devices="cpu", workers_per_device=2) as f:
        yield f


@pytest.fixture
def few_solvers(monkeypatch, handle):
    disabled = [sid for sid in handle.registry.ids() if sid not in KEEP]
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", ",".join(disabled))
    return disabled


@pytest.fixture
def serial_handle(own_store, handle, few_solvers):
    import wticonv
    from wticonv.contract.registry import SolverRegistry
    from wticonv.runtime.device import select_device

    return wticonv.Handle(select_device(handle.device.info.index, own_store),
                          SolverRegistry(disabled=few_solvers))


def _caller_store(tmp_path, handle) -> Store:
    from wticonv.runtime.device import list_devices

    store = Store(tmp_path / "caller")
    store.copy_device_records(handle.device.store, [i.key for i, _ in list_devices()])
    return store


def _handle_with_figures(tmp_path, like, key: str, source: Store):
    """A handle on ``like``'s device and solvers whose store holds ``source``'s figures of
    the device ``key`` (peak, bandwidth, launch overhead)."""
    import wticonv
    from wticonv.runtime.device import select_device

    store = Store(tmp_path / "serial-figures")
    store.put_launch_overhead(key, source.get_launch_overhead(key))   # the first one stays
    store.copy_device_records(like.device.store, [key])
    store.put_device_figures(key, *source.get_device_figures(key))
    return wticonv.Handle(select_device(like.device.info.index, store), like.registry)


def test_find_records_equal_a_serial_runs(fleet, serial_handle, tmp_path, handle):
    from wticonv.measuring.find import find

    store = _caller_store(tmp_path, handle)
    report = jobs.find(PROBLEMS, fleet, iterations=2, time_cap_ms=50, search=False,
                       store=store)
    assert report.failures == [] and not report.interrupted
    (res, dev), = report.devices.items()
    assert dev["key"] == serial_handle.device.key
    assert res == device_resource("cpu", dev["name"]) and res.startswith("wticonv-cpu-")
    assert " " not in res and "=" not in res and "," not in res  # dask worker --resources
    for p in PROBLEMS:
        find(serial_handle, p, iterations=2, time_cap_ms=50, search=False)
    key, serial = dev["key"], serial_handle.device.store
    assert store.find_problem_keys(key) == serial.find_problem_keys(key) == sorted(
        p.key for p in PROBLEMS)
    for p in PROBLEMS:
        ours, theirs = store.get_find_records(key, p.key), serial.get_find_records(key, p.key)
        assert set(ours) == set(theirs) and set(ours) <= set(KEEP) and "direct.naive" in ours
        for sid in ours:
            assert ours[sid][0] == theirs[sid][0]          # solver version
            assert ours[sid][1] == theirs[sid][1]          # workspace
            assert 0 < ours[sid][2] < math.inf and 1 <= ours[sid][3] <= 2 * timing.SHORT_RUNS
    # every task's own work lies between its submission and its merge
    # one describe, one compile ahead (submitted before the finds), one find a problem
    assert len(report.timings) == len(PROBLEMS) + 2
    compiles = [t for t in report.timings if "-compile-" in t["id"]]
    finds = [t for t in report.timings if "-find-" in t["id"]]
    assert len(compiles) == 1 and len(finds) == len(PROBLEMS)
    assert compiles[0]["submitted"] <= min(t["submitted"] for t in finds)
    assert all(t["submitted"] <= t["started"] <= t["ended"] <= t["merged"]
               for t in report.timings)


def test_evaluate_cases_equal_serial_scoring_of_the_same_measurements(
        fleet, serial_handle, tmp_path, handle):
    from wticonv.measuring.evaluate import score, summarize, write_csv

    store = _caller_store(tmp_path, handle)
    counts = {PROBLEMS[0]: 3, PROBLEMS[1]: 1, PROBLEMS[2]: 2}
    report = jobs.evaluate(PROBLEMS, fleet, iterations=2, time_cap_ms=50, counts=counts,
                           store=store)
    assert report.failures == []
    (res, cases), = report.cases.items()
    assert [c.problem for c in cases] == PROBLEMS
    # the serial run's scoring of the same measurements, with the figures of the device
    # in the caller's store (peak, bandwidth, launch overhead), as the workers had them
    key = report.devices[res]["key"]
    serial_handle = _handle_with_figures(tmp_path, serial_handle, key, store)
    serial = [score(serial_handle, c.problem, c.measured_ms, None, counts[c.problem])
              for c in cases]
    for ours, theirs in zip(cases, serial, strict=True):
        assert (ours.best, ours.chosen, ours.slowdown, ours.count) == (
            theirs.best, theirs.chosen, theirs.slowdown, theirs.count)
        assert ours.predicted_ms == pytest.approx(theirs.predicted_ms, rel=1e-12)
        assert set(ours.measured_ms) <= set(KEEP)
    assert summarize(cases) == summarize(serial)
    write_csv(cases, tmp_path / "fleet.csv", serial_handle.device)
    write_csv(serial, tmp_path / "serial.csv", serial_handle.device)
    assert (tmp_path / "fleet.csv").read_text() == (tmp_path / "serial.csv").read_text()
    # the measurements went to the caller's find-db, as a serial evaluate records them
    assert {sid: rec[2] for sid, rec in store.get_find_records(key, PROBLEMS[0].key)
            .items()} == cases[0].measured_ms


def test_a_killed_workers_task_runs_again_elsewhere(fleet, few_solvers, tmp_path, handle):
    marker = str(tmp_path / "killed-once")

    def kill_once(spec):
        import os

        from wticonv.fleet.worker import run_task

        if spec["job"] == "find" and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)                       # the worker's process dies mid-task
        return run_task(spec)

    store = _caller_store(tmp_path, handle)
    report = jobs.find(PROBLEMS[:2], fleet, iterations=1, time_cap_ms=20, search=False,
                       store=store, task_fn=kill_once)
    assert (tmp_path / "killed-once").exists()
    assert report.failures == [] and not report.interrupted
    key = next(iter(report.devices.values()))["key"]
    assert store.find_problem_keys(key) == sorted(p.key for p in PROBLEMS[:2])


@pytest.mark.slow
def test_a_hung_task_ends_its_worker_and_runs_again(fleet, few_solvers, tmp_path, handle):
    marker = str(tmp_path / "hung-once")

    def hang_once(spec):
        import os
        import time

        from wticonv.fleet.worker import _time_limit, run_task

        if spec["job"] == "find" and not os.path.exists(marker):
            open(marker, "w").close()
            with _time_limit(spec["time_limit_s"]):
                time.sleep(600)               # a driver call that never returns
        return run_task(spec)

    store = _caller_store(tmp_path, handle)
    report = jobs.find(PROBLEMS[:1], fleet, iterations=1, time_cap_ms=20, search=False,
                       store=store, task_fn=hang_once, time_limit_s=3)
    assert (tmp_path / "hung-once").exists()
    assert report.failures == []
    key = next(iter(report.devices.values()))["key"]
    assert store.find_problem_keys(key) == [PROBLEMS[0].key]


def test_a_task_failing_twice_is_reported_and_the_others_go_on(fleet, few_solvers,
                                                               tmp_path, handle):
    bad, attempts = PROBLEMS[1].key, tmp_path / "attempts"
    attempts.mkdir()

    def fail_one(spec):
        import os
        import uuid

        from wticonv.fleet.worker import run_task

        if spec.get("problems") == [bad]:
            open(os.path.join(str(attempts), uuid.uuid4().hex), "w").close()
            raise RuntimeError("a driver error on this problem")
        return run_task(spec)

    store = _caller_store(tmp_path, handle)
    report = jobs.find(PROBLEMS, fleet, iterations=1, time_cap_ms=20, search=False,
                       store=store, task_fn=fail_one)
    (res, label, reason), = report.failures
    assert label == bad and "a driver error on this problem" in reason
    assert len(list(attempts.iterdir())) == 2                # tried, retried once
    key = report.devices[res]["key"]
    assert store.find_problem_keys(key) == sorted(p.key for p in PROBLEMS if p.key != bad)


def test_an_interrupted_run_keeps_what_was_merged_and_a_second_does_the_rest(
        fleet, few_solvers, tmp_path, handle):
    store = _caller_store(tmp_path, handle)
    merged: list = []

    def ctrl_c_after_first(snapshot):
        (counts,) = snapshot.values()
        if counts["done"] >= 2:               # the describe task and one problem
            merged.append(counts["done"])
            raise KeyboardInterrupt

    first = jobs.find(PROBLEMS, fleet, iterations=1, time_cap_ms=20, search=False,
                      store=store, progress=ctrl_c_after_first)
    assert first.interrupted and merged
    key = next(iter(first.devices.values()))["key"]
    kept = store.find_problem_keys(key)
    assert 1 <= len(kept) < len(PROBLEMS)
    second = jobs.find(PROBLEMS, fleet, iterations=1, time_cap_ms=20, search=False,
                       store=store)
    assert not second.interrupted and second.failures == []
    (res, done), = second.results.items()
    assert second.skipped[res] == len(kept)
    assert sorted(item["problem"] for item in done) == sorted(
        p.key for p in PROBLEMS if p.key not in kept)
    assert store.find_problem_keys(key) == sorted(p.key for p in PROBLEMS)


def test_a_task_for_a_device_no_worker_has_is_reported_not_left_waiting(fleet):
    import time

    missing = Task("wticonv-test-missing", "wticonv-gpu-NoSuchGPU",
                   {"job": "describe", "resource": "wticonv-gpu-NoSuchGPU"}, "describe")
    cpu = fleet.targets()[0].resource
    present = Task("wticonv-test-present", cpu, {"job": "describe", "resource": cpu,
                                                 "id": "wticonv-test-present"}, "describe")
    got = []
    start = time.monotonic()
    report = run_tasks(fleet.client, [missing, present],
                       lambda task, value: got.append((task.id, value["device"]["kind"])))
    assert time.monotonic() - start < 30
    (task, reason), = report.failed
    assert task is missing and "no worker serves device resource 'wticonv-gpu-NoSuchGPU'" \
        in reason
    assert got == [("wticonv-test-present", "cpu")]              # the CPU's task ran


def test_tune_and_calibrate_merge_records_the_store_validates(fleet, few_solvers, tmp_path,
                                                            handle):
    from wticonv.selection.perfdb import offered_perf_configs

    store = _caller_store(tmp_path, handle)
    report = jobs.tune(PROBLEMS[:1], fleet, iterations=1, time_cap_ms=5,
                       solvers=["direct.tiled"], store=store)
    assert report.failures == []
    (res, items), = report.results.items()
    key = report.devices[res]["key"]
    (result,) = items[0]["results"]
    rows = store.get_perf_records(key)
    if result["best_config"] not in (None, "default"):
        ver, cfg, t, t0 = rows[(PROBLEMS[0].key, "direct.tiled")]
        assert ver == handle.registry.solvers["direct.tiled"].version
        assert cfg in offered_perf_configs(handle.registry, "direct.tiled", PROBLEMS[0],
                                           handle.device, None)
        assert 0 < t <= t0
    else:
        assert (PROBLEMS[0].key, "direct.tiled") not in rows
    measured: dict = {}
    cal = jobs.calibrate(fleet, n=1, iterations=1, time_cap_ms=5, budget_s=2,
                         store=store, measurements=measured)
    assert cal.failures == [] and measured[res]
    factors = cal.factors[res]
    assert factors and all(0 < f < math.inf and k >= 1 for f, k in factors.values())
    stored = store.get_calibration(key)
    assert set(stored) == set(factors)
    assert store.get_correction(key)


def test_joining_a_scheduler_by_its_address(fleet, few_solvers, tmp_path, handle):
    # what `--cluster tcp://HOST:PORT` does: the devices are the workers' resources
    store = _caller_store(tmp_path, handle)
    report = jobs.find(PROBLEMS[:1], fleet.client.scheduler.address, iterations=1,
                       time_cap_ms=20, search=False, store=store)
    assert report.failures == []
    (res, dev), = report.devices.items()
    assert res == device_resource("cpu", dev["name"]) and dev["kind"] == "cpu"
    assert store.find_problem_keys(dev["key"]) == [PROBLEMS[0].key]


# ------------------------------------------- after a fresh user's trial (fleet-trial)
@pytest.fixture
def caller_system_db(tmp_path, monkeypatch, handle):
    """A system database of this process only (the fleet's workers were started with
    none): a calibration of the device that makes direct.naive look 10^4 x faster."""
    from wticonv.db.system import ENV, reset_system_databases
    from wticonv.db.transfer import Record, format_db

    version = handle.registry.solvers["direct.naive"].version
    path = tmp_path / "caller-sysdb.jsonl"
    path.write_text("\n".join(format_db([Record(
        "calibration", handle.device.key, None, "direct.naive", None, version,
        {"factor": 1e4, "probes": 5})])) + "\n")
    monkeypatch.setenv(ENV, str(path))
    reset_system_databases()
    yield path
    reset_system_databases()


def test_workers_predict_with_the_callers_system_calibration(
        fleet, serial_handle, tmp_path, handle, caller_system_db):
    from wticonv.measuring.evaluate import score

    store = _caller_store(tmp_path, handle)
    report = jobs.evaluate(PROBLEMS[:2], fleet, iterations=1, time_cap_ms=20, store=store)
    assert report.failures == []
    (res, cases), = report.cases.items()
    key = report.devices[res]["key"]
    serial_handle = _handle_with_figures(tmp_path, serial_handle, key, store)
    for ours in cases:
        theirs = score(serial_handle, ours.problem, ours.measured_ms)
        assert ours.chosen["fallback"] == theirs.chosen["fallback"] == "direct.naive"
        assert ours.predicted_ms == pytest.approx(theirs.predicted_ms, rel=1e-12)


def test_a_worker_sets_its_own_system_databases_aside(own_handle, tmp_path, monkeypatch):
    """What a worker does with a task's records (jobs_worker.sync, in this process as the
    worker): its own system calibration of the device no longer serves; the caller's
    system calibration, sent with the task, does."""
    from wticonv.db.system import ENV, reset_system_databases
    from wticonv.db.transfer import Record, format_db
    from wticonv.fleet.jobs_worker import sync
    from wticonv.selection.ranking import select

    key, version = own_handle.device.key, own_handle.registry.solvers["direct.naive"].version
    own = tmp_path / "worker-sysdb.jsonl"
    own.write_text("\n".join(format_db([Record("calibration", key, None, "direct.naive",
                                               None, version, {"factor": 1e4,
                                                               "probes": 5})])) + "\n")
    monkeypatch.setenv(ENV, str(own))
    reset_system_databases()
    try:
        def naive():
            sel = select(own_handle.registry, PROBLEMS[0], own_handle.device)
            return next(v for v in sel.verdicts if v.solver_id == "direct.naive")
        assert naive().source == "system calibration"               # the worker's own
        synced: dict = {}
        none = {key: {"factors": [], "models": [], "source": "", "system_db": ""}}
        sync(own_handle, {"calibration": none, "calibration_digest": "a",
                          "system": {"perf": [], "find": []}}, synced)
        assert naive().source == "model" and naive().raw_wti is None
        theirs = {key: {"factors": [("direct.naive", version, 2.0)], "models": [],
                        "source": "system calibration", "system_db": "caller's sysdb"}}
        sync(own_handle, {"calibration": theirs, "calibration_digest": "b",
                          "system": {"perf": [], "find": []}}, synced)
        v = naive()
        assert (v.source, v.system_db) == ("system calibration", "caller's sysdb")
        assert v.wti == pytest.approx(2.0 * v.raw_wti)
        assert own_handle.device.store.get_calibration(key) == {}   # served, not stored
    finally:
        reset_system_databases()


def test_a_worker_without_a_plugin_of_the_callers_is_refused_once(few_solvers, tmp_path,
                                                                  handle, monkeypatch):
    monkeypatch.setenv("WTICONV_NO_PLUGINS", "wticonv-fft")      # the workers' env only
    with Fleet(devices="cpu") as lacking:
        monkeypatch.delenv("WTICONV_NO_PLUGINS")
        store = _caller_store(tmp_path, handle)
        report = jobs.find(PROBLEMS[:2], lacking, iterations=1, time_cap_ms=20,
                           search=False, store=store)
    (worker, why), = report.refused.items()
    fft = handle.registry.solvers["fft.tiled"].version
    assert why.startswith(f"worker {worker} ({handle.device.info.name}) lacks fft.tiled "
                          f"{fft}, fft.tiled_3xtf32 {fft}: its results are refused")
    assert "install the same plugins, in the same versions, on every worker" in why
    assert [(label, reason) for _, label, reason in report.failures] == [
        ("describe", f"result refused: worker {worker}'s solvers are not this process's")]
    assert store.find_problem_keys(handle.device.key) == []          # nothing merged


def test_resume_needs_a_record_of_every_solver_find_times_there(fleet, few_solvers,
                                                               tmp_path, handle):
    store = _caller_store(tmp_path, handle)
    key = handle.device.key
    ver = {sid: e.version for sid, e in handle.registry.solvers.items()}
    # PROBLEMS[0] (3x3): naive and im2col, all that apply (gemm.1x1 does not): done;
    # PROBLEMS[1] (1x1): naive alone, where im2col and 1x1 apply too: not done
    store.put_find_records(key, PROBLEMS[0].key, [("direct.naive", ver["direct.naive"], 0,
                                                   5.0, 1, 0),
                                                  ("gemm.im2col", ver["gemm.im2col"], 4096,
                                                   1.0, 1, 0)])
    store.put_find_records(key, PROBLEMS[1].key, [("direct.naive", ver["direct.naive"], 0,
                                                   5.0, 1, 0)])
    report = jobs.find(PROBLEMS[:2], fleet, iterations=1, time_cap_ms=20, search=False,
                       store=store)
    assert report.failures == []
    (res, done), = report.results.items()
    assert report.skipped[res] == 1 and [item["problem"] for item in done] == [
        PROBLEMS[1].key]
    assert set(store.get_find_records(key, PROBLEMS[1].key)) == set(KEEP)
    assert store.get_find_records(key, PROBLEMS[0].key)["direct.naive"][2] == 5.0  # kept


def test_the_workers_of_a_local_cluster_ignore_ctrl_c(fleet):
    import os
    import signal
    import time

    before = fleet.client.run(os.getpid)
    assert len(before) == 2
    for pid in before.values():
        os.kill(pid, signal.SIGINT)          # what Ctrl-C in a terminal sends them
    time.sleep(2)
    assert fleet.client.run(os.getpid) == before      # the same workers, alive


def test_a_scheduler_that_goes_away_is_one_error_and_merged_results_stay():
    import logging
    import time

    from wticonv.errors import FleetError

    def work(spec):
        import time

        time.sleep(0.2)
        return {"worker": "w", "started": time.time(), "ended": time.time(),
                "n": spec["n"]}

    errors: list = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append
    logging.getLogger("distributed.client").addHandler(handler)
    cluster = distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                       dashboard_address=None, resources={"wticonv-x": 1})
    try:
        fleet = Fleet(cluster.scheduler_address)       # joined by its address
        got: list = []

        def merge(task, value):
            got.append(value["n"])
            if len(got) == 2:
                cluster.sync(cluster.scheduler.close)   # the scheduler goes away

        start = time.monotonic()
        tasks = [Task(f"t{i}", "wticonv-x", {"n": i}, f"p{i}", work) for i in range(20)]
        with pytest.raises(FleetError) as e:
            run_tasks(fleet.client, tasks, merge)
        assert str(e.value) == (
            f"the Dask scheduler at {cluster.scheduler_address} went away (it closed, "
            "restarted or cannot be reached any more): what finished was merged; run the "
            "command again to resume (it skips what is done)")
        assert got == [0, 1]
        fleet.close()                                  # at once, and quietly
        assert time.monotonic() - start < 15 and fleet.client.status == "closed"
        assert [r.getMessage() for r in errors] == []
    finally:
        logging.getLogger("distributed.client").removeHandler(handler)
        try:
            cluster.close(timeout=2)
        except Exception:  # noqa: BLE001 - its scheduler is gone already
            pass
