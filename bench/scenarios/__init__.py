"""Scenarios: each module has ``NAME``, ``TITLE`` and ``run(ctx)``, which measures and passes
one dict per measurement to ``ctx.emit`` (see :mod:`bench.context`). Register new ones here."""

from __future__ import annotations

from bench.scenarios import replay, storage

SCENARIOS = {m.NAME: m for m in (replay, storage)}

__all__ = ["SCENARIOS"]
