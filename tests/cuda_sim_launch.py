"""The launch configuration the simulator cases files share (imported by them, not a test).

:func:`boundary_launch` sets 32 threads per block and at most 4 blocks, so grid-stride loops
wrap and block boundaries are crossed on small inputs, and a short thread switch interval, so
the simulator's threads interleave; both are restored afterwards. A cases file makes it an
autouse fixture with ``_boundary_launch = pytest.fixture(autouse=True)(boundary_launch)``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from gpu_ivm.kernels import cuda_launch


def boundary_launch() -> Iterator[None]:
    cfg = cuda_launch.CONFIG
    saved = (cfg.tpb, cfg.max_blocks)
    cfg.tpb, cfg.max_blocks = 32, 4
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)
    cfg.tpb, cfg.max_blocks = saved
