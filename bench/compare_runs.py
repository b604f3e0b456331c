"""Markdown summary of one or more `convcore bench --json` runs of the same suites.

Per layer and run (the median of each contender's reps, or --stat min): convcore's fastest algorithm and PyTorch's time over it (> 1: convcore is
faster), and what auto picked with its time over the fastest (and, where the bench re-timed
auto's choice head to head against the first round's fastest, that ratio too). Then per run the number of layers
where auto is within 10% of the fastest (the selection target), and how often two runs agree on the
fastest algorithm (the noise floor of that target). Layers timed while the two vCPUs did not
share a cache (the bench's `round_trip_ns` above 200 ns, convcore.bench_timing.SPLIT_NS) are marked
"split", and each run's count is repeated over its other layers.

    python bench/compare_runs.py DIR1 [DIR2 ...]     # each DIR holds <suite>.json files
"""

import argparse
import glob
import json
import os
import sys

WITHIN = 1.10
SPLIT_NS = 200  # as convcore.bench_timing.SPLIT_NS (this script reads JSON only; it does not import convcore)


def load_run(directory, stat="median"):
    """{suite: {layer: {algo: ms, ...}, ...}}, {(suite, layer): auto algo} and
    {(suite, layer): auto's head-to-head ratio to the fastest} (where the bench re-timed auto's
    choice against the first round's fastest), and the set of (suite, layer) timed with the vCPUs
    split; ms is the median of the reps, or their minimum (the least disturbed rep) with
    stat="min"."""
    times, autos, retimed, split = {}, {}, {}, set()
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        suite = os.path.basename(path)[:-5]
        with open(path) as f:
            data = json.load(f)
        for row in data["results"]:
            if "median_ms" not in row:
                continue
            ms = min(row["times_ms"]) if stat == "min" else row["median_ms"]
            times.setdefault(suite, {}).setdefault(row["layer"], {})[row["algo"]] = ms
            if max((v for v in row.get("round_trip_ns") or [] if v), default=0) > SPLIT_NS:
                split.add((suite, row["layer"]))
            if row.get("auto"):
                autos[(suite, row["layer"])] = row["algo"]
                if row.get("retime"):
                    retimed[(suite, row["layer"])] = row["retime"]["ratio"]
    return times, autos, retimed, split


def fastest(layer_times):
    ours = {a: t for a, t in layer_times.items() if not a.startswith("torch")}
    best = min(ours, key=ours.get)
    return best, ours[best]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="directories of --json results, one per run")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="per contender: the median of its reps (default, as the bench) or the minimum")
    args = ap.parse_args(argv)
    runs = [load_run(d, args.stat) for d in args.runs]
    names = [os.path.basename(os.path.normpath(d)) for d in args.runs]

    head = "| suite | layer | " + " | ".join(f"{n}: fastest, torch/it | {n}: auto, t/fastest" for n in names) + " |"
    print(head)
    print("|" + " --- |" * (2 + 2 * len(runs)))
    within = [[0, 0] for _ in runs]
    within_unsplit = [[0, 0] for _ in runs]
    first_round = [0 for _ in runs]
    agree = [0, 0]
    oracle = [0, 0]  # run 1's fastest, timed in run 2: within 10% of run 2's fastest?
    first_times = runs[0][0]
    for suite in first_times:
        for layer in first_times[suite]:
            cells, winners = [], []
            for i, (times, autos, retimed, split) in enumerate(runs):
                lt = times.get(suite, {}).get(layer)
                if not lt:
                    cells += ["-", "-"]
                    continue
                best, best_ms = fastest(lt)
                winners.append(best)
                torch_ms = lt.get("torch")
                mark = " (split)" if (suite, layer) in split else ""
                cells.append((f"{best} {torch_ms / best_ms:.2f}x" if torch_ms else best) + mark)
                auto = autos.get((suite, layer))
                if auto and auto in lt:
                    ratio = lt[auto] / best_ms
                    again = retimed.get((suite, layer))
                    first_round[i] += ratio <= WITHIN
                    ok = (again if again is not None else ratio) <= WITHIN
                    within[i][0] += ok
                    within[i][1] += 1
                    if (suite, layer) not in split:
                        within_unsplit[i][0] += ok
                        within_unsplit[i][1] += 1
                    cells.append(f"{auto} {ratio:.2f}" + (f" (head to head {again:.2f})"
                                                          if again is not None else ""))
                else:
                    cells.append("-")
            if len(winners) >= 2:
                agree[0] += winners[0] == winners[1]
                agree[1] += 1
                second = runs[1][0][suite][layer]
                if winners[0] in second:
                    oracle[0] += second[winners[0]] / fastest(second)[1] <= WITHIN
                    oracle[1] += 1
            print(f"| {suite} | {layer} | " + " | ".join(cells) + " |")
    print()
    for name, (ok, total), (ok_u, total_u), first, (_, _, retimed, split) in zip(
            names, within, within_unsplit, first_round, runs):
        print(f"- {name}: auto within 10% of the fastest on {ok}/{total} layers"
              f" ({100.0 * ok / max(total, 1):.0f}%)" +
              (f"; in the first round, before auto's choice and the fastest were re-timed head to head, {first}/{total}"
               if retimed else "") +
              (f"; {len(split)} layers timed with the vCPUs split, on the other {total_u}: {ok_u}" if split else ""))
    if agree[1]:
        print(f"- {names[0]} and {names[1]} agree on the fastest algorithm on {agree[0]}/{agree[1]} layers")
        print(f"- an oracle of {names[0]} (its fastest algorithm) is within 10% of the fastest in "
              f"{names[1]} on {oracle[0]}/{oracle[1]} layers ({100.0 * oracle[0] / oracle[1]:.0f}%): "
              f"the noise floor of the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
