"""Child-process jobs (the CUDA simulator's case files, the sm_90 PTX compile) run beside the
main pytest process (imported by the conftest and the wrapper tests; not a test).

``NUMBA_ENABLE_CUDASIM`` must be set before numba is imported, so each ``cuda_*_cases.py`` file
runs in a pytest of its own. Those children are single-threaded and CPU-bound, and they used to
run while the main process waited for them: on a 2-core machine the suite used one core for
most of its time. Now the conftest starts every job whose wrapper test is selected as soon as
collection is done, on ``lanes()`` worker threads (each keeps one child at a time), longest
job first, and moves the wrapper tests to the end of the run; a wrapper test then only waits
for its job (:func:`check`) and fails with the end of its output.

Each lane gives its children a Numba cache folder of its own: Numba's on-disk cache is not
safe for processes that add overloads of one function at the same time (their index and
object files can get crossed, which crashed a later process that loaded them), and the lanes
run beside each other and the main process. A lane's children run one after another, so they
can share their lane's folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent

PTX = "cuda_ptx_compile.py"
# each job's time in seconds, only for the order (the longest go first, so that the lanes end
# together): cuda_sim_cases, budget and strict as they ran alone in earlier sessions (6.5, 3
# and 2 minutes), the others from one suite run with a cold cache here, each
# in a child while the main process waited (--durations)
JOB_SECONDS = {
    "cuda_sim_cases.py": 390,
    "cuda_budget_cases.py": 180,
    "cuda_strict_cases.py": 120,
    PTX: 73,
    "cuda_device_input_cases.py": 58,
    "cuda_sim_window_device_cases.py": 18,
    "cuda_sim_window_step_cases.py": 12,
    "cuda_sim_cq_cases.py": 7,  # with cuda_strict_cq_cases.py beside it: 14 s together
    "cuda_strict_cq_cases.py": 7,
    "cuda_sim_insert_adj_cases.py": 7,
    "cuda_sim_stamp_cases.py": 5,
}


@dataclass
class Job:
    name: str
    done: threading.Event = field(default_factory=threading.Event)
    returncode: int | None = None
    output: str = ""
    workdir: Path | None = None  # the PTX job's output folder


_jobs: dict[str, Job] = {}
_queue: list[str] = []
_lock = threading.Lock()
_procs: set[subprocess.Popen] = set()
_tmp: tempfile.TemporaryDirectory | None = None
_stopping = False
_next_lane = 0


def lanes() -> int:
    """``GPU_IVM_SIM_LANES``, else the machine's core count up to 4 (the main process makes
    one more runnable process: the cores stay busy while it waits; a child holds up to about
    1 GB, hence the cap)."""
    given = int(os.environ.get("GPU_IVM_SIM_LANES", "0"))
    return max(1, given or min(os.cpu_count() or 1, 4))


def ptx_python() -> str:
    return os.environ.get("GPU_IVM_PTX_PYTHON", "")


def _argv(job: Job) -> list[str]:
    if job.name == PTX:
        assert _tmp is not None
        job.workdir = Path(_tmp.name) / "ptx"
        job.workdir.mkdir()
        return [ptx_python(), str(TESTS / PTX), str(TESTS.parent), str(job.workdir)]
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5",
            str(TESTS / job.name)]


def _env(job: Job, lane: int) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GPU_IVM_BACKEND", None)
    env.pop("NUMBA_CACHE_DIR", None)  # set by the main process's kernel_cache.configure()
    if job.name == PTX:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        return env
    from gpu_ivm.kernel_cache import base_dir

    env["NUMBA_ENABLE_CUDASIM"] = "1"
    env["GPU_IVM_CACHE_DIR"] = str(base_dir() / f"simulator-lane{lane}")
    return env


def _lower_priority(pid: int) -> None:
    """The children yield to the main process (nice 10): it runs most of the suite's tests
    alone, so it is the one whose time the suite's time is; the lanes take what it leaves."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, 10)
    except (AttributeError, OSError):  # not POSIX, or not permitted: equal priority
        pass


def _lane(lane: int) -> None:
    while True:
        with _lock:
            if not _queue or _stopping:
                return
            job = _jobs[_queue.pop(0)]
        try:
            with tempfile.TemporaryFile("w+") as log:
                proc = subprocess.Popen(_argv(job), cwd=TESTS, stdout=log,
                                        stderr=subprocess.STDOUT, text=True,
                                        env=_env(job, lane))
                _lower_priority(proc.pid)
                with _lock:
                    _procs.add(proc)
                    if _stopping:  # stop() ran while it started: it did not see this child
                        proc.kill()
                try:
                    job.returncode = proc.wait()
                finally:
                    with _lock:
                        _procs.discard(proc)
                log.seek(0)
                job.output = log.read()
        except Exception as err:  # noqa: BLE001 - reported by the wrapper test
            job.returncode, job.output = -1, f"{job.name} did not run: {err!r}"
        finally:
            job.done.set()


def start(names) -> None:
    """Queue the jobs ``names`` (those not queued already), longest first, and start the lanes
    that are not running."""
    global _tmp, _next_lane, _stopping
    with _lock:
        _stopping = False  # a later session in the same process starts afresh
        new = [n for n in dict.fromkeys(names) if n not in _jobs]
        if not new:
            return
        if _tmp is None:
            _tmp = tempfile.TemporaryDirectory(prefix="gpu_ivm_sim_lanes_")
        for n in new:
            _jobs[n] = Job(n)
        _queue.extend(new)
        _queue.sort(key=lambda n: -JOB_SECONDS.get(n, 0))
        ids = range(_next_lane, _next_lane + min(lanes(), len(new)))
        _next_lane = ids.stop
    for lane in ids:
        threading.Thread(target=_lane, args=(lane,), daemon=True).start()


def finished(name: str, timeout: float = 1800) -> Job:
    """The job ``name`` once it has ended (started here if the conftest did not start it)."""
    start([name])
    job = _jobs[name]
    if not job.done.wait(timeout):
        raise TimeoutError(f"{name} did not end within {timeout:.0f} s")
    return job


def check(name: str, *, skips_allowed: bool = False) -> str:
    """Wait for the case file ``name``; fail with the end of its output when a case failed
    (or, unless ``skips_allowed``, was skipped). Returns its output."""
    job = finished(name)
    out = job.output
    assert job.returncode == 0, out[-9000:]
    assert " passed" in out, out[-2000:]
    assert skips_allowed or "skipped" not in out, out[-2000:]
    return out


def stop() -> None:
    """Drop the queued jobs and kill the running children (the end of the session)."""
    global _stopping, _tmp
    with _lock:
        _stopping = True
        _queue.clear()
        _jobs.clear()
        procs = list(_procs)
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    if _tmp is not None:
        _tmp.cleanup()
        _tmp = None
