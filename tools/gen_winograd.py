#!/usr/bin/env python3
"""Generate convcore's Winograd transform tables (cpp/common/generated/winograd_tables.hpp).

Each table F(m, r) (m outputs of an r-tap filter, tile alpha = m + r - 1) comes from wincnn's
Cook-Toom construction (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks",
Sec. 4) for the interpolation points listed below, and is verified EXACTLY with sympy's
rational arithmetic before anything is written:

  1-D: A^T [(G g) (.) (B^T d)] == the direct correlation y_i = sum_j d_{i+j} g_j for symbolic
       d_0..d_{alpha-1}, g_0..g_{r-1};
  2-D: A^T [(G g G^T) (.) (B^T d B)] A == y_ij = sum_uv d_{i+u, j+v} g_uv (the nesting of
       Lavin's Eq. 8, checked too, although it follows from the 1-D identity).

The stride-2 tables (names ending in "s2") are a 3-tap filter's polyphase split built from
F(m, 2) (stride2_composition), checked the same way against y_i = sum_j d_{2i+j} g_j.

A table that fails either check aborts the run with nothing written. The float32 and float64
literals are the correctly rounded values of the exact rationals (which are listed in a
comment next to each table).

The script also re-checks the matrices printed in the paper (Eqs. 7, 14, 15) and reports, on
stdout, which ones hold; that report does not affect the generated file.

Usage:  python tools/gen_winograd.py [--output FILE] [--points-4x3 "0,1,-1,2,-2"]
Needs:  pip install wincnn sympy
"""
import argparse
import os
import sys
from fractions import Fraction

import sympy
import wincnn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO, "cpp", "common", "generated", "winograd_tables.hpp")

# (C++ name, m, r, interpolation points, what it is for); a name ending in "s2" is the stride-2
# form of a 3-tap filter built from F(m, r=2) (stride2_composition)
# F(4,3): the paper's points are 0, +-1, +-2 (Eq. 15). 0, 1, -1, 2, -1/2 measured 2.5x smaller
# max abs error (1.5x smaller relative L2 error) in float32 on Lavin's VGG layers with
# convcore's WINOGRAD_4X4_3X3 (docs/algorithms.md has the table), at the same speed; +-1/2
# instead of +-2 was no better. Rerun with --points-4x3 to compare.
DEFAULT_POINTS_4X3 = "0,1,-1,2,-1/2"
TABLES = [
    ("F2x3", 2, 3, "0,1,-1", "F(2,3): WINOGRAD_2X2_3X3 nests it as F(2x2,3x3), 4x4 tiles"),
    ("F4x3", 4, 3, None, "F(4,3): WINOGRAD_4X4_3X3 nests it as F(4x4,3x3), 6x6 tiles"),
    ("F3x2", 3, 2, "0,1,-1", "F(3,2): F(3x3,2x2) for the filter gradient (Lavin Sec. 4.2)"),
    # Stride 2 (cpu/winograd_1d.cpp, cpu/winograd_nhwc.hpp): F(m,2) on the even inputs with the
    # taps 0 and 2, composed into a 3-tap algorithm (stride2_composition). F(4,2)'s points:
    # 0, 1, -1, -1/2 had a 1.3x smaller max error in float32 than 0, 1, -1, 2 on 512-channel
    # layers (both about 9e-7 relative L2, direct 3e-7).
    ("F2x3s2", 2, 2, "0,1", "F(2,3) at stride 2: WINOGRAD_2X2_3X3 on stride-2 filters, F(2,2) on the even inputs"),
    ("F4x3s2", 4, 2, "0,1,-1,-1/2",
     "F(4,3) at stride 2: WINOGRAD_4X4_3X3 on stride-2 filters, F(4,2) on the even inputs"),
]


def parse_points(text):
    return [sympy.Rational(p.strip()) for p in text.split(",")]


def verify(AT, G, BT, m, r, stride=1):
    """Exact 1-D and 2-D checks of y = AT [(G g) (.) (BT d)] against the correlation with the
    given stride; returns a list of failures (empty when the table is right)."""
    alpha, n = G.rows, (m - 1) * stride + r  # products; inputs per tile
    errors = []
    if AT.shape != (m, alpha) or G.shape != (alpha, r) or BT.shape != (alpha, n):
        return [f"shapes AT{AT.shape} G{G.shape} BT{BT.shape} for m={m} r={r} stride={stride}"]
    d = sympy.Matrix(n, 1, sympy.symbols(f"d0:{n}"))
    g = sympy.Matrix(r, 1, sympy.symbols(f"g0:{r}"))
    y = AT * (G * g).multiply_elementwise(BT * d)
    for i in range(m):
        want = sum(d[stride * i + j] * g[j] for j in range(r))
        if sympy.expand(y[i] - want) != 0:
            errors.append(f"1-D output {i}: {sympy.expand(y[i])} != {want}")
    D = sympy.Matrix(n, n, lambda i, j: sympy.Symbol(f"d{i}_{j}"))
    Gf = sympy.Matrix(r, r, lambda i, j: sympy.Symbol(f"g{i}_{j}"))
    Y = AT * (G * Gf * G.T).multiply_elementwise(BT * D * BT.T) * AT.T
    for i in range(m):
        for j in range(m):
            want = sum(D[stride * i + u, stride * j + v] * Gf[u, v] for u in range(r) for v in range(r))
            if sympy.expand(Y[i, j] - want) != 0:
                errors.append(f"2-D output ({i},{j}) differs from the direct correlation")
    return errors


def stride2_composition(AT, G, BT, m):
    """A 3-tap filter at stride 2 from F(m,2)'s tables (the polyphase split; the decomposable
    Winograd method, Huang et al., "DWM", AAAI 2020). y_t = g0 d_2t + g1 d_2t+1 + g2 d_2t+2: the
    even inputs d_0, d_2, ..., d_2m meet the 2-tap filter (g0, g2) through F(m,2), its m + 1
    products first; then the odd inputs d_2t+1 meet g1 alone, m products, each added to output t.
    A tile reads n = 2m + 1 inputs and makes alpha = 2m + 1 products (3m by the definition)."""
    e, alpha = m + 1, 2 * m + 1
    AT3, G3, BT3 = sympy.zeros(m, alpha), sympy.zeros(alpha, 3), sympy.zeros(alpha, alpha)
    for xi in range(e):
        for i in range(e):
            BT3[xi, 2 * i] = BT[xi, i]
        G3[xi, 0], G3[xi, 2] = G[xi, 0], G[xi, 1]
        for i in range(m):
            AT3[i, xi] = AT[i, xi]
    for t in range(m):
        BT3[e + t, 2 * t + 1] = 1
        G3[e + t, 1] = 1
        AT3[t, e + t] = 1
    return AT3, G3, BT3


# ---- correctly rounded literals ------------------------------------------------------------

def nearest_binary(q, mant_bits, min_exp):
    """The binary floating-point value nearest to the rational q (ties to even), as a Fraction.
    mant_bits counts the implicit bit (24 for float32, 53 for float64); no overflow handling
    (the tables are small numbers)."""
    q = Fraction(q)
    if q == 0:
        return Fraction(0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, min_exp)  # subnormals share the smallest exponent
    ulp = Fraction(2) ** (e - mant_bits + 1)
    n, rem = divmod(a, ulp)
    n = int(n)
    if rem * 2 > ulp or (rem * 2 == ulp and n % 2 == 1):
        n += 1
    return sign * n * ulp


def c_literal(q, is_float):
    """A C++ literal that parses to the correctly rounded value of q."""
    v = nearest_binary(q, 24, -126) if is_float else nearest_binary(q, 53, -1022)
    if v.denominator == 1 and abs(v) < 2**24:
        text = f"{int(v)}.0"
    else:
        text = repr(float(v))  # shortest repr of the double; exact for a float32 value too
        if is_float:
            # Shortest decimal that still rounds to v in float32.
            for digits in range(1, 18):
                cand = f"{float(v):.{digits}g}"
                if nearest_binary(Fraction(cand), 24, -126) == v:
                    text = cand
                    break
        if "e" not in text and "." not in text:
            text += ".0"
    return text + ("f" if is_float else "")


def c_array(name, M, ctype, indent):
    """`name[rows][cols] = {...}`, one matrix row per line."""
    is_float = ctype == "float"
    rows = []
    for i in range(M.rows):
        cells = ", ".join(c_literal(Fraction(int(M[i, j].p), int(M[i, j].q)), is_float)
                          for j in range(M.cols))
        rows.append(" " * (indent + 4) + "{" + cells + "}")
    return f"{name}[{M.rows}][{M.cols}] = {{\n" + ",\n".join(rows) + "}"


def exact_comment(label, M):
    width = max(len(str(M[i, j])) for i in range(M.rows) for j in range(M.cols))
    lines = [f"//   {label} ="]
    for i in range(M.rows):
        lines.append("//     [" + " ".join(str(M[i, j]).rjust(width) for j in range(M.cols)) + "]")
    return lines


def emit_table(cname, m, r, stride, points, purpose, AT, G, BT):
    alpha = G.rows
    pts = ", ".join(str(p) for p in points)
    out = [f"// {purpose}.",
           f"// Interpolation points {pts} (and infinity); exact values (wincnn, verified):"]
    for label, M in (("AT", AT), ("G", G), ("BT", BT)):
        out += exact_comment(label, M)
    out.append(f"struct {cname} {{")
    out.append(f"    static constexpr int m = {m}, r = {r}, alpha = {alpha}, stride = {stride};")
    for ctype, suffix in (("float", "f32"), ("double", "f64")):
        for label, M in (("AT", AT), ("G", G), ("BT", BT)):
            out.append(f"    static constexpr {ctype} {c_array(label + '_' + suffix, M, ctype, 4)};")
    # Host+device accessors: nvcc lets device code read a host constexpr array only in a
    # constant expression, so each accessor carries its own copy of the table.
    out.append("    // Element accessors usable from host and device code: at<T>(i, j).")
    for label, M in (("AT", AT), ("G", G), ("BT", BT)):
        fn = label.lower()
        out.append("    template <typename T>")
        out.append(f"    CONVCORE_HD static constexpr T {fn}(int i, int j) {{")
        out.append("        if (sizeof(T) == sizeof(float)) {")
        out.append(f"            constexpr float {c_array('t', M, 'float', 12)};")
        out.append("            return T(t[i][j]);")
        out.append("        }")
        out.append(f"        constexpr double {c_array('t', M, 'double', 8)};")
        out.append("        return T(t[i][j]);")
        out.append("    }")
    out.append("    // The tables by element type: table<T>::AT, ::G, ::BT (host code).")
    out.append("    template <typename T, bool = sizeof(T) == sizeof(float)>")
    out.append("    struct table {")
    for label in ("AT", "G", "BT"):
        out.append(f"        static constexpr const auto& {label} = {label}_f32;")
    out.append("    };")
    out.append("    template <typename T>")
    out.append("    struct table<T, false> {")
    for label in ("AT", "G", "BT"):
        out.append(f"        static constexpr const auto& {label} = {label}_f64;")
    out.append("    };")
    out.append("};")
    return out


def paper_report():
    """Checks the matrices printed in Lavin & Gray; returns report lines."""
    R = sympy.Rational
    paper = {
        "Eq. 7 F(2,3)": (2, 3,
                         sympy.Matrix([[1, 1, 1, 0], [0, 1, -1, -1]]),
                         sympy.Matrix([[1, 0, 0], [R(1, 2), R(1, 2), R(1, 2)],
                                       [R(1, 2), R(-1, 2), R(1, 2)], [0, 0, 1]]),
                         sympy.Matrix([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])),
        "Eq. 14 F(3,2)": (3, 2,
                          sympy.Matrix([[1, 1, 1, 0], [0, 1, -1, 0], [0, 1, 1, 1]]),
                          sympy.Matrix([[1, 0], [R(1, 2), R(1, 2)], [R(1, 2), R(-1, 2)], [0, 1]]),
                          sympy.Matrix([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, 0, 1]])),
        "Eq. 15 F(4,3)": (4, 3,
                          sympy.Matrix([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0],
                                        [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
                          sympy.Matrix([[R(1, 4), 0, 0], [R(-1, 6), R(-1, 6), R(-1, 6)],
                                        [R(-1, 6), R(1, 6), R(-1, 6)], [R(1, 24), R(1, 12), R(1, 6)],
                                        [R(1, 24), R(-1, 12), R(1, 6)], [0, 0, 1]]),
                          sympy.Matrix([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0],
                                        [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                                        [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]])),
    }
    lines = []
    for name, (m, r, AT, G, BT) in paper.items():
        errors = verify(AT, G, BT, m, r)
        if not errors:
            lines.append(f"paper {name}: verified")
            continue
        lines.append(f"paper {name}: does NOT verify as printed: " + "; ".join(errors[:2]))
    return lines


def generate(points_4x3):
    tables = []
    for cname, m, r, points, purpose in TABLES:
        pts = parse_points(points if points is not None else points_4x3)
        if len(pts) != m + r - 2:
            sys.exit(f"{cname}: F({m},{r}) needs {m + r - 2} points, got {len(pts)}")
        AT, G, BT, _ = wincnn.cookToomFilter(pts, m, r)
        AT, G, BT = (sympy.Matrix(M).applyfunc(sympy.nsimplify) for M in (AT, G, BT))
        stride = 1
        if cname.endswith("s2"):
            AT, G, BT = stride2_composition(AT, G, BT, m)
            r, stride = 3, 2
        errors = verify(AT, G, BT, m, r, stride)
        if errors:
            sys.exit(f"{cname} F({m},{r}) stride {stride} points {pts}: verification FAILED, nothing written:\n  "
                     + "\n  ".join(errors))
        print(f"{cname}: F({m},{r}) stride {stride} points {', '.join(map(str, pts))}: verified exactly (1-D and 2-D)")
        tables.append((cname, m, r, stride, pts, purpose, AT, G, BT))

    out = ["// GENERATED FILE: do not edit by hand.",
           "// Generated by tools/gen_winograd.py (wincnn's Cook-Toom construction, each table verified",
           "// exactly with sympy before writing). Change the script and rerun it instead:",
           "//   python tools/gen_winograd.py",
           "//",
           "// Winograd minimal filtering F(m, r) (Lavin & Gray, Sec. 4): y = AT [(G g) (.) (BT d)] is the",
           "// correlation y_i = sum_j d_{stride*i+j} g_j of an input tile d of (m - 1) * stride + r points",
           "// with an r-tap filter g, in alpha products (m + r - 1 at stride 1); nested in 2-D:",
           "// Y = AT [(G g G^T) (.) (BT d BT^T)] AT^T. Each *_f32 / *_f64 entry",
           "// is the correctly rounded value of the exact rational in the comment above its struct.",
           "#pragma once",
           "",
           "#include \"common/conv_index.hpp\"  // CONVCORE_HD",
           "",
           "namespace convcore {",
           "namespace winograd {",
           ""]
    for t in tables:
        out += emit_table(*t)
        out.append("")
    out += ["}  // namespace winograd", "}  // namespace convcore", ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="header to write (default: %(default)s)")
    ap.add_argument("--points-4x3", default=DEFAULT_POINTS_4X3,
                    help="interpolation points of F(4,3), comma-separated rationals (default: %(default)s)")
    ap.add_argument("--no-paper-check", action="store_true",
                    help="skip the report on the paper's printed matrices")
    args = ap.parse_args()
    text = generate(args.points_4x3)
    if not args.no_paper_check:
        for line in paper_report():
            print(line)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
