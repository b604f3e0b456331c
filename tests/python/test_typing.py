"""The package is typed: mypy passes on python/convcore (configuration: [tool.mypy] in
pyproject.toml), the public API is annotated, and the wheel ships the typing files (py.typed, the
.pyi stubs)."""

import inspect
import os
import subprocess
import sys

import pytest

import convcore

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(REPO, "python", "convcore")
TYPING_FILES = ("py.typed", "_algorithms.pyi", "_convcore.pyi")


def source_checkout():
    if not os.path.isfile(os.path.join(REPO, "pyproject.toml")) or not os.path.isdir(PACKAGE):
        pytest.skip("not in a source checkout")


@pytest.mark.pure_python
def test_mypy_passes():
    source_checkout()
    pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy; `make venv` "
                                       "installs it)")
    out = _mypy()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success" in out.stdout


def _mypy(*args, cwd=REPO):
    """mypy with the project's configuration (not under the sanitizers' preload of the
    asan-pytest stage: it checks sources only)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env["MYPYPATH"] = os.path.join(REPO, "python")
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                           os.path.join(REPO, "pyproject.toml"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.pure_python
def test_enum_members_are_visible_to_type_checkers(tmp_path):
    """A user's code that names an algorithm type-checks; a misspelt one does not."""
    source_checkout()
    pytest.importorskip("mypy", reason="mypy is not installed")
    good = tmp_path / "good.py"
    good.write_text("import convcore\n"
                    "a: convcore.Algo = convcore.Algo.WINOGRAD_4X4_3X3\n"
                    "b: convcore.BwdDataAlgo = convcore.BwdDataAlgo.DEPTHWISE\n"
                    "c: convcore.BwdFilterAlgo = convcore.BwdFilterAlgo.WINOGRAD_3X3_2X2\n"
                    "y = convcore.conv2d(None, None, algo=a)\n")
    out = _mypy(str(good), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import convcore\nconvcore.Algo.WINOGRAD_9X9_3X3\n")
    out = _mypy(str(bad), cwd=tmp_path)
    assert out.returncode == 1 and 'has no attribute "WINOGRAD_9X9_3X3"' in out.stdout, out.stdout


def _public_callables():
    """(qualified name, function) of every public function and method of convcore and
    convcore.torch, and of the entry points of convcore's commands."""
    import convcore.cli
    import convcore.model_bench
    modules = [(convcore, convcore.__all__)]
    torch = pytest.importorskip("torch")
    assert torch
    import convcore.torch
    modules.append((convcore.torch, convcore.torch.__all__))
    modules.append((convcore.cli, ["main", "build_parser", "cmd_bench", "cmd_info", "bench_problem",
                                   "format_table"]))
    modules.append((convcore.model_bench, ["run", "command", "bench_model", "format_model"]))
    for module, names in modules:
        for name in names:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj) and not issubclass(obj, BaseException):
                if obj.__module__ == "convcore._enums" and name in ("Algo", "BwdDataAlgo", "BwdFilterAlgo"):
                    continue  # enums made at run time; their members are in _algorithms.pyi
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr not in ("__init__", "__new__"):
                        continue
                    if isinstance(member, property):
                        for fn in (member.fget, member.fset):
                            if fn is not None:
                                yield f"{module.__name__}.{name}.{attr}", fn
                    elif inspect.isfunction(member):
                        yield f"{module.__name__}.{name}.{attr}", member


def test_public_api_is_annotated():
    missing = []
    for qualname, fn in _public_callables():
        signature = inspect.signature(fn)
        for param in signature.parameters.values():
            if param.name not in ("self", "cls") and param.annotation is inspect.Parameter.empty:
                missing.append(f"{qualname}: parameter {param.name}")
        if signature.return_annotation is inspect.Signature.empty:
            missing.append(f"{qualname}: return")
    assert not missing, "unannotated:\n" + "\n".join(missing)


def test_typing_files_ship():
    """py.typed and the stubs are in the package directory, which the wheel takes whole
    (scikit-build-core's wheel.packages), and no wheel.exclude pattern drops them."""
    source_checkout()
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11's tomllib reads pyproject.toml")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        wheel = tomllib.load(f)["tool"]["scikit-build"]["wheel"]
    assert "python/convcore" in wheel["packages"]
    import fnmatch
    for name in TYPING_FILES:
        assert os.path.isfile(os.path.join(PACKAGE, name)), name
        installed = f"{wheel.get('install-dir', 'convcore')}/{name}"
        assert not any(fnmatch.fnmatch(installed, pattern) for pattern in wheel.get("exclude", [])), name
