"""convcore for PyTorch: a drop-in for ``torch.nn.Conv2d`` / ``torch.nn.functional.conv2d``, and for
the 1-D, 3-D and transposed convolutions (Conv1d, Conv3d, ConvTranspose1d/2d/3d and their
functional forms: the 2-D convolution with H = 1, one 2-D convolution per depth tap, and the
backward-data pass).

    import convcore.torch
    model = convcore.torch.convert(model)            # every nn.Conv2d now runs on convcore
    y = convcore.torch.conv2d(x, w, b, padding=1)    # functional form, F.conv2d's arguments + algo

The convolution is the custom operator ``torch.ops.convcore.conv2d`` (``torch.library.custom_op``):
its fake (meta) implementation lets ``torch.compile`` trace it, and its autograd formula calls
convcore's backward passes, themselves the custom operators ``convcore::conv2d_backward_data``,
``convcore::conv2d_backward_filter`` and ``convcore::conv2d_backward_bias``. Nothing here computes
a convolution or a gradient with PyTorch's own convolution.

Tensors: float32 or float64 (``SUPPORTED_DTYPES``), on the CPU or a CUDA device (CUDA needs a
convcore built with CUDA). Errors are convcore's, as in ``convcore``'s NumPy API: a bad argument
(a value, a shape, a type, another dtype) raises convcore.BadParamError, which is also a TypeError
and a ValueError, so code written for PyTorch's TypeError catches it; another device raises
convcore.NotSupportedError.

``algo`` names convcore's algorithms: "auto" (the heuristic's choice); "find" (Find's fastest per
pass, timed once per machine and kept in the find-db); one name, used by each pass
that has an algorithm of that name while the others use "auto" ("im2col_gemm" runs all three;
"im2win" has no backward pass of that name, so its gradients use "auto"); or a strict triple
(forward, backward data, backward filter), e.g. ("winograd_4x4_3x3", "winograd_2x2_3x3",
"winograd_3x3_2x2"), each of which must exist for its pass.

Bias, residual and activation run in convcore's fused epilogue
(``y = act(conv(x, w) + bias + residual)``, convcoreConvolutionBiasActivationForward): a Conv2d's
bias always does, and ``convert(model, fuse=True)`` also fuses what follows a Conv2d into it: a
BatchNorm2d (folded into the weights in eval mode, run as PyTorch runs it in training), a residual
add and an ``nn.ReLU``, ``nn.ReLU6`` or ``nn.SiLU`` (see convert). Gradients flow through all of
it: ReLU's and ReLU6's from the output. SiLU's and GELU's need the pre-activation: in eager
training a layer runs the convolution and then PyTorch's activation, which keeps it; the fused
operator (graph captures, conv2d(..., activation=...)) recomputes it in the backward pass.

This module imports torch; ``import convcore`` alone does not. It is the public face of private
modules, one job each: _torch_args (argument types, algo specs, activation names, tensor checks),
_torch_ops (the 2-D operators, their fake kernels, the autograd formula and conv2d's routes),
_torch_nd (the 1-D, 3-D and transposed functions and operators), _torch_modules (Conv2d and the
other modules), _torch_fold (batch norm and group norm folding), _torch_fuse (fusion in
nn.Sequentials), _torch_pair (the fused 1x1 -> depthwise pair), _torch_graph_fuse (fusion in a
module's torch.fx graph, guarded) and _torch_convert (convert and refresh).
"""

from torch.nn.modules.utils import _pair  # noqa: F401  (tests build the operator's arguments with it)

from . import _torch_nd  # noqa: F401
from ._torch_args import SUPPORTED_DTYPES, AlgoSpec, IntOrPair, PaddingMode, Size2  # noqa: F401
from ._torch_convert import convert, refresh
from ._torch_modules import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ._torch_nd import conv1d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d
from ._torch_ops import conv2d

# Private names that tests, benchmarks and the model benchmark reach through convcore.torch, and the
# classes and functions that pickles of converted models made before the split name here.
from ._torch_args import _algo_spec, _split_algo  # noqa: F401,E402
from ._torch_fold import _fold_batch_norm, _group_norm_forward  # noqa: F401,E402
from ._torch_fuse import (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm,  # noqa: F401,E402
                          _PairSequential, _ResidualSequential)
from ._torch_graph_fuse import (_conv_chain, _fused_graphs, _GraphFusion,  # noqa: F401,E402
                                _rebuild_guarded, _sequential_chain)
from ._torch_ops import (_BACKWARD_DATA, _BACKWARD_FILTER, _conv2d_op,  # noqa: F401,E402
                         _epilogue_backward_cpu, _function_args)
from ._torch_pair import _PointwiseDepthwise  # noqa: F401,E402

__all__ = ["conv2d", "Conv2d", "convert", "refresh", "SUPPORTED_DTYPES", "conv1d", "Conv1d",
           "conv3d", "Conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

# The public names are convcore.torch's wherever they are defined: type names, pickles of converted
# models and TorchScript's qualified names say convcore.torch.Conv2d, as before the split.
for _public in (conv2d, Conv2d, convert, refresh, conv1d, Conv1d, conv3d, Conv3d, conv_transpose1d,
                conv_transpose2d, conv_transpose3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d):
    _public.__module__ = __name__
del _public
