import os

import pytest
import torch
from hypothesis import settings

# CI (CI=true) replays the same hypothesis examples on every run, so a submission's result does
# not depend on a random draw; locally hypothesis keeps exploring new examples.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield
