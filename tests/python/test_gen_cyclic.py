"""tools/gen_cyclic.py reproduces the committed cpp/common/generated/cyclic_tables.hpp exactly.

The generator verifies every table with sympy's exact rational arithmetic before it writes
(the 2-D cyclic convolution and the overlap-save cross-correlation, for symbolic inputs), so a
header that matches its output is a verified header; one edited by hand fails here.
"""
import pytest

from generated_files import regenerate

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it


def test_generated_cyclic_tables_are_up_to_date(tmp_path):
    pytest.importorskip("sympy", reason="tools/gen_cyclic.py needs sympy (pip install sympy)")
    stdout, committed = regenerate("gen_cyclic.py", "cpp/common/generated/cyclic_tables.hpp",
                                   tmp_path, 600)
    # The exact checks the generator made, and the multiplication counts it reached.
    assert "C4F3: N=4 F=3: 22 multiplications per tile, 2x2 outputs; verified exactly" in stdout
    assert "C3F2: N=3 F=2: 13 multiplications" in stdout
    assert "9 of 9 outputs equal the cyclic convolution" in stdout  # the paper's Eqs. 33-34
    # CYCLIC_MINIMAL's 3-D form (cpu/cyclic_minimal_3d.cpp): the nesting, checked exactly, and
    # the count of the fully split construction it is compared with
    assert ("3-D nested C4F3Row x C4F3: 3x3x3 filter, 110 multiplications per 4x4x4 tile, 8 outputs"
            in stdout)
    assert "3-D nested C4F2Row x C4F2: 2x2x2 filter, 110 multiplications" in stdout
    assert "every factor pair split: 92 (1-D 5, 2-D 22; N=3: 13 in 2-D, 40 in 3-D)" in stdout
    assert committed.startswith("// GENERATED FILE: do not edit by hand.")
