"""Machine facts, load average and resident memory of this process."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def loadavg() -> list[float]:
    """1, 5 and 15 minute load averages (other processes may share the machine)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _meminfo_bytes(field: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def meminfo_bytes(field: str) -> int | None:
    """A field of /proc/meminfo in bytes (e.g. "MemAvailable"), or None."""
    return _meminfo_bytes(field)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _backend_name() -> str:
    """The backend the engines pick (``GPU_IVM_BACKEND``, default cpu) and, for cuda, the
    device."""
    try:
        from gpu_ivm.backend import get_backend

        b = get_backend(None)
        dev = getattr(b, "device", None)
        return f"{b.name} ({dev})" if dev else b.name
    except Exception as e:  # a misconfigured backend is reported, not fatal here
        return f"unavailable: {e}"


def facts() -> dict:
    """Cores, RAM, CPU, software versions and the git revision."""
    import numba
    import numpy

    import gpu_ivm

    dirty = _git("status", "--porcelain", "--untracked-files=no")
    try:
        threads = numba.get_num_threads()
    except Exception:  # pragma: no cover - depends on the threading layer
        threads = None
    return {
        "cores": os.cpu_count(),
        "ram_bytes": _meminfo_bytes("MemTotal"),
        "cpu": _cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "numba": numba.__version__,
        "numba_threads": threads,
        "gpu_ivm": getattr(gpu_ivm, "__version__", "?"),
        "backend": _backend_name(),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "git_dirty": bool(dirty) if dirty is not None else None,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
        "free_page_reporting": free_page_reporting(),
    }


_REPORTING = Path("/sys/module/page_reporting/parameters")


def free_page_reporting() -> dict | None:
    """The kernel's free page reporting parameters, or None where it has none.

    A virtual machine whose balloon driver reports free memory to the host (Firecracker and
    others: ``page_reporting``) gives the host back every free block of ``2**order`` pages;
    the next touch of such memory is faulted in again by the host, unseen by this kernel's
    fault counters. Measured on the 2-core machine (``page_reporting_order`` 9,
    ``min_free_ms`` 0): writing 1 GiB of fresh memory took 112-118 ms, and 1,258-1,321 ms
    when that memory had been freed 5 s before (2,133 ms for a new process's first GiB). So a
    system's first batches are slower after another one freed a large footprint
    (docs/benchmarks.md, thirty-second session).
    """
    if not _REPORTING.is_dir():
        return None
    out: dict = {}
    for f in sorted(_REPORTING.iterdir()):
        try:
            v = f.read_text().strip()
        except OSError:
            continue
        out[f.name] = int(v) if v.lstrip("-").isdigit() else v
    return out


# ----------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def process_maxrss_bytes() -> int:
    """``ru_maxrss``: the high-water mark of the whole process since it started."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)


class PeakRSS:
    """Peak resident memory over a section of code.

    On Linux the kernel's high-water mark is reset at the start (``/proc/self/clear_refs``) and
    read at the end (``VmHWM``), so the peak belongs to this section only. Elsewhere the
    process-wide ``ru_maxrss`` is used and ``scoped`` is False.
    """

    def __init__(self) -> None:
        self.scoped = False
        self.peak_bytes: int | None = None

    def __enter__(self) -> PeakRSS:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.scoped = _status_kib("VmHWM") is not None
        except OSError:
            self.scoped = False
        return self

    def __exit__(self, *exc) -> None:
        hwm = _status_kib("VmHWM") if self.scoped else None
        self.peak_bytes = hwm * 1024 if hwm is not None else process_maxrss_bytes()
