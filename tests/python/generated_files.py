"""The check shared by the generated-file tests (test_gen_*.py): a tool in tools/ rerun into a
temporary directory (where it re-verifies what it generates) and its output compared with the
committed file byte for byte. No convcore code runs here."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def regenerate(tool, committed, tmp_path, timeout):
    """Runs ``python tools/<tool> --output <tmp>``; asserts it succeeded and wrote what
    ``committed`` (a path relative to the repository) holds. Returns the tool's stdout and the
    committed text."""
    out = tmp_path / os.path.basename(committed)
    run = subprocess.run([sys.executable, os.path.join(REPO, "tools", tool), "--output", str(out)],
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"tools/{tool} failed:\n{run.stdout}\n{run.stderr}"
    with open(os.path.join(REPO, committed), encoding="utf-8") as f:
        text = f.read()
    assert out.read_text(encoding="utf-8") == text, (
        f"{committed} differs from what tools/{tool} writes: rerun `python tools/{tool}` and commit "
        f"its output (never edit the file by hand)")
    return run.stdout, text
