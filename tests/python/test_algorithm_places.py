"""Every place outside an algorithm's own files that must know it learns it from the one list,
cpp/include/convcore/algorithms.def, or is checked against it here: a new line there without
its documentation, its tests or its Python name fails this file.

What is derived rather than checked: the C enums, the registry, the C API's names and
convcoreGetAlgorithmInfo (from the .def by the preprocessor); the ISA re-runs of the test
programs named after an algorithm (tests/cpp/CMakeLists.txt reads the .def); the exact and
transform lists of the NaN test and of the fuzz oracle (from the declared error bounds); the
prepared-filter test (every forward algorithm); selection (an algorithm without a model is
timed)."""
import os
import re

import convcore

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PASSES = {"FORWARD": "FWD", "BACKWARD_DATA": "BWD_DATA", "BACKWARD_FILTER": "BWD_FILTER"}


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def def_lines():
    """[(pass, NAME, enum value)] of algorithms.def, in its order."""
    lines = re.findall(r"^CONVCORE_(FORWARD|BACKWARD_DATA|BACKWARD_FILTER)\(\s*([A-Z0-9_]+),\s*(\d+)",
                       read("cpp", "include", "convcore", "algorithms.def"), re.M)
    assert len(lines) >= 13 + 2 * 8, "algorithms.def could not be read"
    return [(p, name, int(v)) for p, name, v in lines]


LINES = def_lines()
FORWARD = [name for p, name, _ in LINES if p == "FORWARD"]


def test_python_enums_are_the_list():
    enums = {"FORWARD": convcore.Algo, "BACKWARD_DATA": convcore.BwdDataAlgo,
             "BACKWARD_FILTER": convcore.BwdFilterAlgo}
    for pass_, enum in enums.items():
        declared = [(name, v) for p, name, v in LINES if p == pass_]
        members = [(m.name, m.value) for m in enum if m.value >= 0]
        assert members == declared, pass_


def test_docs_have_a_section_per_algorithm_in_the_list_order():
    doc = read("docs", "algorithms.md")
    headings = re.findall(r"^## ([A-Z0-9_]+)\b", doc, re.M)
    assert [h for h in headings if h in FORWARD] == FORWARD, \
        "docs/algorithms.md needs one '## NAME' section per forward algorithm, in algorithms.def's order"
    backward = doc[doc.index("## Backward passes"):]
    for p, name, _ in LINES:
        if p != "FORWARD":
            assert name in backward, f"{name} ({p}) is not in docs/algorithms.md's 'Backward passes'"


def test_every_algorithm_has_cpp_tests_that_name_it():
    """Forward algorithms and backward ones with their own code; a backward pass by reduction to
    a forward algorithm (VIA_FORWARD) is covered by test_backward.cpp's loop over every
    algorithm of the pass."""
    tests = {f: read("tests", "cpp", f) for f in os.listdir(os.path.join(ROOT, "tests", "cpp"))
             if f.startswith("test_") and f.endswith(".cpp") and not f.startswith("test_cuda_")}
    assert "_ALGO_COUNT; ++ai)" in tests["test_backward.cpp"]
    own = set(re.findall(r"^CONVCORE_BACKWARD_(?:DATA|FILTER)\(\s*([A-Z0-9_]+),\s*\d+,\s*OWN",
                         read("cpp", "include", "convcore", "algorithms.def"), re.M))
    for p, name, _ in LINES:
        if p != "FORWARD" and name not in own:
            continue
        constant = f"CONVCORE_{PASSES[p]}_ALGO_{name}"
        family = re.sub(r"_\d+x\d+_\d+x\d+$", "", name.lower())
        named = [f for f, text in tests.items() if constant in text or f.startswith(f"test_{family}")]
        assert named, f"no tests/cpp/test_*.cpp names {constant}"


def test_forward_algorithms_have_a_test_program_of_their_name_or_family():
    programs = [f[:-4] for f in os.listdir(os.path.join(ROOT, "tests", "cpp")) if f.startswith("test_")]
    families = {"FFT_TILING": "fft", "FINE_GRAINED_FFT": "fft", "POLY_HANKEL": "fft"}  # test_fft_family
    for name in FORWARD:
        family = families.get(name, re.sub(r"_\d+x\d+_\d+x\d+$", "", name.lower()))
        assert any(p.startswith(f"test_{family}") for p in programs), \
            f"{name}: no tests/cpp/test_{family}*.cpp (its tests are found by its name)"


def test_headers_copy_no_list():
    """convcore.h makes its enums from the .def; a hand-copied 'NAME = value' list in its
    comments goes stale (it once lacked DEPTHWISE and POINTWISE)."""
    header = read("cpp", "include", "convcore", "convcore.h")
    comments = " ".join(re.findall(r"/\*.*?\*/", header, re.S))
    copied = [name for _, name, v in LINES if re.search(rf"\b_?{name} = {v}\b", comments)]
    assert not copied, f"convcore.h's comments copy algorithms.def: {copied}"


def test_readme_says_what_adding_an_algorithm_takes():
    readme = read("README.md")
    assert re.search(r"^Adding an algorithm", readme, re.M)
    paragraph = readme[readme.index("Adding an algorithm"):].split("\n\n")[0]
    for must in ("algorithms.def", "cpp/cpu/", "tests/cpp/test_", "docs/algorithms.md"):
        assert must in paragraph, must
