"""Paths shared by the profiler tests (a module of its own: test files never import conftest)."""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
SIMULATOR_DIR = os.path.join(HERE, "simulator")
# DEVICE SIMULATOR: the benchmark_model stand-in pushed to simulated phones.
SIM_BENCHMARK_MODEL = os.path.join(SIMULATOR_DIR, "fake_benchmark_model.py")
# DEVICE SIMULATOR: the benchmark_litert_model (CompiledModel) stand-in; its name tells the profiler which tool it is.
SIM_BENCHMARK_LITERT_MODEL = os.path.join(SIMULATOR_DIR, "fake_benchmark_litert_model.py")
FIXTURES = os.path.join(HERE, "fixtures", "benchmark_model")
