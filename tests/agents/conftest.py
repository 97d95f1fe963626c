"""Agent tests run single-threaded (small networks are fastest on one thread; the CI box is shared)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
