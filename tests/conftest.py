"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small models: one torch thread is faster, and much faster on a busy machine (restored afterwards)."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def ray_session():
    """A local Ray with RLlib for the module's tests (skipped where ray[rllib] is not installed: CI's second
    environment has it), shut down after them."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.rllib")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield
    ray.shutdown()
