"""Lavin & Gray's Table 4 for every convcore algorithm: the maximum absolute element error of
each forward algorithm on the VGG 3x3 layers (batch 1, float32 data and filters drawn uniformly
from [-1, 1]) against a float64 convolution of the same float32 inputs.

    .venv/bin/python bench/accuracy_table.py [--out bench/results/accuracy-table4.md]
    .venv/bin/python bench/accuracy_table.py --dims 3 [--out bench/results/accuracy-table-3d.md]

--dims 3 measures r3d_18's 3x3x3 layers (H and W of the first halved) the same way: each 2-D
algorithm through the "taps" schedule (one 2-D call per depth tap, summed), and the 3-D
Winograd that runs the whole volume in one call ("native": F(m x m, 3x3) on the planes, the
depth taps summed in the transformed domain, or the nested F(m x m x m, 3x3x3) where it applies),
x and y channels-last.

The float64 reference is NumPy's (im2col + a float64 matmul: independent of convcore). Each
cell is "max abs error (relative L2 error)"; an algorithm that cannot run the layer shows why.
The algorithms with an NHWC path of their own that computes differently (Winograd's fused
schedule) are measured in NHWC too (x and y channels-last), as extra columns.
"""

import argparse
import platform
import subprocess
import sys

import numpy as np

import convcore

# VGG-E layers as in Lavin & Gray Table 4 (C x H x W -> K, 3x3, padding 1), batch 1.
LAYERS = [
    ("conv1.2", 64, 224, 64),
    ("conv2.2", 128, 112, 128),
    ("conv3.2", 256, 56, 256),
    ("conv4.2", 512, 28, 512),
    ("conv5", 512, 14, 512),
]
# Algorithms whose NHWC path computes in another order than their NCHW one.
NHWC_ALGOS = ["winograd_2x2_3x3", "winograd_4x4_3x3"]


def channels_last(a):
    """The same N x C x H x W array stored NHWC (a view with NHWC strides)."""
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
# Lavin & Gray Table 4 (max abs element error): direct (their cuDNN), F(2x2,3x3), F(4x4,3x3).
PAPER = {
    "conv1.2": ("4.0e-5", "1.5e-5", "2.8e-4"),
    "conv2.2": ("8.0e-5", "2.9e-5", "5.4e-4"),
    "conv3.2": ("1.5e-4", "5.3e-5", "9.1e-4"),
    "conv4.2": ("3.2e-4", "5.3e-5", "1.0e-3"),
    "conv5": ("3.4e-4", "4.2e-5", "1.1e-3"),
}


def reference_conv3x3_pad1(x, w):
    """float64 cross-correlation, 3x3 filter, padding 1, stride 1: im2col + matmul."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    k = w.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, c, 3, 3, h, wd))
    for r in range(3):
        for s in range(3):
            cols[:, :, r, s] = xp[:, :, r:r + h, s:s + wd]
    y = np.einsum("kq,nqp->nkp", w.reshape(k, -1), cols.reshape(n, c * 9, h * wd), optimize=True)
    return y.reshape(n, k, h, wd)


# r3d_18's 3x3x3 stride-1 layers (C, D, H=W, K), padding 1, batch 1; the first at half H, W.
LAYERS_3D = [
    ("layer1", 64, 16, 28, 64),
    ("layer2", 128, 8, 28, 128),
    ("layer3", 256, 4, 14, 256),
    ("layer4", 512, 2, 7, 512),
]
NATIVE_3D = ["winograd_2x2_3x3", "winograd_4x4_3x3", "cyclic_minimal"]


def reference_conv3x3x3_pad1(x, w):
    """float64 cross-correlation, 3x3x3 filter, padding 1, stride 1: a sum over the 27 taps."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    w = w.astype(np.float64)
    n, _, d, h, wd = x.shape
    y = np.zeros((n, w.shape[0], d - 2, h - 2, wd - 2))
    for t in range(3):
        for r in range(3):
            for s in range(3):
                y += np.einsum("kc,ncdhw->nkdhw", w[:, :, t, r, s],
                               x[:, :, t:t + d - 2, r:r + h - 2, s:s + wd - 2], optimize=True)
    return y


def cell(y, ref):
    diff = np.asarray(y, dtype=np.float64) - ref
    return f"{np.abs(diff).max():.1e} ({np.linalg.norm(diff) / np.linalg.norm(ref):.1e})"


def table_3d(rng, seed):
    conv = convcore.Convolution(padding=(1, 1, 1))
    algos = [a.name.lower() for a in convcore.Algo]
    rows = {}
    for name, c, d, hw, k in LAYERS_3D:
        x = rng.uniform(-1, 1, (1, c, d, hw, hw)).astype(np.float32)
        w = rng.uniform(-1, 1, (k, c, 3, 3, 3)).astype(np.float32)
        ref = reference_conv3x3x3_pad1(x, w)
        xl = np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
        applicable = set(conv.applicable_algos(x.shape, w.shape))
        cells = {}
        conv._nd.schedule = "taps"
        for algo in algos:
            cells[algo] = cell(conv.forward(x, w, algo=algo), ref) if algo in applicable else "n/a"
            print(f"{name:8s} {algo:18s} {cells[algo]}", file=sys.stderr)
        conv._nd.schedule = "native"
        for algo in NATIVE_3D:
            try:
                cells[algo + " native"] = cell(conv.forward(xl, w, algo=algo), ref)
            except convcore.NotSupportedError:  # the schedule does not apply to this layer
                cells[algo + " native"] = "n/a"
            print(f"{name:8s} {algo + ' native':18s} {cells[algo + ' native']}", file=sys.stderr)
        conv._nd.schedule = "auto"
        rows[name] = cells
    columns = algos + [a + " native" for a in NATIVE_3D]
    lines = [
        "# Forward error of every convcore algorithm on 3-D (3x3x3) layers",
        "",
        f"{provenance()} Command: `.venv/bin/python bench/accuracy_table.py --dims 3` (seed {seed}).",
        "",
        "Max abs element error (float32) against a float64 NumPy convolution of the same float32",
        "inputs; relative L2 error in brackets. r3d_18's 3x3x3 stride-1 layers (layer1 at half",
        "its H and W), batch 1, padding 1, data and filters uniform in [-1, 1]. Each 2-D algorithm",
        "runs through the \"taps\" schedule (a 2-D call per depth tap, accumulated in the output);",
        "\"native\" is the 3-D Winograd in one call, x and y channels-last (docs/c_api.md): the",
        "nested F(m x m x m, 3x3x3) on layer1-3 (16, 8 and 4 output depths), the per-tap",
        "F(m x m, 3x3) on layer4 (2 output depths: the nested form would make more products).",
        "\"cyclic_minimal native\" is the 4-point cyclic convolution along the depth nested around",
        "the 2-D CYCLIC_MINIMAL (cpu/cyclic_minimal_3d.hpp) on layer1-2; on layer3-4 (4 and 2",
        "output depths) it would not make fewer 2-D convolutions (n/a: the taps schedule runs).",
        "The bound this project states for the nested F(4x4x4,3x3x3) (docs/c_api.md): a relative",
        "L2 error at most 4x the 2-D F(4x4,3x3)'s on the same layer (the winograd_4x4_3x3 column:",
        "one more transformed axis) and inside WINOGRAD_4X4_3X3's declared bound (5e-4).",
        "",
    ] + markdown_table(["layer"], [[name] for name, *_ in LAYERS_3D], columns,
                       lambda i, a: rows[LAYERS_3D[i][0]][a])
    return lines


def provenance():
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    info = convcore.build_info()
    return f"Commit {commit}; {platform.machine()}, {info.get('blas', '')}, {info.get('fft', '')}."


def markdown_table(head, first, columns, value, extra_head=(), extra=None):
    """Markdown tables of six columns each: rows `first[i]` + value(i, column) (+ extra(i) on
    the last table)."""
    lines = []
    for start in range(0, len(columns), 6):
        chunk = columns[start:start + 6]
        last = start + 6 >= len(columns)
        header = list(head) + chunk + (list(extra_head) if last else [])
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join("---" for _ in header) + " |")
        for i, lead in enumerate(first):
            row = list(lead) + [value(i, a) for a in chunk] + (list(extra(i)) if last and extra else [])
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dims", type=int, choices=(2, 3), default=2)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    if args.dims == 3:
        lines = table_3d(rng, args.seed)
        with open(args.out or "bench/results/accuracy-table-3d.md", "w") as f:
            f.write("\n".join(lines))
        print("\n".join(lines))
        return
    conv = convcore.Convolution(padding=1)
    algos = [a.name.lower() for a in convcore.Algo]
    rows = {}
    for name, c, hw, k in LAYERS:
        x = rng.uniform(-1, 1, (1, c, hw, hw)).astype(np.float32)
        w = rng.uniform(-1, 1, (k, c, 3, 3)).astype(np.float32)
        ref = reference_conv3x3_pad1(x, w)
        applicable = set(conv.applicable_algos(x.shape, w.shape))
        cells = {}
        for algo in algos:
            if algo not in applicable:
                cells[algo] = "n/a"
                continue
            cells[algo] = cell(conv.forward(x, w, algo=algo), ref)
            print(f"{name:8s} {algo:18s} {cells[algo]}", file=sys.stderr)
        for algo in NHWC_ALGOS:
            out = channels_last(np.empty((1, k, hw, hw), np.float32))
            cells[algo + " nhwc"] = cell(conv.forward(channels_last(x), w, algo=algo, out=out), ref)
            print(f"{name:8s} {algo + ' nhwc':18s} {cells[algo + ' nhwc']}", file=sys.stderr)
        rows[name] = cells

    lines = [
        "# Lavin & Gray Table 4, every convcore algorithm",
        "",
        f"{provenance()} Command: `.venv/bin/python bench/accuracy_table.py` (seed {args.seed}).",
        "",
        "Max abs element error of each forward algorithm (float32) against a float64 NumPy",
        "convolution of the same float32 inputs; relative L2 error in brackets. VGG layers,",
        "batch 1, 3x3, padding 1, data and filters uniform in [-1, 1]. The paper's Table 4",
        "(cuDNN direct, F(2x2,3x3), F(4x4,3x3) with points 0, ±1, ±2) is on the right.",
        "",
    ]
    columns = algos + [a + " nhwc" for a in NHWC_ALGOS]
    lines += markdown_table(["layer"], [[name] for name, *_ in LAYERS], columns,
                            lambda i, a: rows[LAYERS[i][0]][a],
                            ["paper direct", "paper 2x2", "paper 4x4"], lambda i: PAPER[LAYERS[i][0]])
    with open(args.out or "bench/results/accuracy-table4.md", "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
