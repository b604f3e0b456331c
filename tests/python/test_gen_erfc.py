"""The committed erfc polynomial (GELU's in the fused epilogue) is what tools/gen_erfc.py generates
now: this test reruns the generator (which re-verifies the polynomial's error bound) into a
temporary directory and compares the result with the committed header byte for byte. Skips when
mpmath is not installed (`pip install mpmath`; sympy brings it)."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "gen_erfc.py")
COMMITTED = os.path.join(REPO, "cpp", "common", "generated", "erfc_poly.hpp")


def test_committed_erfc_polynomial_is_up_to_date(tmp_path):
    pytest.importorskip("mpmath", reason="tools/gen_erfc.py needs mpmath: pip install mpmath")
    out = tmp_path / "erfc_poly.hpp"
    res = subprocess.run([sys.executable, SCRIPT, "--output", str(out)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, f"generator failed:\n{res.stdout}\n{res.stderr}"
    assert "verified" in res.stdout, res.stdout
    with open(COMMITTED, encoding="utf-8") as f:
        committed = f.read()
    assert out.read_text(encoding="utf-8") == committed, "rerun tools/gen_erfc.py and commit its output"
