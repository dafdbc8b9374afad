"""Benchmarks of gpu_ivm: ``python -m bench [--quick | --full] [--only NAME ...] [--out DIR]``.

Modules, one job each:

- :mod:`bench.cli` parses the command line; :mod:`bench.runner` runs the scenarios and
  regenerates the report;
- :mod:`bench.config` holds the profiles (tiny / quick / full sizes);
- :mod:`bench.system_base` holds the small :class:`~bench.system_base.System` interface and the
  recount-per-batch base; :mod:`bench.systems` holds the systems under test (gpu_ivm
  configurations, recount-per-batch) and registers the peers of :mod:`bench.peers`;
- :mod:`bench.scenarios` holds the measurements (``replay``, ``storage``), each yielding plain
  dict records;
- :mod:`bench.results` writes and reads the JSON-lines result files;
- :mod:`bench.stats` summarizes timing samples; :mod:`bench.machine` collects machine facts,
  load average and resident memory;
- :mod:`bench.goals` checks the project's targets; :mod:`bench.plots` draws the figures;
  :mod:`bench.report` writes ``docs/benchmarks.md``.
"""
