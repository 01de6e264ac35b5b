"""Test setup shared by every core test: reproducible randomness and a clean global state per test."""
import numpy as np
import pytest

from tinygrad_core import Tensor


@pytest.fixture(autouse=True)
def fresh_state():
    Tensor.manual_seed(0)
    np.random.seed(0)
    training, no_grad = Tensor.training.value, Tensor.no_grad.value
    yield
    Tensor.training.value, Tensor.no_grad.value = training, no_grad
