"""The installed package carries a CMake config: a C++ project finds it and links it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import convcore

CONSUMER = Path(__file__).resolve().parents[1] / "consumer"


def _cmake():
    here = Path(sys.executable).parent / "cmake"
    return str(here) if here.exists() else shutil.which("cmake")


def test_find_package_consumer_builds_and_runs(tmp_path):
    cmake = _cmake()
    assert cmake, "cmake is needed to build tests/consumer"
    prefix = convcore.cmake_prefix_path()
    assert (Path(prefix) / "lib" / "cmake" / "convcore" / "convcoreConfig.cmake").exists()
    build = tmp_path / "build"
    env = dict(os.environ)
    subprocess.run([cmake, "-S", str(CONSUMER), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"],
                   check=True, capture_output=True, env=env)
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True, env=env)
    run = subprocess.run([str(build / "consumer")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "centre 18.0" in run.stdout
    # 1-D, 2-D and 3-D, every pass, and transposed convolutions through the cache (main.cpp)
    assert "every pass through the cache: right, hits 21, misses 21" in run.stdout, run.stdout
    for case in ("1-D forward", "2-D strided backward filter", "3-D strided backward data", "3-D transposed"):
        assert case + ": " in run.stdout, run.stdout
    run_c = subprocess.run([str(build / "consumer_c")], capture_output=True, text=True)
    assert run_c.returncode == 0, run_c.stdout + run_c.stderr
    assert "WINOGRAD_4X4_3X3 0.0005" in run_c.stdout
    assert "cached call: " in run_c.stdout and "hits 1, misses 1" in run_c.stdout, run_c.stdout
