#!/usr/bin/env python3
"""Generate python/convcore/_algorithms.pyi, the type checkers' view of convcore's algorithm enums,
from the one list of algorithms (cpp/include/convcore/algorithms.def).

At run time convcore.Algo, convcore.BwdDataAlgo and convcore.BwdFilterAlgo are built from the
compiled library's own list (convcore/_enums.py); a type checker cannot see members made that
way, so _enums.py imports these classes under typing.TYPE_CHECKING instead. This script writes them,
one member per line of the .def, with its value (the .def's comments stay there: editing one
does not make this file stale).

tests/python/test_algo_enums.py fails while the committed file differs from what this script
writes, and while the enums of the built library differ from the .def: after adding an algorithm
to algorithms.def, rerun this script and commit its output.

Usage:  python tools/gen_algo_enums.py [--def FILE] [--output FILE] [--check]
Needs:  nothing but Python.
"""
import argparse
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DEF = os.path.join(REPO, "cpp", "include", "convcore", "algorithms.def")
DEFAULT_OUTPUT = os.path.join(REPO, "python", "convcore", "_algorithms.pyi")

# The .def's macro of each pass -> the Python enum and what its docstring says.
ENUMS = (
    ("CONVCORE_FORWARD", "Algo", "The forward algorithms (convcoreConvolutionFwdAlgo_t)."),
    ("CONVCORE_BACKWARD_DATA", "BwdDataAlgo",
     "The backward-data algorithms (convcoreConvolutionBwdDataAlgo_t)."),
    ("CONVCORE_BACKWARD_FILTER", "BwdFilterAlgo",
     "The backward-filter algorithms (convcoreConvolutionBwdFilterAlgo_t)."),
)

_LINE = re.compile(r"^\s*(CONVCORE_[A-Z_]+)\(\s*([A-Z0-9_]+)\s*,\s*(\d+)\s*,[^)]*\)\s*(?:/\*.*\*/)?\s*$")


def parse(text):
    """{enum name: [(member, value)]} in the order of the .def's lines. Raises
    ValueError on a line that names a pass macro but does not parse, or on values that are not
    0, 1, 2, ... in order (the C enums' rule, which the build checks too)."""
    macros = {macro: name for macro, name, _ in ENUMS}
    enums = {name: [] for _, name, _ in ENUMS}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped.startswith(tuple(m + "(" for m in macros)):
            continue
        m = _LINE.match(line)
        if m is None or m.group(1) not in macros:
            raise ValueError(f"algorithms.def:{number}: cannot parse {stripped!r}")
        members = enums[macros[m.group(1)]]
        value = int(m.group(3))
        if value != len(members):
            raise ValueError(f"algorithms.def:{number}: {m.group(2)} has value {value}, expected "
                             f"{len(members)} (values are 0, 1, 2, ... in the order of the lines)")
        members.append((m.group(2), value))
    for name, members in enums.items():
        if not members:
            raise ValueError(f"algorithms.def: no {name} algorithm found")
    return enums


def render(enums):
    """The text of _algorithms.pyi."""
    out = ["# GENERATED FILE: do not edit by hand. Written by tools/gen_algo_enums.py from",
           "# cpp/include/convcore/algorithms.def; rerun it after changing that file",
           "# (tests/python/test_algo_enums.py fails while this file is stale).",
           '"""The algorithm enums as type checkers see them. At run time convcore._enums builds them',
           'from the compiled library\'s list, which is made from the same .def."""',
           "",
           "import enum"]
    for _, name, doc in ENUMS:
        out += ["", "", f"class {name}(enum.Enum):", f'    """{doc}"""', ""]
        for member, value in enums[name]:
            out.append(f"    {member} = {value}")
    return "\n".join(out) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--def", dest="def_path", default=DEFAULT_DEF, help="algorithms.def")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="the .pyi to write")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the output is stale")
    args = parser.parse_args(argv)
    with open(args.def_path, encoding="utf-8") as f:
        text = render(parse(f.read()))
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print(f"{args.output} is stale: run python tools/gen_algo_enums.py", file=sys.stderr)
            return 1
        return 0
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
