#!/usr/bin/env python3
"""Generate convcore's minimal 2-D cyclic convolution tables (cpp/common/generated/cyclic_tables.hpp).

Pitas, "Optimal multidimensional cyclic convolution algorithms for deep learning and computer
vision applications" (paper 004), Sec. 2-3: an N x N cyclic convolution
    Y(z1, z2) = X(z1, z2) H(z1, z2)  mod (z1^N - 1, z2^N - 1)                  (Eq. 5)
is split by the Chinese remainder theorem over the cyclotomic factors of z^N - 1 in each
variable (Eqs. 6-11), and a block (Phi_d(z1), Phi_d(z2)) of two equal factors of degree > 1 is
split once more because Phi_d(z1) factors over Q[z2]/Phi_d(z2) (Eq. 21); every block is then a
product in Q or in Q[z]/Phi_d(z), done with the minimal number of multiplications. The result
is a bilinear algorithm  y = C (A x (.) B h)  (Eq. 3 / 32) with M multiplications.

  N = 3: z^3 - 1 = (z - 1)(z^2 + z + 1)  (the paper's Eq. 16 misprints the left side as z^2 - 1);
         blocks 1 + 3 + 3 + (3 + 3) = 13 multiplications (the paper's count).
  N = 4: z^4 - 1 = (z - 1)(z + 1)(z^2 + 1); over Q[z2]/(z2^2 + 1), z1^2 + 1 = (z1 - z2)(z1 + z2);
         blocks 4*1 + 4*3 + (3 + 3) = 22 multiplications (Eq. 12 gives the same 22; the
         split nesting of Eqs. 6-11 without the extra split needs (2N - nu)^2 = 25, the
         definition (Eq. 4) 256, a 2-D FFT-free real algorithm by rows/columns 2*4*... more).

Overlap-save (Sec. 4): an F x F filter g applied as cross-correlation to an N x N input tile d
gives O = N - F + 1 outputs per axis that do not wrap: with h[i1][i2] = g[F-1-i1][F-1-i2]
(zero elsewhere), y(k1, k2) for k >= F - 1 equals out[k1-F+1][k2-F+1] = sum_uv g[u][v] d[..+u][..+v].

What is emitted, per variant (N, F), in the staged form the CPU/CUDA code runs:
    T   = R d R^T                      (R: N x N, entries 0/+-1; the 1-D residues of each axis)
    V   = A2 vec(T)                    (A2: M x N^2, 0/+-1; the block operands, Karatsuba forms)
    U   = B vec(g)                     (B: M x F^2, exact rationals B_num / B_den; all scaling)
    Z   = C2 (U (.) V)                 (C2: N^2 x M, small integers; block products back)
    out = L Z L^T                      (L: O x N, small integers; CRT rows k = F-1..N-1)
and the flat equivalents A = A2 (R (x) R) (M x N^2) and C = (L (x) L) C2 (O^2 x M), plus the
full cyclic algorithm Ac, Bc, Cc (y = Cc (Ac x (.) Bc h), all N^2 outputs, Eq. 3 form).

Everything is verified EXACTLY with sympy's rational arithmetic for symbolic inputs before
anything is written; a failure aborts with nothing written:
  1. the full cyclic algorithm equals the 2-D cyclic convolution of Eq. 4 (all N^2 outputs);
  2. the staged overlap-save tables equal the direct 2-D cross-correlation (all O^2 outputs);
  3. the flat tables equal the staged ones.
It also re-checks the paper's own 3 x 3 matrices (Eqs. 33-34) and reports on stdout whether
they hold; that report does not affect the generated file.

Usage:  python tools/gen_cyclic.py [--output FILE]
Needs:  pip install sympy
"""
import argparse
import os
import sys
from functools import reduce

import sympy
from sympy import Rational, Matrix, Poly, symbols, expand

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO, "cpp", "common", "generated", "cyclic_tables.hpp")

z, w = symbols("z w")

# (C++ name, N, F, purpose)
VARIANTS = [
    ("C4F3", 4, 3, "4x4 cyclic, 3x3 filter, 2x2 outputs per tile: CYCLIC_MINIMAL's main path"),
    ("C4F2", 4, 2, "4x4 cyclic, 2x2 filter, 3x3 outputs per tile"),
    ("C3F2", 3, 2, "3x3 cyclic (the paper's 13-multiplication example), 2x2 filter, 2x2 outputs"),
]


# ---- the construction ------------------------------------------------------------------------

def cyclotomic_factors(n):
    """[(d, Phi_d(z))] for the divisors d of n, in increasing d: z^n - 1 = prod Phi_d."""
    return [(d, sympy.cyclotomic_poly(d, z)) for d in sorted(sympy.divisors(n))]


def residue_matrix(n):
    """R (n x n): coefficients of X(z) = sum x_i z^i  ->  the coefficients of X mod Phi_d for
    each factor, stacked in factor order (each block deg(Phi_d) long). Also the block slices."""
    rows, blocks, start = [], [], 0
    for d, phi in cyclotomic_factors(n):
        deg = sympy.degree(phi, z)
        cols = []
        for i in range(n):
            r = Poly(sympy.rem(z**i, phi, z), z)
            cols.append([r.coeff_monomial(z**j) for j in range(deg)])
        for j in range(deg):
            rows.append([cols[i][j] for i in range(n)])
        blocks.append((d, phi, deg, slice(start, start + deg)))
        start += deg
    return Matrix(rows), blocks


def reduce_coeffs(coeffs, phi, var):
    """Coefficient list of (sum coeffs[i] var^i) mod phi(var), length deg(phi)."""
    deg = sympy.degree(phi, z)
    p = sum(c * var**i for i, c in enumerate(coeffs))
    r = Poly(sympy.rem(expand(p), phi.subs(z, var), var), var)
    return [r.coeff_monomial(var**j) if j > 0 else r.coeff_monomial(1) for j in range(deg)]


def poly_mul_forms(deg):
    """Minimal bilinear forms for the product of two degree-(deg-1) polynomials (the full,
    unreduced product of 2*deg-1 coefficients): returns (operand forms, product recombination).
    deg 1: one multiplication; deg 2: Karatsuba's 3 in the form u0 v0, u1 v1, (u0-u1)(v0-v1)
    (the paper's choice in Eq. 33: it keeps the entries of A and C at 0, +-1 for Phi_3 too)."""
    if deg == 1:
        return [[1]], lambda m: [m[0]]
    if deg == 2:
        forms = [[1, 0], [0, 1], [1, -1]]
        return forms, lambda m: [m[0], m[0] + m[1] - m[2], m[1]]
    raise NotImplementedError(f"factor of degree {deg}")


def block_algorithm(da, phia, dega, db, phib, degb):
    """The block (Phi_a(z1), Phi_b(z2)) as three linear stages around its multiplications:
      comps(P):   the block's coefficient matrix P (P[i][j] of z1^i z2^j) -> a list of
                  components, each a coefficient list of an element of Q[t]/Phi(t) (or Q);
      forms:      the operand forms applied to every component (Karatsuba: 3 for degree 2);
      recomb(m):  one component's products -> the coefficients of the component product
                  (the Karatsuba recombination reduced mod Phi);
      uncomps(c): the list of component products -> the block product's coefficient matrix.
    Returns (comps, forms, recomb, uncomps, number of multiplications)."""
    if dega == 1 or degb == 1:
        # One side is Q (z = the root of a degree-1 factor): one product in Q[t]/Phi(t), t the
        # other variable.
        deg = max(dega, degb)
        phi = phib if dega == 1 else phia
        forms, rec = poly_mul_forms(deg)

        def comps(P):
            return [[P[0][j] for j in range(degb)] if dega == 1 else [P[i][0] for i in range(dega)]]

        def recomb(m):
            return reduce_coeffs(rec(m), phi, w)

        def uncomps(cs):
            c = cs[0]
            return [[c[j] for j in range(degb)]] if dega == 1 else [[c[i]] for i in range(dega)]

        return comps, forms, recomb, uncomps, len(forms)

    assert da == db, "blocks of two different factors of degree > 1 do not occur for N <= 4"
    # Phi_d(z1) splits over K = Q[z2]/Phi_d(z2) into the linear factors z1 - z2^e, e a unit mod
    # d (Pitas Eq. 21: e = 1 and e = d - 1). P(z1, z2) -> (P(z2^e, z2) mod Phi_d(z2))_e is an
    # isomorphism onto K^phi(d); each component product is a product in K.
    d, phi, deg = da, phia, dega
    units = [e for e in range(1, d) if sympy.gcd(e, d) == 1]
    forms, rec = poly_mul_forms(deg)

    def comps(P):
        out = []
        for e in units:
            terms = [0] * (2 * deg * d)
            for i in range(deg):
                for j in range(deg):
                    terms[i * e + j] += P[i][j]
            out.append(reduce_coeffs(terms, phi, w))
        return out

    # The linear map P -> components, and its inverse (exact).
    Psym = [[sympy.Symbol(f"p{i}_{j}") for j in range(deg)] for i in range(deg)]
    flatP = [Psym[i][j] for i in range(deg) for j in range(deg)]
    comp_exprs = [c for comp in comps(Psym) for c in comp]
    S = Matrix([[sympy.diff(ce, p) for p in flatP] for ce in comp_exprs])
    Sinv = S.inv()

    def recomb(m):
        return reduce_coeffs(rec(m), phi, w)

    def uncomps(cs):
        flat_c = Sinv * Matrix([c for comp in cs for c in comp])
        return [[flat_c[i * deg + j] for j in range(deg)] for i in range(deg)]

    return comps, forms, recomb, uncomps, len(forms) * len(units)


def linear_matrix(exprs, syms):
    return Matrix([[sympy.diff(e, s) for s in syms] for e in exprs])


def build_cyclic(n):
    """The full N x N cyclic algorithm in staged form:
        T = R d R^T;  V = A2b A2a vec(T);  Z = C2b C2a (U .* V)
    A2a: block coefficients -> components (the Eq. 21 split; identity elsewhere), A2b: the
    operand forms, C2a: products -> component products, C2b: components -> block coefficients.
    Returns R, A2a, A2b, C2a, C2b and the number of multiplications M."""
    R, blocks = residue_matrix(n)
    Tsym = [[sympy.Symbol(f"t{i}_{j}") for j in range(n)] for i in range(n)]
    tflat = [Tsym[i][j] for i in range(n) for j in range(n)]
    comp_exprs, operand_exprs, layout = [], [], []
    ncomp, mcount = 0, 0
    csym = symbols(f"c0:{n * n}")
    for (da, phia, dega, sa) in blocks:
        for (db, phib, degb, sb) in blocks:
            comps, forms, recomb, uncomps, m = block_algorithm(da, phia, dega, db, phib, degb)
            P = [[Tsym[sa.start + i][sb.start + j] for j in range(degb)] for i in range(dega)]
            cs = comps(P)
            sizes = [len(c) for c in cs]
            start_c = ncomp
            for c in cs:
                comp_exprs += [expand(v) for v in c]
                cvars = csym[ncomp:ncomp + len(c)]
                operand_exprs += [sum(f[i] * cvars[i] for i in range(len(c))) for f in forms]
                ncomp += len(c)
            layout.append((sa, sb, recomb, uncomps, sizes, start_c, mcount, len(forms)))
            mcount += m
    A2a = linear_matrix(comp_exprs, tflat)
    A2b = linear_matrix(operand_exprs, csym)
    msym = symbols(f"m0:{mcount}")
    cprod_exprs = [0] * (n * n)
    Z = [[0] * n for _ in range(n)]
    for (sa, sb, recomb, uncomps, sizes, start_c, start_m, nf) in layout:
        cs, pos = [], start_c
        for idx, size in enumerate(sizes):
            pc = recomb(list(msym[start_m + idx * nf:start_m + (idx + 1) * nf]))
            for i in range(size):
                cprod_exprs[pos + i] = expand(pc[i])
            cs.append(list(csym[pos:pos + size]))
            pos += size
        blk = uncomps(cs)
        for i in range(sa.stop - sa.start):
            for j in range(sb.stop - sb.start):
                Z[sa.start + i][sb.start + j] = expand(blk[i][j])
    C2a = linear_matrix(cprod_exprs, msym)
    C2b = linear_matrix([Z[i][j] for i in range(n) for j in range(n)], csym)
    return R, A2a, A2b, C2a, C2b, mcount


def residue_stages(n):
    """R as a product R2 R1 of sparser matrices (a CRT tree): for even N, R1 reduces mod
    z^(N/2) - 1 and z^(N/2) + 1 (N/2 additions each), R2 finishes the z^(N/2) - 1 half
    (here N = 4: into z - 1 and z + 1) and passes the rest through. N = 3: R1 = R, R2 = I."""
    R, blocks = residue_matrix(n)
    if n % 2 or n < 4:
        return R, sympy.eye(n)
    h = n // 2
    R1 = Matrix(n, n, lambda i, j: (1 if j % h == i % h else 0) * (1 if i < h or j < h else -1))
    R2 = R * R1.inv()
    return R1, R2


def kron(a, b):
    return sympy.kronecker_product(a, b)


def cyclic_reference(x, h, n):
    return [[sum(h[i1][i2] * x[(k1 - i1) % n][(k2 - i2) % n] for i1 in range(n) for i2 in range(n))
             for k2 in range(n)] for k1 in range(n)]


def sym_grid(name, rows, cols):
    return [[sympy.Symbol(f"{name}{i}_{j}") for j in range(cols)] for i in range(rows)]


def flat(grid):
    return [e for row in grid for e in row]


def verify_cyclic(Ac, Bc, Cc, n):
    x, h = sym_grid("x", n, n), sym_grid("h", n, n)
    y = Cc * (Ac * Matrix(flat(x))).multiply_elementwise(Bc * Matrix(flat(h)))
    ref = cyclic_reference(x, h, n)
    return [f"cyclic output ({k1},{k2})" for k1 in range(n) for k2 in range(n)
            if expand(y[k1 * n + k2] - ref[k1][k2]) != 0]


def correlation_reference(d, g, o, f):
    return [[sum(g[u][v] * d[i + u][j + v] for u in range(f) for v in range(f)) for j in range(o)]
            for i in range(o)]


def content(col):
    """The positive rational c with col / c integers of gcd 1 (1 for a zero column)."""
    nz = [Rational(v) for v in col if v != 0]
    if not nz:
        return Rational(1)
    num = reduce(sympy.igcd, [abs(v.p) for v in nz])
    den = reduce(sympy.ilcm, [v.q for v in nz])
    return Rational(num, den)


def block_owners(n):
    """The block of each component index (component order, as build_cyclic lays them out) and
    of each residue index i1*N + i2 (the order of T and Z)."""
    _, blocks = residue_matrix(n)
    comp, b = [], 0
    of_residue = {}
    for bi, (_, _, dega, sa) in enumerate(blocks):
        for bj, (_, _, degb, sb) in enumerate(blocks):
            comp += [b] * (dega * degb)
            for i in range(sa.start, sa.stop):
                for j in range(sb.start, sb.stop):
                    of_residue[i * n + j] = b
            b += 1
    return comp, [of_residue[i] for i in range(n * n)]


def build_variant(n, f):
    """Overlap-save tables for an F x F cross-correlation on N x N tiles, staged and flat."""
    o = n - f + 1
    R, A2a, A2b, C2a, C2b, M = build_cyclic(n)
    R1, R2 = residue_stages(n)
    if R2 * R1 != R:
        raise SystemExit(f"N={n}: the CRT tree R2 R1 differs from R")
    A2, C2 = A2b * A2a, C2b * C2a
    Rinv = R.inv()
    Ac = A2 * kron(R, R)
    Cc = kron(Rinv, Rinv) * C2
    errors = verify_cyclic(Ac, Ac, Cc, n)
    if errors:
        raise SystemExit(f"N={n}: the cyclic algorithm is wrong: {errors}")
    # Filter side: h[i1][i2] = g[F-1-i1][F-1-i2] for i < F, zero elsewhere.
    B = Matrix(M, f * f, lambda m, j: Ac[m, (f - 1 - j // f) * n + (f - 1 - j % f)])
    # Output side: rows k = F-1..N-1 of R^-1; every scale moves into B: the columns of R^-1
    # (D), then per block the scale of C2b, then per product the scale of C2a.
    Lr = Rinv[f - 1:, :]
    colscale = [content(Lr[:, j]) for j in range(n)]
    L = Matrix(o, n, lambda i, j: Lr[i, j] / colscale[j])
    D = kron(sympy.diag(*colscale), sympy.diag(*colscale))
    C2bs = D * C2b  # block diagonal: blocks of the component indices
    owner, owner_res = block_owners(n)
    bscale = {}
    for b in set(owner):
        bscale[b] = content([C2bs[i, j] for i in range(n * n) for j in range(n * n)
                             if owner_res[i] == b and owner[j] == b])
    if any(C2bs[i, j] != 0 and owner_res[i] != owner[j] for i in range(n * n) for j in range(n * n)):
        raise SystemExit(f"N={n}: C2b is not block diagonal")
    C2bi = Matrix(n * n, n * n, lambda i, j: C2bs[i, j] / bscale[owner[j]])
    C2as = Matrix(n * n, M, lambda i, m: C2a[i, m] * bscale[owner[i]])
    mscale = [content(C2as[:, m]) for m in range(M)]
    C2ai = Matrix(n * n, M, lambda i, m: C2as[i, m] / mscale[m])
    Bs = Matrix(M, f * f, lambda m, j: B[m, j] * mscale[m])
    # Exact check of the staged tables against the direct correlation.
    d, g = sym_grid("d", n, n), sym_grid("g", f, f)
    T = R2 * (R1 * Matrix(d) * R1.T) * R2.T
    V = A2b * (A2a * Matrix(flat(T.tolist())))
    U = Bs * Matrix(flat(g))
    Zv = C2bi * (C2ai * U.multiply_elementwise(V))
    Z = Matrix(n, n, lambda i, j: Zv[i * n + j])
    out = L * Z * L.T
    ref = correlation_reference(d, g, o, f)
    bad = [(i, j) for i in range(o) for j in range(o) if expand(out[i, j] - ref[i][j]) != 0]
    if bad:
        raise SystemExit(f"N={n} F={f}: staged overlap-save tables wrong at outputs {bad}")
    Aflat = A2 * kron(R, R)
    Cflat = kron(L, L) * C2bi * C2ai
    y = Cflat * (Aflat * Matrix(flat(d))).multiply_elementwise(U)
    bad = [(i, j) for i in range(o) for j in range(o) if expand(y[i * o + j] - ref[i][j]) != 0]
    if bad:
        raise SystemExit(f"N={n} F={f}: flat overlap-save tables wrong at outputs {bad}")
    for name, mat in (("R1", R1), ("R2", R2), ("A2a", A2a), ("A2b", A2b), ("C2a", C2ai), ("C2b", C2bi),
                      ("L", L), ("A", Aflat), ("C", Cflat)):
        if any(not v.is_integer for v in mat):
            raise SystemExit(f"N={n} F={f}: {name} has non-integer entries")
    den = reduce(sympy.ilcm, [Rational(v).q for v in Bs] + [1])
    Bnum = Bs * den
    cyc = dict(Ac=Ac, Bc=Ac, Cc=Cc)
    return dict(n=n, f=f, o=o, M=M, R=R, R1=R1, R2=R2, A2a=A2a, A2b=A2b, Bnum=Bnum, Bden=den,
                C2a=C2ai, C2b=C2bi, L=L, A=Aflat, C=Cflat, B=Bs, cyc=cyc)


# ---- 1-D: the N-point cyclic convolution (Pitas Eqs. 6-11 in one variable) --------------------

# (C++ name, N, F, purpose)
VARIANTS_1D = [
    ("C4F3Row", 4, 3, "4-point cyclic, 3-tap filter, 2 outputs per tile: CYCLIC_MINIMAL on 1x3 filters "
                      "(1-D convolutions)"),
    ("C4F2Row", 4, 2, "4-point cyclic, 2-tap filter, 3 outputs per tile: CYCLIC_MINIMAL on 1x2 filters"),
]


def build_variant_1d(n, f):
    """Overlap-save tables for an F-tap cross-correlation on N-point tiles, from the N-point
    cyclic convolution split by the CRT over the cyclotomic factors of z^N - 1 (one block per
    factor, each block product with poly_mul_forms: N = 4 takes 1 + 1 + 3 = 5 multiplications).
    Flat form out = C (U .* (A d)), U = B g: A (M x N) and C (O x M) integers, B exact rationals
    (all the scaling). Verified exactly: the cyclic algorithm against the definition, and the
    overlap-save tables against the direct correlation."""
    o = n - f + 1
    R, blocks = residue_matrix(n)
    xs, hs = symbols(f"x0:{n}"), symbols(f"h0:{n}")
    X, H = R * Matrix(xs), R * Matrix(hs)
    ops_x, ops_h, layout, count = [], [], [], 0
    for _, phi, deg, sl in blocks:
        forms, rec = poly_mul_forms(deg)
        for form in forms:
            ops_x.append(sum(form[i] * X[sl.start + i] for i in range(deg)))
            ops_h.append(sum(form[i] * H[sl.start + i] for i in range(deg)))
        layout.append((phi, rec, count, len(forms)))
        count += len(forms)
    ms = symbols(f"m0:{count}")
    residues = []
    for phi, rec, start, nf in layout:
        residues += reduce_coeffs(rec(list(ms[start:start + nf])), phi, z)
    y = R.inv() * Matrix(residues)
    A = linear_matrix(ops_x, xs)
    Cc = linear_matrix(list(y), ms)
    yc = Cc * (A * Matrix(xs)).multiply_elementwise(A * Matrix(hs))
    bad = [k for k in range(n) if expand(yc[k] - sum(hs[i] * xs[(k - i) % n] for i in range(n))) != 0]
    if bad:
        raise SystemExit(f"1-D N={n}: the cyclic algorithm is wrong at outputs {bad}")
    # Overlap-save: h[i] = g[F-1-i] (i < F), outputs k = F-1..N-1; column scales move into B.
    B = Matrix(count, f, lambda m, j: A[m, f - 1 - j])
    Co = Cc[f - 1:, :]
    mscale = [content(Co[:, m]) for m in range(count)]
    C = Matrix(o, count, lambda i, m: Co[i, m] / mscale[m])
    Bs = Matrix(count, f, lambda m, j: B[m, j] * mscale[m])
    d, g = symbols(f"d0:{n}"), symbols(f"g0:{f}")
    out = C * (A * Matrix(d)).multiply_elementwise(Bs * Matrix(g))
    bad = [i for i in range(o) if expand(out[i] - sum(g[u] * d[i + u] for u in range(f))) != 0]
    if bad:
        raise SystemExit(f"1-D N={n} F={f}: the overlap-save tables are wrong at outputs {bad}")
    for name, mat in (("A", A), ("C", C)):
        if any(not v.is_integer for v in mat):
            raise SystemExit(f"1-D N={n} F={f}: {name} has non-integer entries")
    den = reduce(sympy.ilcm, [Rational(v).q for v in Bs] + [1])
    return dict(n=n, f=f, o=o, M=count, A=A, B=Bs, Bnum=Bs * den, Bden=den, C=C)


def emit_variant_1d(cname, purpose, v):
    n, f, o, M = v["n"], v["f"], v["o"], v["M"]
    s = f"// {cname}: {purpose}.\n"
    s += (f"// {M} multiplications per {n}-point tile for {o} outputs ({Rational(M, o)} per output; "
          f"direct: {f}); additions: {additions(v['A'])} (input tile), {additions(v['C'])} (outputs).\n")
    s += matrix_comment("A", v["A"])
    s += matrix_comment("B (exact; B_num / B_den)", v["B"])
    s += matrix_comment("C", v["C"])
    s += f"struct {cname} {{\n"
    s += f"    static constexpr int N = {n}, F = {f}, O = {o}, M = {M};\n"
    s += "    // out = C (U .* (A d)), U = B g (g in cross-correlation order: g[u] -> column u).\n"
    s += c_int_array("A", v["A"])
    s += c_int_array("B_num", v["Bnum"])
    s += f"    static constexpr int B_den = {v['Bden']};\n"
    s += c_int_array("C", v["C"])
    s += ("    template <typename T>\n"
          "    static CONVCORE_HD constexpr T b(int m, int j) { return T(B_num[m][j]) / T(B_den); }\n")
    s += "};\n\n"
    return s


def additions(mat):
    """Additions a matrix-vector product with this 0/+-1/small-integer matrix takes, row by row
    (nonzeros - 1 per nonzero row)."""
    return sum(max(0, sum(1 for v in mat.row(i) if v != 0) - 1) for i in range(mat.rows))


# ---- 3-D: the 1-D algorithm along the depth nested around the 2-D one ------------------------

# (depth variant, plane variant): CYCLIC_MINIMAL's native 3-D form (cpp/cpu/cyclic_minimal_3d.cpp)
VARIANTS_3D = [("C4F3Row", "C4F3"), ("C4F2Row", "C4F2")]


def verify_nested_3d(v1, v2):
    """The nested 3-D overlap-save algorithm, flat: A3 = A1 (x) A2, B3 = B1 (x) B2,
    C3 = C1 (x) C2 (depth index major), out = C3 (A3 vec(d) .* B3 vec(g)), for a (F1 x F2 x F2)
    filter on (N x N x N) tiles. Verified exactly: the algorithm is bilinear, so it equals the
    direct 3-D cross-correlation iff every (input element, filter element) pair gives exactly the
    correlation's coefficient at every output (rational arithmetic on each of the pairs).
    Returns (multiplications, outputs per tile)."""
    from fractions import Fraction
    n, f1, o1, f2, o2 = v1["n"], v1["f"], v1["o"], v2["f"], v2["o"]
    A3, B3, C3 = (kron(v1["A"], v2["A"]), kron(v1["B"], v2["B"]), kron(v1["C"], v2["C"]))
    A3, C3 = [[int(v) for v in A3.row(i)] for i in range(A3.rows)], [[int(v) for v in C3.row(i)] for i in range(C3.rows)]
    B3 = [[Fraction(int(Rational(v).p), int(Rational(v).q)) for v in B3.row(i)] for i in range(B3.rows)]
    m = len(A3)
    for a in range(n ** 3):
        ad, ah, aw = a // (n * n), a // n % n, a % n
        for b in range(f1 * f2 * f2):
            bt, bu, bv = b // (f2 * f2), b // f2 % f2, b % f2
            prod = [A3[i][a] * B3[i][b] for i in range(m)]
            for o in range(o1 * o2 * o2):
                od, oh, ow = o // (o2 * o2), o // o2 % o2, o % o2
                want = 1 if (ad, ah, aw) == (od + bt, oh + bu, ow + bv) else 0
                if sum(C3[o][i] * prod[i] for i in range(m) if prod[i]) != want:
                    raise SystemExit(f"3-D nested ({f1}x{f2}x{f2} filter): wrong at output {o}, input {a}, "
                                     f"filter {b}")
    return m, o1 * o2 * o2


def split_count(n, dims):
    """Multiplications of Pitas' construction in `dims` variables with every block split into
    fields (Eq. 21 applied to every pair of factors): each combination of cyclotomic factors
    Phi_d1 .. Phi_dk is the tensor product of the fields Q(zeta_di), which is
    Q(zeta_lcm)^(copies) (copies = prod phi(di) / phi(lcm), folded pairwise); a product in a field
    of degree k takes 2k - 1 multiplications. N = 4: 5 (1-D), 22 (2-D), 92 (3-D)."""
    from itertools import product
    total = 0
    for ds in product(sympy.divisors(n), repeat=dims):
        order, copies = 1, 1
        for d in ds:
            lcm = sympy.ilcm(order, d)
            copies = copies * sympy.totient(order) * sympy.totient(d) // sympy.totient(lcm)
            order = lcm
        total += copies * (2 * sympy.totient(order) - 1)
    return int(total)


# ---- the paper's own 3x3 matrices (Eqs. 33, 34) ----------------------------------------------

PAPER_A = [
    [1, 1, 1, 1, 1, 1, 1, 1, 1],
    [1, 0, -1, 1, 0, -1, 1, 0, -1],
    [0, 1, -1, 0, 1, -1, 0, 1, -1],
    [1, -1, 0, 1, -1, 0, 1, -1, 0],
    [1, 1, 1, 0, 0, 0, -1, -1, -1],
    [0, 0, 0, 1, 1, 1, -1, -1, -1],
    [1, 1, 1, -1, -1, -1, 0, 0, 0],
    [1, 0, -1, 0, -1, 1, -1, 1, 0],
    [0, 1, -1, 1, -1, 0, -1, 0, 1],
    [1, -1, 0, -1, 0, 1, 0, 1, -1],
    [1, 0, -1, -1, 1, 0, 0, -1, 1],
    [0, 1, -1, -1, 0, 1, 1, -1, 0],
    [1, -1, 0, 0, 1, -1, -1, 0, 1],
]
PAPER_C27 = [
    [3, 3, -6, 3, 3, -6, 3, 3, -6, 3, 3, -6, 3],
    [3, 3, 3, -6, 3, -6, 3, 3, 3, -6, 3, 3, -6],
    [3, -6, 3, 3, 3, -6, 3, -6, 3, 3, -6, 3, 3],
    [3, 3, -6, 3, 3, 3, -6, 3, 3, -6, -6, 3, 3],
    [3, 3, 3, -6, 3, 3, -6, -6, 3, 3, 3, -6, 3],
    [3, -6, 3, 3, 3, 3, -6, 3, -6, 3, 3, 3, -6],
    [3, 3, -6, 3, -6, 3, 3, -6, 3, 3, 3, 3, -6],
    [3, 3, 3, -6, -6, 3, 3, 3, -6, 3, -6, 3, 3],
    [3, -6, 3, 3, -6, 3, 3, 3, 3, -6, 3, -6, 3],
]


def paper_report():
    """Checks Eqs. 33-34 as printed (y = C (A x (.) A h), x and h in the order of Eq. 14) and
    reports what holds. Returns a list of report lines."""
    A, C = Matrix(PAPER_A), Matrix(PAPER_C27) / 27
    lines = []
    x, h = sym_grid("x", 3, 3), sym_grid("h", 3, 3)
    ref = cyclic_reference(x, h, 3)
    y = C * (A * Matrix(flat(x))).multiply_elementwise(A * Matrix(flat(h)))
    ok = [expand(y[i] - ref[i // 3][i % 3]) == 0 for i in range(9)]
    lines.append(f"paper Eqs. 33-34 (3x3, 13 multiplications) as printed: {sum(ok)} of 9 outputs "
                 f"equal the cyclic convolution (Eq. 4)")
    if all(ok):
        return lines
    # Does some C' exist for the printed A = B? Solve C' (A x (.) A h) = y for C' exactly.
    prods = (A * Matrix(flat(x))).multiply_elementwise(A * Matrix(flat(h)))
    monos = sorted({mn for p in prods for mn in Poly(expand(p), *flat(x), *flat(h)).monoms()})
    def coeff_vec(e):
        pe = Poly(expand(e), *flat(x), *flat(h))
        return [pe.coeff_monomial(mn) for mn in monos]
    P = Matrix([coeff_vec(p) for p in prods]).T  # monomials x 13
    Cfix = []
    for k in range(9):
        target = Matrix(coeff_vec(ref[k // 3][k % 3]))
        try:
            sol, params = P.gauss_jordan_solve(target)
            Cfix.append(list(sol.subs({p: 0 for p in params})))
        except ValueError:
            Cfix.append(None)
    if all(c is not None for c in Cfix):
        Cf = Matrix(Cfix) * 27
        diff = [(i, j) for i in range(9) for j in range(13) if Cf[i, j] != PAPER_C27[i][j]]
        lines.append(f"  with the printed A = B, a correct C exists; 27*C differs from Eq. 34 in "
                     f"{len(diff)} of 117 entries (rows {sorted({i for i, _ in diff})})")
        lines.append("  corrected 27*C rows: " + "; ".join(
            " ".join(str(v) for v in Cf.row(i)) for i in range(9)))
    else:
        lines.append("  no C makes the printed A = B correct")
    return lines


# ---- emitting C++ ----------------------------------------------------------------------------

def c_int_array(name, M, indent="    "):
    rows = [", ".join(f"{int(v)}" for v in M.row(i)) for i in range(M.rows)]
    body = (",\n" + indent + "    ").join("{" + r + "}" for r in rows)
    return f"{indent}static constexpr int {name}[{M.rows}][{M.cols}] = {{\n{indent}    {body}}};\n"


def matrix_comment(label, M, indent="//   "):
    width = max(len(str(v)) for v in M)
    out = [f"{indent}{label} ="]
    for i in range(M.rows):
        out.append(indent + "  [" + " ".join(str(v).rjust(width) for v in M.row(i)) + "]")
    return "\n".join(out) + "\n"


def emit_variant(cname, purpose, v):
    n, f, o, M = v["n"], v["f"], v["o"], v["M"]
    adds_in = 2 * n * additions(v["R1"]) + 2 * n * additions(v["R2"]) + additions(v["A2a"]) + \
        additions(v["A2b"])
    adds_out = additions(v["C2a"]) + additions(v["C2b"]) + n * additions(v["L"]) + o * additions(v["L"])
    s = f"// {cname}: {purpose}.\n"
    s += (f"// {M} multiplications per {n}x{n} tile for {o}x{o} outputs ({Rational(M, o * o)} per "
          f"output; direct: {f * f}); additions as staged below: {adds_in} (input tile), "
          f"{adds_out} (outputs).\n")
    s += matrix_comment("B (exact; B_num / B_den)", v["B"])
    s += f"struct {cname} {{\n"
    s += f"    static constexpr int N = {n}, F = {f}, O = {o}, M = {M};\n"
    s += ("    // Staged form (apply right to left; each stage a sparse 0/+-1 matrix):\n"
          "    //   T = R d R^T with R = R2 R1;  V = A2b A2a vec(T);  U = B vec(g);\n"
          "    //   Z = C2b C2a (U .* V);  out = L Z L^T.\n")
    s += c_int_array("R1", v["R1"])
    s += c_int_array("R2", v["R2"])
    s += c_int_array("A2a", v["A2a"])
    s += c_int_array("A2b", v["A2b"])
    s += c_int_array("C2a", v["C2a"])
    s += c_int_array("C2b", v["C2b"])
    s += c_int_array("L", v["L"])
    s += "    // Filter transform (cross-correlation order g[u][v] -> column u*F + v): B_num / B_den.\n"
    s += c_int_array("B_num", v["Bnum"])
    s += f"    static constexpr int B_den = {v['Bden']};\n"
    s += "    // Flat form: out = C (U .* (A vec(d))); A = A2b A2a (R kron R), C = (L kron L) C2b C2a.\n"
    s += c_int_array("A", v["A"])
    s += c_int_array("C", v["C"])
    s += ("    // B as T (correctly rounded: one division of two exact integers).\n"
          "    template <typename T>\n"
          "    static CONVCORE_HD constexpr T b(int m, int j) { return T(B_num[m][j]) / T(B_den); }\n")
    s += "};\n\n"
    return s


def emit_cyclic(n, v):
    cyc = v["cyc"]
    Cc = cyc["Cc"]
    den = reduce(sympy.ilcm, [Rational(x).q for x in Cc] + [1])
    s = (f"// The full {n}x{n} cyclic convolution y = Cc (Ac x (.) Bc h) (Pitas Eq. 3 form; x, h, y\n"
         f"// in the order of Eq. 14: index i1*{n} + i2 for z1^i1 z2^i2), {v['M']} multiplications;\n"
         f"// Bc = Ac, Cc = Cc_num / Cc_den.\n")
    s += f"struct Cyclic{n} {{\n"
    s += f"    static constexpr int N = {n}, M = {v['M']};\n"
    s += c_int_array("Ac", cyc["Ac"])
    s += c_int_array("Cc_num", Cc * den)
    s += f"    static constexpr int Cc_den = {den};\n"
    s += "};\n\n"
    return s


def generate():
    variants = []
    cyclic = {}
    for cname, n, f, purpose in VARIANTS:
        v = build_variant(n, f)
        variants.append((cname, purpose, v))
        cyclic.setdefault(n, v)
        print(f"{cname}: N={n} F={f}: {v['M']} multiplications per tile, {v['o']}x{v['o']} outputs; "
              f"verified exactly (cyclic convolution, staged and flat overlap-save correlation)")
    head = """// GENERATED FILE: do not edit by hand.
// Generated by tools/gen_cyclic.py (sympy; every table verified exactly with rational
// arithmetic before writing). Change the script and rerun it instead:
//   python tools/gen_cyclic.py
//
// Minimal-multiplication 2-D cyclic convolution (Pitas, paper 004): CRT over the cyclotomic
// factors of z^N - 1 in each variable, with Phi_d(z1) split over Q[z2]/Phi_d(z2) (Eq. 21).
//   N = 3: 13 multiplications (z^3 - 1 = (z - 1)(z^2 + z + 1));
//   N = 4: 22 multiplications (z^4 - 1 = (z - 1)(z + 1)(z^2 + 1); z1^2 + 1 = (z1 - z2)(z1 + z2)
//          over Q[z2]/(z2^2 + 1)); the definition takes 256, split nesting without the extra
//          split 25.
// Overlap-save variants for CNN cross-correlation: an F x F filter g on N x N input tiles d
// gives O = N - F + 1 outputs per axis, out[i][j] = sum_uv g[u][v] d[i + u][j + v], as
//   T = R2 R1 d R1^T R2^T;  V = A2b A2a vec(T);  U = B vec(g);  Z = C2b C2a (U .* V);
//   out = L Z L^T
// (R1, R2: the CRT tree of z^N - 1; A2a / C2b: the Eq. 21 split and its inverse; A2b / C2a:
// the multiplications' operand forms and recombination; all small integers, all the scaling
// in B = B_num / B_den). 1-D (the *Row variants, for 1 x F filters): the N-point cyclic
// convolution by the same CRT in one variable (N = 4: 1 + 1 + 3 = 5 multiplications), in the
// flat form out = C (U .* (A d)), U = B g. The tables are
// constexpr: use them in constant expressions (template arguments, if constexpr) on the host
// and, with nvcc --expt-relaxed-constexpr, in device code.
#pragma once

#include "common/conv_index.hpp"  // CONVCORE_HD

namespace convcore {
namespace cyclic {

"""
    body = ""
    for n in sorted(cyclic):
        body += emit_cyclic(n, cyclic[n])
    for cname, purpose, v in variants:
        body += emit_variant(cname, purpose, v)
    built_1d = {}
    for cname, n, f, purpose in VARIANTS_1D:
        v = build_variant_1d(n, f)
        print(f"{cname}: 1-D N={n} F={f}: {v['M']} multiplications per tile, {v['o']} outputs; "
              f"verified exactly (cyclic convolution, overlap-save correlation)")
        body += emit_variant_1d(cname, purpose, v)
        built_1d[cname] = v
    for depth_name, plane_name in VARIANTS_3D:
        v1, v2 = built_1d[depth_name], next(v for c, _, v in variants if c == plane_name)
        m, outs = verify_nested_3d(v1, v2)
        f, n = v1["f"], v1["n"]
        per_tap = Rational(f * v2["M"], v2["o"] ** 2)
        print(f"3-D nested {depth_name} x {plane_name}: {f}x{v2['f']}x{v2['f']} filter, {m} multiplications per "
              f"{n}x{n}x{n} tile, {outs} outputs ({Rational(m, outs)} per output; per-tap 2-D: {per_tap}, "
              f"direct: {f * v2['f'] ** 2}); verified exactly (3-D cross-correlation)")
    print(f"3-D N=4 cyclic: nested 1-D x 2-D {5 * 22} multiplications; Pitas' construction with every "
          f"factor pair split: {split_count(4, 3)} (1-D {split_count(4, 1)}, 2-D {split_count(4, 2)}; "
          f"N=3: {split_count(3, 2)} in 2-D, {split_count(3, 3)} in 3-D)")
    tail = "}  // namespace cyclic\n}  // namespace convcore\n"
    return head + body + tail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output", default=DEFAULT_OUTPUT, help="header to write (default: %(default)s)")
    ap.add_argument("--no-paper-check", action="store_true",
                    help="skip re-checking the paper's printed 3x3 matrices")
    args = ap.parse_args()
    text = generate()
    if not args.no_paper_check:
        for line in paper_report():
            print(line)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as fh:
        fh.write(text)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    sys.exit(main())
