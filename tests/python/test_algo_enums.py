"""The algorithm enums: built at import from the compiled library's list, and visible to type
checkers through python/convcore/_algorithms.pyi, which tools/gen_algo_enums.py generates from
cpp/include/convcore/algorithms.def. Both must say what the .def says."""

import importlib.util
import os

import pytest

import convcore

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GENERATOR = os.path.join(REPO, "tools", "gen_algo_enums.py")
DEF = os.path.join(REPO, "cpp", "include", "convcore", "algorithms.def")
STUB = os.path.join(REPO, "python", "convcore", "_algorithms.pyi")
RERUN = "rerun `python tools/gen_algo_enums.py` and commit python/convcore/_algorithms.pyi"


@pytest.fixture(scope="module")
def gen():
    if not (os.path.exists(GENERATOR) and os.path.exists(DEF)):
        pytest.skip("not in a source checkout")
    spec = importlib.util.spec_from_file_location("gen_algo_enums", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def declared(gen):
    with open(DEF, encoding="utf-8") as f:
        return gen.parse(f.read())


def test_committed_stub_is_what_the_def_gives(gen, declared):
    with open(STUB, encoding="utf-8") as f:
        committed = f.read()
    assert committed == gen.render(declared), f"_algorithms.pyi is stale: {RERUN}"


@pytest.mark.parametrize("name", ["Algo", "BwdDataAlgo", "BwdFilterAlgo"])
def test_runtime_enum_is_what_the_def_gives(declared, name):
    """The enums the running library gives (convcore._enums builds them from its list) have the
    members and values of the .def, hence of the stub the type checkers read."""
    enum_cls = getattr(convcore, name)
    assert [(m.name, m.value) for m in enum_cls] == declared[name], (
        f"convcore.{name} (from the built library) differs from algorithms.def: rebuild the "
        f"library, or {RERUN}")


def test_members_as_before(declared):
    assert convcore.Algo.DIRECT.value == 0 and convcore.Algo["IM2COL_GEMM"] is convcore.Algo.IM2COL_GEMM
    assert convcore.BwdFilterAlgo.WINOGRAD_3X3_2X2.name == "WINOGRAD_3X3_2X2"
    assert convcore.Algo.__module__ == "convcore._enums"
    assert "convcoreConvolutionFwdAlgo_t" in convcore.Algo.__doc__


def test_generator_refuses_a_broken_def(gen):
    with pytest.raises(ValueError, match="expected 1"):
        gen.parse("CONVCORE_FORWARD(A, 0, a, CPU, 1e-5, 1e-12, true)\n"
                  "CONVCORE_FORWARD(B, 2, b, CPU, 1e-5, 1e-12, true)\n")
    with pytest.raises(ValueError, match="cannot parse"):
        gen.parse("CONVCORE_FORWARD(A 0)\n")
