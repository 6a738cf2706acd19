"""``--cluster`` on the command line: the error without Dask, a misplaced --cluster, a
find on a local cluster (resumed the second time), ``wticonv worker --print``."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest
from wticonv.cli import main

KEY = "4-8-8-3x3-4-8-8-1-1x1-1x1-1x1-0-NCHW-FP32-F"


@contextlib.contextmanager
def _scheduler_and_worker(distributed):
    """A local Dask scheduler without workers of its own, a client of it, and ``wticonv
    worker SCHEDULER --device cpu`` started in a subprocess (its stderr piped) and joined:
    ``(scheduler, client, proc)``. The worker is killed if it does not join; the body
    ends it otherwise (or closing the scheduler at the end of the block does)."""
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as scheduler, \
            distributed.Client(scheduler) as client:
        proc = subprocess.Popen([sys.executable, "-m", "wticonv", "worker",
                                 scheduler.scheduler_address, "--device", "cpu"],
                                stderr=subprocess.PIPE, text=True)
        try:
            client.wait_for_workers(1, timeout=120)
        except BaseException:
            proc.kill()
            raise
        yield scheduler, client, proc


@pytest.mark.parametrize("argv", [["find", KEY, "--cluster"],
                                  ["evaluate", "resnet50", "--cluster"],
                                  ["tune", KEY, "--cluster", "tcp://127.0.0.1:1"],
                                  ["calibrate", "--cluster"],
                                  ["worker", "tcp://127.0.0.1:1"]])
def test_without_dask_cluster_says_how_to_install_it(argv, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)      # import distributed fails
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs Dask's distributed scheduler" in err
    assert 'pip install "wticonv[cluster]"' in err


def test_a_word_after_cluster_that_is_no_address_is_a_usage_error(capsys):
    assert main(["find", "--cluster", "resnet50"]) == 2
    err = capsys.readouterr().err
    assert "'resnet50' is not a scheduler address" in err and "--cluster=local" in err


def test_from_find_db_is_refused_with_cluster(capsys):
    pytest.importorskip("distributed")
    assert main(["calibrate", "--from-find-db", "--cluster"]) == 2
    assert "--from-find-db" in capsys.readouterr().err


def test_find_on_a_local_cluster_then_resumed(monkeypatch, tmp_path, capsys, handle):
    pytest.importorskip("distributed")
    from wticonv.db.store import Store
    from wticonv.runtime.device import list_devices

    store = Store(tmp_path)
    store.copy_device_records(handle.device.store, [i.key for i, _ in list_devices()])
    monkeypatch.setenv("WTICONV_CACHE_DIR", str(tmp_path))
    keep = ("direct.naive", "gemm.im2col")
    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", ",".join(
        s for s in handle.registry.ids() if s not in keep))
    assert main(["find", KEY, "--no-search", "-i", "1", "--cluster", "--device", "cpu",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (find,) = out["finds"]
    assert find["problem"] == KEY and find["device"] == handle.device.info.name
    assert {r["solver_id"] for r in find["results"]} == set(keep)
    assert all(r["time_ms"] > 0 for r in find["results"])
    assert out["failures"] == [] and out["interrupted"] is False
    assert set(store.get_find_records(handle.device.key, KEY)) == set(keep)
    assert main(["find", KEY, "--no-search", "--cluster", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "1 problem(s) skipped, already in the databases" \
        in captured.err


def test_worker_print_gives_dask_worker_lines_with_the_device_resource(capsys, handle):
    pytest.importorskip("distributed")
    from wticonv.fleet import device_resource

    assert main(["worker", "tcp://10.0.0.1:8786", "--device", "cpu", "--print"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    res = device_resource("cpu", handle.device.info.name)
    assert line.startswith(f"WTICONV_DEVICE={handle.device.info.index} dask worker "
                           "tcp://10.0.0.1:8786 --nthreads 1")
    assert f"--resources {res}=1" in line


def test_wticonv_worker_serves_a_scheduler_until_ctrl_c(tmp_path, handle, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import signal

    from wticonv import ConvProblem
    from wticonv.db.store import Store
    from wticonv.fleet import device_resource, jobs
    from wticonv.runtime.device import list_devices

    monkeypatch.setenv("WTICONV_DISABLE_SOLVERS", ",".join(
        s for s in handle.registry.ids() if s != "direct.naive"))
    with _scheduler_and_worker(distributed) as (scheduler, client, proc):
        try:
            (worker,) = client.scheduler_info()["workers"].values()
            assert worker["name"].endswith("-cpu-" + handle.device.info.index.replace(":",
                                                                                      "."))
            assert worker["resources"] == {device_resource("cpu", handle.device.info.name): 1}
            store = Store(tmp_path)
            store.copy_device_records(handle.device.store, [i.key for i, _ in list_devices()])
            p = ConvProblem(1, 4, 8, 8, 4, 3, 3, pad_h=1, pad_w=1)
            report = jobs.find([p], scheduler.scheduler_address, iterations=1,
                               search=False, store=store)
            assert report.failures == []
            assert set(store.get_find_records(handle.device.key, p.key)) == {"direct.naive"}
        finally:
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=60)
    assert rc == 0, proc.stderr.read()[-2000:]


def test_progress_table_shows_each_devices_tasks():
    from rich.console import Console
    from wticonv.cli.fleet import FleetProgress

    console = Console(width=120, record=True)
    console.print(FleetProgress.table({"wticonv-gpu-NVIDIA_H200": {
        "done": 7, "running": 1, "failed": 2, "remaining": 30}}, 12.0))
    text = console.export_text()
    assert "fleet: 12 s" in text
    row = next(line for line in text.splitlines() if "wticonv-gpu-NVIDIA_H200" in line)
    assert row.split()[1:] == ["7", "1", "2", "30"]


# ------------------------------------------- after a fresh user's trial (fleet-trial)
@pytest.mark.parametrize("argv, message", [
    (["find", KEY, "--cluster", "http://127.0.0.1:8787"],
     "http://127.0.0.1:8787 is a web address (the Dask dashboard's?), not the scheduler's: "
     "give the scheduler's own address, tcp://HOST:PORT"),
    (["evaluate", "alexnet", "--cluster", "https://10.0.0.1:8787"], "not the dashboard's "
                                                                     "http:// one (port 8787)"),
    (["worker", "http://x:1"], "http://x:1 is a web address"),
    (["worker", "foo bar"], "'foo bar' is not a scheduler address: give tcp://HOST:PORT"),
    (["worker", "tcp://127.0.0.1:1"],
     "cannot reach the Dask scheduler at tcp://127.0.0.1:1 (Connection refused): is `dask "
     "scheduler` running there, on this port?"),
    (["find", KEY, "--no-search", "--cluster", "tcp://127.0.0.1:1"],
     "cannot reach the Dask scheduler at tcp://127.0.0.1:1 (Connection refused)"),
])
def test_addresses_that_are_no_schedulers_are_one_line_errors(argv, message, capsys):
    import time

    pytest.importorskip("distributed")
    start = time.monotonic()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert time.monotonic() - start < 10                # a refused port: no 30 s wait


def test_the_python_api_refuses_a_dashboard_address():
    pytest.importorskip("distributed")
    from wticonv import fleet
    from wticonv.errors import FleetError

    with pytest.raises(FleetError, match="is a web address .* tcp://HOST:PORT"):
        fleet.Fleet("http://127.0.0.1:8787")
    with pytest.raises(FleetError, match="is a web address"):
        fleet.find([], "https://127.0.0.1:8787")


def test_worker_device_gpu_without_a_gpu_says_so(capsys, handle):
    pytest.importorskip("distributed")
    from wticonv.runtime.device import list_devices

    if any(info.kind == "gpu" for info, _ in list_devices()):
        pytest.skip("this machine has a GPU")
    assert main(["worker", "tcp://127.0.0.1:1", "--device", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wticonv: error: no usable OpenCL GPU device to serve (wticonv "
                          "worker): this machine has cpu device(s) only"), err


@pytest.mark.parametrize("command", [["find", KEY], ["evaluate", "alexnet"], ["tune", KEY]])
def test_no_resume_without_cluster_is_refused(command, capsys):
    assert main([*command, "--no-resume"]) == 2
    assert "--no-resume is for --cluster runs" in capsys.readouterr().err


def test_failures_refused_workers_and_progress_name_the_device(capsys):
    from rich.console import Console
    from wticonv.cli.fleet import FleetProgress, finish
    from wticonv.fleet.session import FleetReport

    res = "wticonv-gpu-NVIDIA_H200"
    report = FleetReport("find", devices={res: {"name": "NVIDIA H200"}},
                         failures=[(res, "k1", "boom"), (res, "k2", "boom"),
                                   (res, "k3", "other")],
                         refused={"node7-gpu-0.0": "worker node7-gpu-0.0 (NVIDIA H200) "
                                                   "lacks fft.tiled 0.2.0: ..."},
                         skipped={res: 4})
    assert finish(report, False, {}) == 1
    assert capsys.readouterr().err.splitlines() == [
        "wticonv: NVIDIA H200: 4 problem(s) skipped, already in the databases "
        "(--no-resume measures them again)",
        "wticonv: error: worker node7-gpu-0.0 (NVIDIA H200) lacks fft.tiled 0.2.0: ...",
        "wticonv: failed on NVIDIA H200: 2 tasks (k1, ...): boom",
        "wticonv: failed on NVIDIA H200: k3: other"]
    console = Console(width=120, record=True)
    console.print(FleetProgress.table({res: {"done": 1, "running": 0, "failed": 0,
                                             "remaining": 2, "device": "NVIDIA H200"}}, 3))
    row = next(line for line in console.export_text().splitlines() if "H200" in line)
    assert row.split() == ["NVIDIA", "H200", "1", "0", "0", "2"]


def test_wticonv_worker_says_when_its_scheduler_goes_away(handle):
    distributed = pytest.importorskip("distributed")

    with _scheduler_and_worker(distributed) as (scheduler, _, proc):
        pass                                             # the worker joined; close them
    rc = proc.wait(timeout=60)                           # the scheduler closed: it ends
    err = proc.stderr.read()
    assert rc == 2, err[-2000:]
    assert (f"wticonv: error: the Dask scheduler at {scheduler.scheduler_address} went away"
            in err)
    assert "start `wticonv worker" in err
