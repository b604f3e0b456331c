"""``convcore bench --plot DIR``: this machine's versions of the papers' figures, from bench results.

Finds the sweeps in a suite's results by itself:
- time against input size: layers equal but for ih/iw (at least 3 sizes), one line per
  algorithm, PyTorch's conv2d dashed (PolyHankel's Fig. at k = 5: bench/suites/polyhankel_cpu.txt);
- time against kernel size: layers equal but for kh/kw (and their padding), at least 3 sizes;
- a crossover map: layers equal but for input and kernel size (at least 2 of each): a coloured
  grid of the fastest convcore algorithm per (input size, kernel size); blank cells were not
  timed (bench/suites/crossover_cpu.txt is a full grid).
matplotlib is optional: it is imported only here, with a clear error when missing.
"""

import os
import re
from typing import Dict, List, Tuple

_SIZE_FIELDS = ("ih", "iw", "ph", "pw")
_KERNEL_FIELDS = ("kh", "kw", "ph", "pw")


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--plot needs matplotlib, which is not installed: pip install matplotlib") \
            from None
    return plt


def _fields(descriptor):
    return dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", descriptor))


def _layers(results):
    """{descriptor: {algo: median ms}} over the timed rows (the first of duplicate layers)."""
    layers: Dict[str, Dict[str, float]] = {}
    owner: Dict[str, str] = {}
    for r in results:
        if "median_ms" not in r:
            continue
        key = r["problem"]
        if owner.setdefault(key, r["layer"]) != r["layer"]:
            continue  # the same problem under a second name
        layers.setdefault(key, {})[r["algo"]] = r["median_ms"]
    return layers


def _groups(layers, varying, min_values, axis):
    """Groups of layers equal except for the `varying` fields, with >= min_values distinct
    values of `axis`: [(fixed fields, [descriptor, ...])]."""
    groups: Dict[Tuple[Tuple[str, int], ...], List[str]] = {}
    for d in layers:
        f = _fields(d)
        key = tuple(sorted((k, v) for k, v in f.items() if k not in varying))
        groups.setdefault(key, []).append(d)
    out = []
    for key, members in groups.items():
        if len({_fields(d)[axis] for d in members}) >= min_values:
            out.append((dict(key), sorted(members, key=lambda d: _fields(d)[axis])))
    return out


def _title(fixed, varying_text):
    names = [("mb", "N"), ("ic", "C"), ("oc", "K"), ("kh", "k"), ("ih", "input"), ("sh", "stride"),
             ("dh", "dilation"), ("g", "groups")]
    parts = [f"{label} {fixed[k]}" for k, label in names if k in fixed and
             not (k in ("sh", "dh", "g") and fixed[k] == 1)]
    return f"{', '.join(parts)}: time against {varying_text}"


def _line_plot(plt, layers, members, axis, fixed, xlabel, path, device):
    xs = [_fields(d)[axis] for d in members]
    algos = sorted({a for d in members for a in layers[d]})
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for algo in algos:
        points = [(x, layers[d][algo]) for x, d in zip(xs, members) if algo in layers[d]]
        if algo.startswith("torch"):
            ax.plot(*zip(*points), "k--", linewidth=2, label="PyTorch conv2d (reference)")
        else:
            ax.plot(*zip(*points), marker="o", markersize=3, label=algo)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("time per forward pass (ms, median)")
    ax.set_yscale("log")
    ax.set_title(_title(fixed, xlabel) + f" ({device})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _crossover_plot(plt, layers, members, fixed, path, device):
    sizes = sorted({_fields(d)["ih"] for d in members})
    kernels = sorted({_fields(d)["kh"] for d in members})
    winner = {}
    for d in members:
        f = _fields(d)
        times = {a: t for a, t in layers[d].items() if not a.startswith("torch")}
        if times:
            winner[(f["kh"], f["ih"])] = min(times, key=lambda a: times[a])
    algos = sorted(set(winner.values()))
    colours = plt.get_cmap("tab20").colors
    fig, ax = plt.subplots(figsize=(1.2 * len(sizes) + 3, 0.6 * len(kernels) + 2))
    for (k, size), algo in winner.items():
        i, j = kernels.index(k), sizes.index(size)
        ax.add_patch(plt.Rectangle((j, i), 1, 1, color=colours[algos.index(algo) % len(colours)]))
        ax.text(j + 0.5, i + 0.5, algo.replace("_", "\n", 1), ha="center", va="center", fontsize=6)
    ax.set_xlim(0, len(sizes))
    ax.set_ylim(0, len(kernels))
    ax.set_xticks([j + 0.5 for j in range(len(sizes))], [str(s) for s in sizes])
    ax.set_yticks([i + 0.5 for i in range(len(kernels))], [str(k) for k in kernels])
    ax.set_xlabel("input size (H = W)")
    ax.set_ylabel("kernel size (R = S)")
    fixed = {k: v for k, v in fixed.items() if k not in ("kh", "ih")}
    ax.set_title(_title(fixed, "input x kernel size").replace("time against", "fastest at")
                 + f" ({device})", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[i % len(colours)]) for i in range(len(algos))]
    ax.legend(handles, algos, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _name(fixed, kind):
    return kind + "_" + "".join(f"{k}{v}" for k, v in sorted(fixed.items())) + ".png"


def plot_results(results, directory, device="cpu"):
    """Write every figure the results allow into `directory`; returns the PNG paths."""
    plt = _pyplot()
    os.makedirs(directory, exist_ok=True)
    layers = _layers(results)
    paths = []
    for fixed, members in _groups(layers, _SIZE_FIELDS, 3, "ih"):
        paths.append(_line_plot(plt, layers, members, "ih", fixed, "input size (H = W)",
                                os.path.join(directory, _name(fixed, "time_vs_input")), device))
    for fixed, members in _groups(layers, _KERNEL_FIELDS, 3, "kh"):
        paths.append(_line_plot(plt, layers, members, "kh", fixed, "kernel size (R = S)",
                                os.path.join(directory, _name(fixed, "time_vs_kernel")), device))
    for fixed, members in _groups(layers, _SIZE_FIELDS + _KERNEL_FIELDS, 2, "ih"):
        if len({_fields(d)["kh"] for d in members}) >= 2:
            paths.append(_crossover_plot(plt, layers, members, fixed,
                                         os.path.join(directory, _name(fixed, "crossover")), device))
    return paths
