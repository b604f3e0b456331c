"""tools/gen_cyclic.py reproduces the committed cpp/common/generated/cyclic_tables.hpp exactly.

The generator verifies every table with sympy's exact rational arithmetic before it writes
(the 2-D cyclic convolution and the overlap-save cross-correlation, for symbolic inputs), so a
header that matches its output is a verified header; one edited by hand fails here.
"""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pure_python  # no convcore code runs: make test's ASan run skips it

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "tools", "gen_cyclic.py")
COMMITTED = os.path.join(REPO, "cpp", "common", "generated", "cyclic_tables.hpp")


def test_generated_cyclic_tables_are_up_to_date(tmp_path):
    pytest.importorskip("sympy", reason="tools/gen_cyclic.py needs sympy (pip install sympy)")
    out = tmp_path / "cyclic_tables.hpp"
    run = subprocess.run([sys.executable, SCRIPT, "--output", str(out)], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    # The exact checks the generator made, and the multiplication counts it reached.
    assert "C4F3: N=4 F=3: 22 multiplications per tile, 2x2 outputs; verified exactly" in run.stdout
    assert "C3F2: N=3 F=2: 13 multiplications" in run.stdout
    assert "9 of 9 outputs equal the cyclic convolution" in run.stdout  # the paper's Eqs. 33-34
    # CYCLIC_MINIMAL's 3-D form (cpu/cyclic_minimal_3d.cpp): the nesting, checked exactly, and
    # the count of the fully split construction it is compared with
    assert ("3-D nested C4F3Row x C4F3: 3x3x3 filter, 110 multiplications per 4x4x4 tile, 8 outputs"
            in run.stdout)
    assert "3-D nested C4F2Row x C4F2: 2x2x2 filter, 110 multiplications" in run.stdout
    assert "every factor pair split: 92 (1-D 5, 2-D 22; N=3: 13 in 2-D, 40 in 3-D)" in run.stdout
    with open(COMMITTED) as fh:
        committed = fh.read()
    assert out.read_text() == committed, (
        "cpp/common/generated/cyclic_tables.hpp differs from what tools/gen_cyclic.py writes: "
        "rerun `python tools/gen_cyclic.py` (never edit the header by hand)")
    assert committed.startswith("// GENERATED FILE: do not edit by hand.")
