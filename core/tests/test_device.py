"""Device discovery, selection and measured figures."""

from __future__ import annotations

import pytest

from wticonv import Device, DeviceError, list_devices, select_device
from wticonv.db.store import Store


def test_list_devices_reports_the_basics():
    devices = list_devices()
    assert devices
    for info, _ in devices:
        assert info.name and info.platform and info.driver_version
        assert info.kind in ("cpu", "gpu", "accelerator", "other")
        assert info.compute_units >= 1 and info.global_mem_bytes > 0
        assert info.key == f"{info.platform}|{info.name}|{info.driver_version}"


def test_default_device_is_a_gpu_if_any_else_a_cpu(handle):
    kinds = {i.kind for i, _ in list_devices()}
    assert handle.device.kind == ("gpu" if "gpu" in kinds else "cpu")


def test_select_by_kind_and_index(monkeypatch):
    if not any(i.kind == "cpu" for i, _ in list_devices()):
        pytest.skip("no OpenCL CPU device on this machine")
    cpu = select_device("cpu")
    assert cpu.kind == "cpu"
    again = select_device(cpu.info.index)
    assert again.info == cpu.info
    monkeypatch.setenv("WTICONV_DEVICE", cpu.info.index)
    assert select_device().info == cpu.info


@pytest.mark.parametrize("spec, fragment", [
    ("tpu", "device 'tpu' is not understood"),
    ("9:9", "no OpenCL device 9:9"),
])
def test_bad_device_specs_list_what_exists(spec, fragment):
    with pytest.raises(DeviceError) as e:
        select_device(spec)
    assert fragment in str(e.value) and "devices present:" in str(e.value)


def test_gpu_request_without_gpu_is_a_clear_error():
    if any(i.kind == "gpu" for i, _ in list_devices()):
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceError, match="no OpenCL GPU device found"):
        select_device("gpu")


def test_figures_are_measured_once_and_cached(handle, tmp_path):
    store = Store(tmp_path)
    dev = Device(handle.device.cl_device, handle.device.info, store)
    assert not dev.figures_known
    peak, bw = dev.peak_flops, dev.bandwidth
    # A CPU of this decade reaches more than 1 GFLOP/s and 1 GB/s; far below any real peak.
    assert peak > 1e9 and bw > 1e9
    assert store.get_device_figures(dev.key) == (peak, bw)
    other = Device(handle.device.cl_device, handle.device.info, store)
    assert other.figures_known and other.peak_flops == peak


def _set_aside(store, info, reason="the probe kernel computed wrong values"):
    from wticonv.runtime.probe import verdict_key

    store.put_device_verdict(verdict_key(info), False, reason)


def test_a_set_aside_device_is_remembered_and_not_probed_again(handle, tmp_path, monkeypatch):
    import wticonv.runtime.probe

    def no_probe(*args, **kwargs):
        raise AssertionError("a device with a stored verdict was probed again")

    monkeypatch.setattr(wticonv.runtime.probe, "run_probe", no_probe)
    store = Store(tmp_path)
    _set_aside(store, handle.device.info, "error: unknown target CPU 'generic'")
    dev = Device(handle.device.cl_device, handle.device.info, store)
    assert dev.unusable_reason == "error: unknown target CPU 'generic'"
    with pytest.raises(DeviceError, match="is set aside: error: unknown target CPU"):
        dev.peak_flops  # noqa: B018


def test_named_set_aside_device_is_refused_with_the_reason(handle, tmp_path):
    store = Store(tmp_path)
    _set_aside(store, handle.device.info, "error: unknown target CPU 'generic'")
    with pytest.raises(DeviceError) as e:
        select_device(handle.device.info.index, store)
    assert "is set aside: error: unknown target CPU 'generic'" in str(e.value)
    assert "Devices present:" in str(e.value)


def test_a_new_device_is_probed_once_in_a_child(handle, tmp_path, monkeypatch):
    import wticonv.runtime.probe

    calls = []
    real = wticonv.runtime.probe.run_probe

    def counting(info, store, timeout=None):
        calls.append(info.key)
        return real(info, store, timeout)

    monkeypatch.setattr(wticonv.runtime.probe, "run_probe", counting)
    store = Store(tmp_path)
    info = handle.device.info
    dev = select_device(info.index, store)
    assert calls == [info.key] and dev.figures_known
    assert store.get_device_verdict(wticonv.runtime.probe.verdict_key(info)) == (True, "")
    peak, bw = store.get_device_figures(info.key)
    assert peak > 1e9 and bw > 1e8
    select_device(info.index, store)
    assert calls == [info.key]          # cached: no second child
