"""The output size of a convolution, and of a transposed convolution, along one spatial axis: the
core's formulas (conv_output_size in cpp/common/conv_index.hpp; the transposed one,
convcoreGetConvolutionNdTransposedOutputDim's), the one copy of each in Python.

Python computes them only where the core cannot be asked: torch's symbolic sizes (SymInt) in
convcore.torch's fake kernels, which torch.compile and torch.export trace with dynamic shapes
(so only +, -, * and floor division, which SymInts support), the depth of a 3-D convolution
(convcore/_nd.py), and per-call paths that must not cross into the bindings.
tests/python/test_shapes.py checks them against the core's answers."""

from typing import Any, Sequence, Tuple


def output_size(size: Any, padding: Any, kernel: Any, stride: Any, dilation: Any) -> Any:
    """The output extent along one axis: (size + 2 * padding - dilation * (kernel - 1) - 1)
    // stride + 1, rounded down as every framework does (less than 1 where the dilated filter
    does not fit in the padded input)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def output_sizes(sizes: Sequence[Any], padding: Sequence[Any], kernel: Sequence[Any],
                 stride: Sequence[Any], dilation: Sequence[Any]) -> Tuple[Any, ...]:
    """output_size along each spatial axis."""
    return tuple(output_size(*axis) for axis in zip(sizes, padding, kernel, stride, dilation))


def transposed_output_size(size: Any, padding: Any, kernel: Any, stride: Any, dilation: Any,
                           output_padding: Any) -> Any:
    """The output extent of the transposed convolution along one axis (the input extent of the
    convolution it transposes, plus output_padding): (size - 1) * stride - 2 * padding +
    dilation * (kernel - 1) + output_padding + 1."""
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def transposed_output_sizes(sizes: Sequence[Any], padding: Sequence[Any], kernel: Sequence[Any],
                            stride: Sequence[Any], dilation: Sequence[Any],
                            output_padding: Sequence[Any]) -> Tuple[Any, ...]:
    """transposed_output_size along each spatial axis."""
    return tuple(transposed_output_size(*axis)
                 for axis in zip(sizes, padding, kernel, stride, dilation, output_padding))
