"""Fit the CPU heuristic behind algo="auto" and write cpp/core/generated/heuristic_cpu.hpp.

Model: every algorithm a gets a relative cost, log t_a = beta_a . x, linear in features x of
the problem's shape (logs of sizes, so t_a is a product of powers of N, P*Q, C/g, ...).
The fit only uses time *ratios* within a layer (each layer has its own free offset: a
least-squares fit with layer fixed effects), so layers timed on a loaded machine, at another
thread count or with another clock still rank the algorithms correctly. auto ranks the
applicable algorithms by beta_a . x; DIRECT (the reference, 30-200x slower than the
best on the suites, and timed only on small grid layers, so a fit would extrapolate) is not
modelled and comes last.

Data: bench/data/grid_cpu.json (bench/collect_selection_data.py: a sampled grid, min of
interleaved reps, CPU time at one thread) and the suite runs in SUITE_DATA (`convcore bench
--json` of every suite, 2 threads, median of 11), the latter weighted SUITE_WEIGHT. Prints the held-out accuracy (K-fold cross-validation by layer) and the accuracy
on the suites.

    python tools/fit_heuristic.py                   # refit, rewrite the header, print accuracy
    python tools/fit_heuristic.py --output /tmp/h   # write elsewhere (the staleness test)
"""

import argparse
import glob
import json
import math
import os
import re
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRID_DATA = ["bench/data/grid_cpu.json"]
# The suite runs in the fit: bench/data/suites_cpu_cfc77fa_r1 (`convcore bench` as by default:
# 2 threads, wall clock, median of 11), measured with the current IM2WIN, IMPLICIT_GEMM and
# Winograd schedules; older suite runs in bench/data/ rank those algorithms by kernels that no
# longer exist and stay out of the fit. With the grid (bench/data/grid_cpu.json, 600 layers,
# collect_selection_data.py at 1 thread), 5-fold held out: 62/67 suite layers within 10% at
# SUITE_WEIGHT 8 (4: 61, 11: 61, 15: 60). How the fit got here: git log and bench/results.
SUITE_DATA = ["bench/data/suites_cpu_cfc77fa_r1/*.json"]
OUTPUT = "cpp/core/generated/heuristic_cpu.hpp"
SUITE_WEIGHT = 8.0  # per suite run (the suites are the target)
RIDGE = 3.0          # L2 penalty (on standardised features), keeps sparse algorithms sane
FOLDS = 5
WITHIN = 1.10        # "within 10% of the fastest"

# The features; select.cpp computes the same (heuristic_features), in this order: 1, the
# LOGS, the two flags, then the products LOGS[i] * LOGS[j] for i <= j (a quadratic in the logs:
# on the data, 5-fold held-out within-10% went from 72% to 77% on the grid, 79% to 87% on the
# suites over the linear model).
LOGS = [
    ("log_n", "log N"),
    ("log_pq", "log(P*Q), output pixels per image"),
    ("log_hw", "log(Hp*Wp), padded input pixels per image"),
    ("log_c", "log(C/groups)"),
    ("log_k", "log(K/groups)"),
    ("log_g", "log(groups)"),
    ("log_rs", "log(R*S)"),
]
# The last two flags mark where algorithms switch paths (a step a smooth model cannot follow):
# IMPLICIT_GEMM's row path (K/g <= 4) and CYCLIC_MINIMAL's GEMM-free path (C/g <= 4).
FLAGS = [("strided", "stride > 1 (0 or 1)"), ("dilated", "dilation > 1 (0 or 1)"),
         ("few_k", "K/groups <= 4 (0 or 1)"), ("few_c", "C/groups <= 4 (0 or 1)")]
FEATURES = [("one", "1")] + LOGS + FLAGS + [
    (f"{a}*{b}", "") for i, (a, _) in enumerate(LOGS) for (b, _) in LOGS[i:]]
UNMODELLED = {"direct", "torch", "torch_cl"}


def parse_descriptor(text):
    f = {k: int(v) for k, v in re.findall(r"([a-z]+)(\d+)", text)}
    for a, b, d in (("ih", "iw", None), ("kh", "kw", None), ("sh", "sw", 1), ("ph", "pw", 0),
                    ("dh", "dw", 1)):
        f.setdefault(a, f.get(b, d))
        f.setdefault(b, f[a])
    f.setdefault("mb", 1)
    f.setdefault("g", 1)
    return f


def features(f):
    """The feature vector of a problem given as a parsed descriptor."""
    p = (f["ih"] + 2 * f["ph"] - f["dh"] * (f["kh"] - 1) - 1) // f["sh"] + 1
    q = (f["iw"] + 2 * f["pw"] - f["dw"] * (f["kw"] - 1) - 1) // f["sw"] + 1
    logs = [math.log(v) for v in (
        f["mb"], p * q, (f["ih"] + 2 * f["ph"]) * (f["iw"] + 2 * f["pw"]), f["ic"] // f["g"],
        f["oc"] // f["g"], f["g"], f["kh"] * f["kw"])]
    flags = [float(f["sh"] > 1 or f["sw"] > 1), float(f["dh"] > 1 or f["dw"] > 1),
             float(f["oc"] // f["g"] <= 4), float(f["ic"] // f["g"] <= 4)]
    products = [a * b for i, a in enumerate(logs) for b in logs[i:]]
    return np.array([1.0] + logs + flags + products)


def load_layers(repo):
    """[{problem, source, weight, times: {algo: ms}}]: every timed layer of the data."""
    layers = []
    for rel in GRID_DATA:
        with open(os.path.join(repo, rel)) as fh:
            data = json.load(fh)
        for layer in data["layers"]:
            layers.append({"problem": layer["problem"], "source": "grid", "weight": 1.0,
                           "times": dict(layer["min_ms"])})
    paths = [p for pattern in SUITE_DATA for p in sorted(glob.glob(os.path.join(repo, pattern)))]
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        by_problem = {}
        for row in data["results"]:
            if "median_ms" in row and not row["algo"].startswith("torch"):
                entry = by_problem.setdefault(row["problem"], {
                    "problem": row["problem"], "source": os.path.basename(path)[:-5],
                    "weight": SUITE_WEIGHT, "times": {}})
                entry["times"][row["algo"]] = row["median_ms"]
        layers.extend(by_problem.values())
    return layers


def algorithms(layers):
    names = sorted({a for layer in layers for a in layer["times"]} - UNMODELLED)
    return names


def fit(layers, algos):
    """beta[a] (one row per algorithm) by weighted ridge least squares with layer offsets."""
    nf, na = len(FEATURES), len(algos)
    index = {a: i for i, a in enumerate(algos)}
    rows, targets, weights = [], [], []
    for layer in layers:
        timed = [a for a in layer["times"] if a in index]
        if len(timed) < 2:
            continue
        x = features(parse_descriptor(layer["problem"]))
        logs = np.array([math.log(layer["times"][a]) for a in timed])
        # Within-layer demeaning removes the layer's offset: row a reads
        # log t_a - mean(log t) = (beta_a - mean over timed a' of beta_a') . x
        for a, y in zip(timed, logs - logs.mean()):
            row = np.zeros(na * nf)
            for b in timed:
                row[index[b] * nf:(index[b] + 1) * nf] -= x / len(timed)
            row[index[a] * nf:(index[a] + 1) * nf] += x
            rows.append(row)
            targets.append(y)
            weights.append(layer["weight"] / math.sqrt(len(timed)))
    X, y, w = np.array(rows), np.array(targets), np.array(weights)
    # Ridge on standardised features (the intercepts are penalised too: only differences of
    # intercepts are identified, the penalty picks the smallest).
    scale = np.maximum(np.sqrt((X * X).mean(axis=0)), 1e-9)
    Xs = X / scale
    A = Xs.T @ (Xs * w[:, None]) + RIDGE * np.eye(X.shape[1])
    beta = np.linalg.solve(A, Xs.T @ (y * w)) / scale
    return beta.reshape(na, nf)


def predict_order(beta, algos, problem, candidates):
    """candidates ordered best first by the model (unmodelled ones last, in given order)."""
    x = features(parse_descriptor(problem))
    index = {a: i for i, a in enumerate(algos)}
    modelled = sorted((a for a in candidates if a in index), key=lambda a: beta[index[a]] @ x)
    return modelled + [a for a in candidates if a not in index]


def pick_quality(layer, pick):
    times = layer["times"]
    return times[pick] / min(times.values())


def summarize(qualities):
    q = np.array(qualities)
    return {"layers": len(q), "within_10pct": int((q <= WITHIN).sum()),
            "geomean_slowdown": float(np.exp(np.log(q).mean())) if len(q) else float("nan"),
            "worst": float(q.max()) if len(q) else float("nan")}


def evaluate(layers, algos):
    """Held-out (K-fold by layer) and in-sample picks, and two baselines."""
    usable = [layer for layer in layers if len([a for a in layer["times"] if a in algos]) >= 2]
    held = {}
    # Folds by problem (first appearance order), so no run of a held-out layer is trained on.
    problem_index = {}
    for layer in usable:
        problem_index.setdefault(layer["problem"], len(problem_index))
    fold_of = lambda layer: problem_index[layer["problem"]] % FOLDS  # noqa: E731
    for fold in range(FOLDS):
        test = [layer for layer in usable if fold_of(layer) == fold]
        train = [layer for layer in usable if fold_of(layer) != fold]
        beta = fit(train, algos)
        for layer in test:
            pick = predict_order(beta, algos, layer["problem"], list(layer["times"]))[0]
            held[id(layer)] = pick_quality(layer, pick)
    beta = fit(usable, algos)
    report = {}
    for source in ("grid", "suites", "all"):
        chosen = [layer for layer in usable if source == "all" or
                  (layer["source"] == "grid") == (source == "grid")]
        if not chosen:
            continue
        insample = [pick_quality(layer, predict_order(beta, algos, layer["problem"],
                                                      list(layer["times"]))[0])
                    for layer in chosen]
        fixed = {a: summarize([pick_quality(layer, a if a in layer["times"] else
                                            max(layer["times"], key=layer["times"].get))
                               for layer in chosen]) for a in algos}
        best_fixed = max(fixed, key=lambda a: (fixed[a]["within_10pct"], -fixed[a]["geomean_slowdown"]))
        report[source] = {"held_out": summarize([held[id(layer)] for layer in chosen]),
                          "in_sample": summarize(insample),
                          "best_single_algorithm": [best_fixed, fixed[best_fixed]]}
    return beta, report


def render_header(beta, algos, report, layers):
    lines = [
        "// GENERATED FILE: do not edit by hand.",
        "// Generated by tools/fit_heuristic.py from " + ", ".join(GRID_DATA + SUITE_DATA) + ".",
        "// Refit: python tools/fit_heuristic.py (see docs/algorithms.md, \"Algorithm selection\").",
        "//",
        "// CPU heuristic for algo=\"auto\": relative cost log t = coef . features (see FEATURES in",
        "// the script and heuristic_features in select.cpp); lower ranks first. Fitted with",
        "// layer fixed effects on %d timed layers (%d grid, %d suite)." % (
            len(layers), sum(1 for layer in layers if layer["source"] == "grid"),
            sum(1 for layer in layers if layer["source"] != "grid")),
    ]
    for source, r in report.items():
        h = r["held_out"]
        lines.append("// %s: auto within 10%% of the fastest on %d/%d layers held out (%d-fold by "
                     "layer), %d/%d in sample." % (source, h["within_10pct"], h["layers"], FOLDS,
                                                   r["in_sample"]["within_10pct"], h["layers"]))
    lines += [
        "#pragma once",
        "",
        '#include "convcore/convcore.h"',
        "",
        "namespace convcore {",
        "namespace heuristic_cpu {",
        "",
        "constexpr int kFeatureCount = %d;" % len(FEATURES),
        "// Features, in order:",
    ]
    lines += ["//   %2d %-10s %s" % (i, name, doc) for i, (name, doc) in
              enumerate(FEATURES[:1 + len(LOGS) + len(FLAGS)])]
    lines.append("//   %d-%d: the products LOGS[i] * LOGS[j], i <= j, over features 1-%d in order" % (
        1 + len(LOGS) + len(FLAGS), len(FEATURES) - 1, len(LOGS)))
    lines += [
        "",
        "struct AlgoModel {",
        "    convcoreConvolutionFwdAlgo_t algo;",
        "    double coef[kFeatureCount];",
        "};",
        "",
        "constexpr AlgoModel kModels[] = {",
    ]
    for a, row in zip(algos, beta):
        coefs = ", ".join("%.4f" % (0.0 if abs(v) < 5e-5 else v) for v in row)
        lines.append("    {CONVCORE_FWD_ALGO_%s, {%s}}," % (a.upper(), coefs))
    lines += ["};", "", "}  // namespace heuristic_cpu", "}  // namespace convcore", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", default=os.path.join(REPO, OUTPUT))
    ap.add_argument("--repo", default=REPO, help="where the data lies (default: this checkout)")
    ap.add_argument("--report", metavar="JSON", help="also write the accuracy report here")
    args = ap.parse_args(argv)
    layers = load_layers(args.repo)
    algos = algorithms(layers)
    beta, report = evaluate(layers, algos)
    for source, r in report.items():
        for kind in ("held_out", "in_sample"):
            s = r[kind]
            print(f"{source:6s} {kind:9s}: auto within 10% of the fastest on "
                  f"{s['within_10pct']}/{s['layers']} layers, geomean t/best "
                  f"{s['geomean_slowdown']:.3f}, worst {s['worst']:.2f}")
        a, s = r["best_single_algorithm"]
        print(f"{source:6s} baseline : always {a}: within 10% on {s['within_10pct']}/{s['layers']},"
              f" geomean t/best {s['geomean_slowdown']:.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(render_header(beta, algos, report, layers))
    if args.report:
        with open(args.report, "w") as fh:
            json.dump(report, fh, indent=1)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
