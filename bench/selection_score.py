"""How well algorithm selection holds on a `convcore bench --json` run: auto's verdict (the
measured choice against the fastest algorithm, re-timed head to head where they differ), what
the heuristic alone would have picked (its first choice's first-round time over the fastest),
where the fastest algorithm sits in the heuristic's ranking, and the same counts over the
layers the heuristic was never fitted on (neither in bench/data/grid_cpu.json nor in the suite
runs of tools/fit_heuristic.py's SUITE_DATA).

    .venv/bin/python bench/selection_score.py RUN.json
"""
import argparse
import collections
import glob
import json
import os
import sys

import convcore
from convcore import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WITHIN = cli.WITHIN


def fitted_problems():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import fit_heuristic
    seen = set()
    for pattern in fit_heuristic.GRID_DATA:
        for path in glob.glob(os.path.join(REPO, pattern)):
            seen.update(layer["problem"] for layer in json.load(open(path))["layers"])
    for pattern in fit_heuristic.SUITE_DATA:
        for path in glob.glob(os.path.join(REPO, pattern)):
            seen.update(row["problem"] for row in json.load(open(path))["results"])
    return seen


def score(results):
    layers = collections.defaultdict(list)
    for row in results:
        if "median_ms" in row and not row["algo"].startswith("torch"):
            layers[row["layer"]].append(row)
    fitted = fitted_problems()
    rows = []
    for layer, timed in layers.items():
        problem = cli.parse_problem(timed[0]["problem"])
        by_algo = {r["algo"]: r for r in timed}
        best = min(timed, key=lambda r: r["median_ms"])
        ranking = convcore.Convolution(problem.desc()).applicable_algos(problem.x_shape, problem.w_shape)
        ranking = [a for a in ranking if a in by_algo]
        auto = next((r for r in timed if r.get("auto")), None)
        rows.append({"layer": layer, "seen": timed[0]["problem"] in fitted,
                     "auto": auto and cli.auto_verdict(auto) <= WITHIN,
                     "heuristic": by_algo[ranking[0]]["median_ms"] / best["median_ms"] <= WITHIN,
                     "rank_of_fastest": ranking.index(best["algo"]) + 1})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a convcore bench --json file")
    args = parser.parse_args()
    rows = score(json.load(open(args.run))["results"])
    for title, subset in (("all layers", rows), ("never fitted on", [r for r in rows if not r["seen"]])):
        n = len(subset)
        if not n:
            continue
        auto = sum(bool(r["auto"]) for r in subset)
        heuristic = sum(r["heuristic"] for r in subset)
        ranks = collections.Counter(min(r["rank_of_fastest"], 4) for r in subset)
        print(f"{title}: {n} layers; auto (measured) within 10% of the fastest on {auto}/{n} "
              f"({auto / n:.0%}); the heuristic's first choice alone on {heuristic}/{n} "
              f"({heuristic / n:.0%}); the fastest is the heuristic's 1st/2nd/3rd/later on "
              f"{ranks[1]}/{ranks[2]}/{ranks[3]}/{ranks[4]}")
    misses = [r["layer"] for r in rows if not r["auto"]]
    print("auto's misses:", ", ".join(misses) or "none")


if __name__ == "__main__":
    main()
