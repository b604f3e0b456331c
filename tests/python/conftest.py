import os
import sys
import tempfile

import pytest

# "auto" and "find" record their timings in the find-db: the tests keep theirs out of the
# user's (tests that need a db of their own set CONVCORE_FIND_DB themselves).
os.environ.setdefault("CONVCORE_FIND_DB", os.path.join(tempfile.mkdtemp(prefix="convcore-tests-"),
                                                       "find-db.txt"))

sys.path.insert(0, os.path.dirname(__file__))  # reference.py

import convcore  # noqa: E402


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny problems: one thread for convcore and torch (a module's tests ask with
    pytestmark = pytest.mark.usefixtures("one_thread")). OpenMP barriers on a loaded 2-core
    machine cost milliseconds per call, which would make gradcheck take minutes."""
    torch = pytest.importorskip("torch")
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    convcore.set_num_threads(1)
    yield
    convcore.set_num_threads(0)
    torch.set_num_threads(torch_threads)


def pytest_report_header(config):
    return [f"convcore {convcore.__version__} from {convcore.cmake_prefix_path()}",
            "convcore build: " + ", ".join(f"{k}={v}" for k, v in convcore.build_info().items()
                                           if k in ("blas", "fft", "cuda"))]
