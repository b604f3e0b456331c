"""The committed erfc polynomial (GELU's in the fused epilogue) is what tools/gen_erfc.py generates
now; the generator re-verifies the polynomial's error bound before it writes. Skips when mpmath
is not installed (`pip install mpmath`; sympy brings it)."""
import pytest

from generated_files import regenerate

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it


def test_committed_erfc_polynomial_is_up_to_date(tmp_path):
    pytest.importorskip("mpmath", reason="tools/gen_erfc.py needs mpmath: pip install mpmath")
    stdout, _ = regenerate("gen_erfc.py", "cpp/common/generated/erfc_poly.hpp", tmp_path, 120)
    assert "relative error" in stdout and "verified" in stdout, stdout
