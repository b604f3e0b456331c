import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py

import convcore  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def pytest_report_header(config):
    return [f"convcore {convcore.__version__} from {convcore.cmake_prefix_path()}",
            "convcore build: " + ", ".join(f"{k}={v}" for k, v in convcore.build_info().items()
                                           if k in ("blas", "fft", "cuda"))]
