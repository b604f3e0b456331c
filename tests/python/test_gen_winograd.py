"""The committed Winograd tables are what tools/gen_winograd.py generates now.

CI does not run the generator; this test reruns it into a temporary directory (which also
re-verifies every table exactly) and compares the result with the committed header byte for
byte. Skips when wincnn or sympy is not installed (`pip install wincnn sympy`).
"""
import pytest

from generated_files import regenerate

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it


def test_committed_winograd_tables_are_up_to_date(tmp_path):
    pytest.importorskip("sympy", reason="tools/gen_winograd.py needs sympy: pip install sympy")
    pytest.importorskip("wincnn", reason="tools/gen_winograd.py needs wincnn: pip install wincnn")
    stdout, committed = regenerate("gen_winograd.py", "cpp/common/generated/winograd_tables.hpp",
                                   tmp_path, 300)
    for table in ("F2x3", "F4x3", "F3x2", "F2x3s2", "F4x3s2"):
        assert f"{table}: " in stdout and "verified exactly" in stdout, stdout
    assert committed.startswith("// GENERATED FILE: do not edit by hand.")
