"""Issue 7 benchmark harness: our exports against the official ones, one pinned core, one run.

Entry point: ``python -m benchmarks.perf.run --help`` (see ``run.py``). Peers
are installed by ``benchmarks/perf/setup_peers.sh``, never by the package.
"""
