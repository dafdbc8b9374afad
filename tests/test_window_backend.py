"""``SlidingWindow(backend=...)`` and ``replay --events --backend`` on a machine without a CUDA
device: the cpu backend is the host window, cuda is refused naming the problem, never run on
the host in its place. (The device window itself runs in the simulator:
tests/cuda_sim_window_device_cases.py.)"""

from __future__ import annotations

import copy
import json

import numba
import pytest

import gpu_ivm
from gpu_ivm import DeviceSlidingWindow, SlidingWindow
from gpu_ivm.backend import cuda_usable
from gpu_ivm.cli import main
from gpu_ivm.errors import BackendUnavailableError, InputError

no_device = pytest.mark.skipif(numba.config.ENABLE_CUDASIM or cuda_usable(),
                               reason="a device (or the simulator) runs the cuda backend")
EVENTS = {"src": [1, 2, 3, 1], "dst": [2, 3, 1, 4], "time": [0, 1, 6, 12]}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch) -> None:
    monkeypatch.delenv("GPU_IVM_BACKEND", raising=False)


def test_cpu_backend_is_the_host_window() -> None:
    for choice in (None, "cpu", "CPU", gpu_ivm.get_backend("cpu")):
        sw = SlidingWindow(window=10, step=5, start=0, backend=choice)
        assert type(sw) is SlidingWindow and sw.backend.name == "cpu"
    assert type(copy.copy(sw)) is SlidingWindow
    assert [r.triangles for r in sw.push(EVENTS) + sw.close()] == [0, 1, 0]
    assert "DeviceSlidingWindow" in gpu_ivm.__all__ and gpu_ivm.DeviceSlidingWindow is \
        DeviceSlidingWindow
    with pytest.raises(InputError, match="unknown backend 'gpu'"):
        SlidingWindow(window=10, step=5, backend="gpu")


@no_device
def test_cuda_without_a_device_is_refused(tmp_path, monkeypatch) -> None:
    assert type(SlidingWindow(window=10, step=5, backend="auto")) is SlidingWindow
    for make in (lambda: SlidingWindow(window=10, step=5, backend="cuda"),
                 lambda: DeviceSlidingWindow(window=10, step=5)):
        with pytest.raises(BackendUnavailableError, match="CUDA device") as exc:
            make()
        assert "backend='cpu'" in str(exc.value)
    sw = SlidingWindow(window=10, step=5, start=0)
    sw.push(EVENTS)
    sw.snapshot(tmp_path / "s")
    with pytest.raises(BackendUnavailableError, match="CUDA device"):
        SlidingWindow.restore(tmp_path / "s", backend="cuda")
    assert SlidingWindow.restore(tmp_path / "s").count() == sw.count()
    monkeypatch.setenv("GPU_IVM_BACKEND", "cuda")  # the default, as for the engines
    with pytest.raises(BackendUnavailableError):
        SlidingWindow(window=10, step=5)


@pytest.fixture
def events_file(tmp_path):
    path = tmp_path / "ev.txt"
    path.write_text("".join(f"{a} {b} {t}\n" for a, b, t in zip(*EVENTS.values())))
    return path


def test_cli_backend_option(events_file, capsys) -> None:
    argv = ["replay", "--events", str(events_file), "--window", "10", "--step", "5", "--json"]
    assert main(argv + ["--backend", "cpu"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert out[0]["backend"] == "cpu" and [x["triangles"] for x in out[1:]] == [0, 1, 0]
    assert main(argv + ["--offline", "--backend", "cuda"]) == 2
    assert "--offline runs on the cpu backend only" in capsys.readouterr().err


@no_device
def test_cli_cuda_without_a_device(events_file, capsys, monkeypatch) -> None:
    argv = ["replay", "--events", str(events_file), "--window", "10", "--step", "5"]
    assert main(argv + ["--backend", "cuda"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "the cuda backend needs a usable CUDA device" in err
    monkeypatch.setenv("GPU_IVM_BACKEND", "gpu")
    assert main(argv) == 2
    assert "$GPU_IVM_BACKEND='gpu' is not a backend" in capsys.readouterr().err
