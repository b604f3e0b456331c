"""convcore/_shapes.py, the one Python copy of the output-size formulas (a convolution's and a
transposed convolution's), against the core's own answers on many random problems (odd sizes,
padding, stride, dilation, 1-D, 2-D and 3-D, output_padding), and convcore.torch's fake kernels,
which compute it on torch's symbolic sizes."""

import numpy as np
import pytest

import convcore
from convcore import _convcore as _C
from convcore._shapes import output_size, output_sizes, transposed_output_size, transposed_output_sizes

PROBLEMS = 400  # per test and number of spatial dimensions


def _axis(rng):
    """(size, padding, kernel, stride, dilation) of one axis: small and odd values mostly, some
    whose dilated filter does not fit."""
    return (int(rng.integers(1, 24)), int(rng.integers(0, 5)), int(rng.integers(1, 8)),
            int(rng.integers(1, 5)), int(rng.integers(1, 4)))


def _core_2d(axes, groups=1):
    """The core's output (P, Q) for two axes (convcoreGetConvolution2dForwardOutputDim, through the
    bindings), or None where it refuses the problem."""
    (h, ph, r, sh, dh), (w, pw, s, sw, dw) = axes
    params = _C.ConvParams(ph, pw, sh, sw, dh, dw, groups, _C.CROSS_CORRELATION)
    try:
        return tuple(_C.output_shape([1, 2 * groups, h, w], [groups, 2, r, s], params)[2:])
    except convcore.BadParamError:
        return None


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_output_size_is_the_cores(dims):
    """output_size per axis, and convcore.Convolution(...).output_shape (which asks the core for
    the 2-D plane and _shapes for a 3-D depth), against the core's 2-D answer axis by axis."""
    rng = np.random.default_rng(61 + dims)
    refused = 0
    for _ in range(PROBLEMS):
        axes = [_axis(rng) for _ in range(dims)]
        ours = output_sizes(*zip(*axes))
        assert ours == tuple(output_size(*a) for a in axes)
        # each axis as the core's H (W: a 1 x 1 filter on one column, output 1)
        for axis, size in zip(axes, ours):
            core = _core_2d((axis, (1, 0, 1, 1, 1)))
            assert (core is None) == (size < 1), (axis, size, core)
            if core is not None:
                assert core == (size, 1), (axis, size, core)
        # pairs of axes, as the core's (H, W)
        for pair in zip(axes, axes[1:]):
            core = _core_2d(pair)
            expect = output_sizes(*zip(*pair))
            assert (core is None) == (min(expect) < 1), (pair, expect, core)
            assert core is None or core == expect, (pair, expect, core)
        size, padding, kernel, stride, dilation = zip(*axes)
        conv = convcore.Convolution(padding=padding, stride=stride, dilation=dilation)
        try:
            shape = conv.output_shape((2, 3) + size, (5, 3) + kernel)
        except convcore.BadParamError:
            assert min(ours) < 1, (axes, ours)
            refused += 1
            continue
        assert shape == (2, 5) + ours, (axes, shape, ours)
    assert 0 < refused < PROBLEMS  # both kinds were tried


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_transposed_output_size_is_the_cores(dims):
    """transposed_output_size per axis against the core's transposed output dims
    (convcoreGetConvolutionNdTransposedOutputDim, PyTorch's output_padding rule: smaller than
    the stride or the dilation), groups and channels included."""
    rng = np.random.default_rng(610 + dims)
    refused = 0
    for _ in range(PROBLEMS):
        axes = [_axis(rng) for _ in range(dims)]
        output_padding = [int(rng.integers(0, max(st, dl))) for _, _, _, st, dl in axes]
        size, padding, kernel, stride, dilation = zip(*axes)
        groups = int(rng.integers(1, 3))
        ours = transposed_output_sizes(size, padding, kernel, stride, dilation, output_padding)
        assert ours == tuple(transposed_output_size(*a, op) for a, op in zip(axes, output_padding))
        try:
            core = _C.transposed_output_shape([2, 4 * groups, *size], [4 * groups, 3, *kernel], list(padding),
                                              list(stride), list(dilation), groups, output_padding)
        except convcore.BadParamError:
            assert min(ours) < 1, (axes, output_padding, ours)
            refused += 1
            continue
        assert tuple(core) == (2, 3 * groups) + ours, (axes, output_padding, core, ours)
    assert 0 < refused < PROBLEMS


def test_the_transposed_size_inverts_the_forward_one():
    """A transposed convolution's output is an input of the convolution it transposes that gives
    back its input's size (output_padding chooses among the inputs that do, when stride > 1)."""
    rng = np.random.default_rng(6161)
    for _ in range(PROBLEMS):
        size, padding, kernel, stride, dilation = _axis(rng)
        extra = int(rng.integers(0, stride))
        out = transposed_output_size(size, padding, kernel, stride, dilation, extra)
        if out >= 1 and output_size(out, padding, kernel, stride, dilation) >= 1:
            assert output_size(out, padding, kernel, stride, dilation) == size


def _symbolic_output_shape(op, inputs, args):
    """The output shape that op's fake kernel gives under make_fx's symbolic tracing (inputs'
    sizes as SymInts), as a function of the inputs' sizes."""
    torch = pytest.importorskip("torch")
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(lambda *tensors: op(*tensors, *args), tracing_mode="symbolic")(*inputs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    out = out[0] if isinstance(out, (tuple, list)) else out
    shape = out.meta["val"].shape
    symbols = {}
    for node, tensor in zip(placeholders, inputs):
        for sym, size in zip(node.meta["val"].shape, tensor.shape):
            if isinstance(sym, torch.SymInt):
                symbols.setdefault(sym.node.expr, size)

    def evaluate(sizes_of):
        """The output shape for inputs of other sizes (``sizes_of``: the inputs' new shapes)."""
        mapping = {}
        for node, new in zip(placeholders, sizes_of):
            for sym, size in zip(node.meta["val"].shape, new):
                if isinstance(sym, torch.SymInt):
                    mapping[sym.node.expr] = size
        return tuple(int(s.node.expr.xreplace(mapping)) if isinstance(s, torch.SymInt) else int(s)
                     for s in shape)

    return shape, evaluate


def test_fake_kernels_compute_symbolic_sizes():
    """convcore.torch's fake kernels compute the output size on SymInts (torch.compile and
    torch.export with dynamic shapes): traced symbolically, the spatial sizes stay expressions of
    the input's, which give PyTorch's sizes for inputs of other sizes."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    import convcore.torch  # noqa: F401  (registers the operators)
    ops = torch.ops.convcore
    cases = [
        (ops.conv2d, (2, 3, 11, 9), (4, 3, 3, 2), ([2, 1], [1, 2], [1, 2], 1, "auto"),
         lambda x, w: F.conv2d(x, w, None, (2, 1), (1, 2), (1, 2))),
        (ops.conv3d, (1, 2, 7, 9, 8), (3, 2, 3, 2, 3), ([1, 2, 3], [1, 0, 2], [2, 1, 1], 1, "auto"),
         lambda x, w: F.conv3d(x, w, None, (1, 2, 3), (1, 0, 2), (2, 1, 1))),
        (ops.conv_transpose2d, (2, 4, 5, 7), (4, 3, 3, 2), ([2, 3], [1, 0], [1, 2], [1, 1], 1, "auto"),
         lambda x, w: F.conv_transpose2d(x, w, None, (2, 3), (1, 0), (1, 2))),
        (ops.conv_transpose3d, (1, 2, 4, 5, 6), (2, 3, 2, 3, 2), ([2, 1, 2], [0, 1, 1], [1, 0, 1], [1, 1, 1], 1,
                                                              "auto"),
         lambda x, w: F.conv_transpose3d(x, w, None, (2, 1, 2), (0, 1, 1), (1, 0, 1))),
    ]
    for op, x_shape, w_shape, args, reference in cases:
        # (the input's spatial sizes are unlike every other size: the trace gives equal sizes one
        # symbol, and an input size of 0 or 1 none)
        assert len(set(x_shape[2:])) == len(x_shape) - 2 and not set(x_shape[2:]) & set(x_shape[:2] + w_shape)
        x, w = torch.randn(x_shape), torch.randn(w_shape)
        shape, evaluate = _symbolic_output_shape(lambda x, w, *a: op(x, w, None, *a), (x, w), args)
        assert all(isinstance(s, torch.SymInt) for s in shape[2:]), (op, shape)
        for grow in range(4):
            bigger = x_shape[:2] + tuple(s + grow * (i + 1) for i, s in enumerate(x_shape[2:]))
            expected = tuple(reference(torch.empty(bigger), w).shape)
            assert evaluate((bigger, w_shape)) == expected, (op, bigger, shape)
