"""GPU test gate. Without a GPU every test here skips (with the reason in the summary). On a
machine WITH a GPU nothing skips silently: convcore must import, be built with CUDA and see the
device, else the tests FAIL (a CPU-only build on a GPU machine is a broken setup, not a skip)."""
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))  # reference.py


def gpu_present():
    """Whether this machine has an NVIDIA GPU, asked of nvidia-smi and of torch (either is
    enough), never of convcore itself (whose CUDA support is what is being tested)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
            if "GPU" in out:
                return True
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


GPU = gpu_present()
NO_GPU_REASON = "no NVIDIA GPU on this machine (nvidia-smi and torch see none)"


def require_cuda_convcore():
    """On a GPU machine: convcore with its CUDA backend, seeing the GPU; pytest.fail otherwise."""
    try:
        import convcore
    except ImportError as e:
        pytest.fail(f"a GPU is present but convcore does not import: {e}")
    cuda = convcore.build_info().get("cuda", "unknown")
    if convcore.cuda_device_count() == 0:
        hint = ("rebuild with -DCONVCORE_CUDA=ON" if not cuda.startswith("yes") else
                "the CUDA driver or the device is not usable by convcore (CUDA_VISIBLE_DEVICES?)")
        pytest.fail(f"a GPU is present but convcore sees no CUDA device (build info: cuda: {cuda}): "
                    f"{hint}")
    return convcore


@pytest.fixture(scope="session")
def cc():
    """convcore, checked as require_cuda_convcore says (tests using it skip without a GPU)."""
    if not GPU:
        pytest.skip(NO_GPU_REASON)
    return require_cuda_convcore()


@pytest.fixture(scope="session")
def torch_cuda():
    """torch with CUDA: required on a GPU machine (the DLPack tests need a CUDA producer)."""
    if not GPU:
        pytest.skip(NO_GPU_REASON)
    try:
        import torch
    except ImportError:
        pytest.fail("a GPU is present but PyTorch is not installed (pip install torch)")
    if not torch.cuda.is_available():
        pytest.fail("a GPU is present but torch.cuda.is_available() is False (a CPU-only torch?)")
    return torch
