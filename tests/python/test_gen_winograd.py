"""The committed Winograd tables are what tools/gen_winograd.py generates now.

CI does not run the generator; this test reruns it into a temporary directory (which also
re-verifies every table exactly) and compares the result with the committed header byte for
byte. Skips when wincnn or sympy is not installed (`pip install wincnn sympy`).
"""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "gen_winograd.py")
COMMITTED = os.path.join(REPO, "cpp", "common", "generated", "winograd_tables.hpp")


def test_committed_winograd_tables_are_up_to_date(tmp_path):
    pytest.importorskip("sympy", reason="tools/gen_winograd.py needs sympy: pip install sympy")
    pytest.importorskip("wincnn", reason="tools/gen_winograd.py needs wincnn: pip install wincnn")
    out = tmp_path / "winograd_tables.hpp"
    res = subprocess.run([sys.executable, SCRIPT, "--output", str(out)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, f"generator failed:\n{res.stdout}\n{res.stderr}"
    for table in ("F2x3", "F4x3", "F3x2", "F2x3s2", "F4x3s2"):
        assert f"{table}: " in res.stdout and "verified exactly" in res.stdout, res.stdout
    with open(COMMITTED, encoding="utf-8") as f:
        committed = f.read()
    assert out.read_text(encoding="utf-8") == committed, (
        "cpp/common/generated/winograd_tables.hpp is stale: rerun `python tools/gen_winograd.py` "
        "and commit the result")
    assert committed.startswith("// GENERATED FILE: do not edit by hand.")
