"""Every error path: the right exception class, a message naming the argument, never a crash."""

import re

import numpy as np
import pytest

import convcore
from convcore import BadParamError, NotSupportedError


def conv(**kwargs):
    return convcore.Convolution(convcore.ConvDesc(**kwargs))


X = np.ones((1, 3, 5, 5), np.float32)
W = np.ones((4, 3, 3, 3), np.float32)


def raises(cls, text):
    """pytest.raises matching `text` literally."""
    return pytest.raises(cls, match=re.escape(text))


# ---- the exception hierarchy ----------------------------------------------------------------------

def test_exception_hierarchy():
    assert issubclass(convcore.Error, RuntimeError)
    assert issubclass(BadParamError, convcore.Error) and issubclass(BadParamError, ValueError)
    assert issubclass(NotSupportedError, convcore.Error)
    assert issubclass(convcore.ExecutionError, convcore.Error)
    assert not issubclass(NotSupportedError, ValueError)
    with pytest.raises(ValueError):  # what a NumPy/PyTorch user would catch
        conv().forward(np.ones((3, 4), np.float32), W)
    # One exception per kind of error: any bad argument is a BadParamError, which is also the
    # TypeError PyTorch raises for a wrong dtype or type.
    assert issubclass(BadParamError, TypeError) and not issubclass(NotSupportedError, TypeError)
    for bad in (lambda: conv().forward(X.astype(np.int32), W.astype(np.int32)),  # a dtype
                lambda: conv().forward(X, W, algo=3.5),  # a type
                lambda: convcore.Convolution(convcore.ConvDesc(), padding=1),  # a call
                lambda: convcore.conv2d(X, W, padding="full")):  # a value
        with pytest.raises(BadParamError):
            bad()
        with pytest.raises(TypeError):
            bad()


# ---- shapes ---------------------------------------------------------------------------------------

def test_wrong_ndim():
    with raises(BadParamError, "x: expected a 4-D NCHW array, got shape (3, 4)"):
        conv().forward(np.ones((3, 4), np.float32), W)
    with raises(BadParamError, "w: expected a 4-D"):
        conv().forward(X, np.ones((4, 3, 3), np.float32))
    with raises(BadParamError, "x: expected a 4-D NCHW array, got shape (1, 3, 5, 5, 1)"):
        conv().output_shape((1, 3, 5, 5, 1), W.shape)


def test_channel_mismatch():
    with raises(BadParamError, "w: C/groups=4 does not match x: C=3"):
        conv().forward(X, np.ones((4, 4, 3, 3), np.float32))


def test_groups_not_dividing_channels():
    with raises(BadParamError, "x: input channels C=3 are not divisible by groups=2"):
        conv(groups=2).forward(X, np.ones((4, 1, 3, 3), np.float32))
    with raises(BadParamError, "w: output channels K=4 are not divisible by groups=3"):
        conv(groups=3).forward(X, np.ones((4, 1, 3, 3), np.float32))


def test_empty_output():
    with raises(BadParamError, "empty output"):
        conv().forward(np.ones((1, 3, 2, 2), np.float32), W)
    with raises(BadParamError, "empty output"):
        conv(dilation=3).output_shape((1, 3, 6, 6), W.shape)  # a dilated 3x3 spans 7


def test_zero_and_negative_sizes():
    with raises(BadParamError, "x: "):
        conv().forward(np.ones((1, 0, 5, 5), np.float32), np.ones((4, 0, 3, 3), np.float32))
    with raises(BadParamError, "x: "):
        conv().output_shape((1, -3, 5, 5), (4, 3, 3, 3))
    with raises(BadParamError, "w: "):
        conv().output_shape((1, 3, 5, 5), (0, 3, 3, 3))
    with raises(BadParamError, "x_shape: sizes must fit in 64 bits"):
        conv().output_shape((2 ** 70, 3, 5, 5), (4, 3, 3, 3))
    with raises(BadParamError, "overflows"):
        conv().output_shape((2 ** 40, 2 ** 40, 5, 5), (4, 2 ** 40, 3, 3))
    with raises(BadParamError, "x_shape: expected a sequence of ints"):
        conv().output_shape("abc", (4, 3, 3, 3))


# ---- convolution parameters ------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, text", [
    (dict(stride=0), "stride: must be >= 1, got 0"),
    (dict(stride=(1, 0)), "stride: must be >= 1, got 0"),
    (dict(stride=1.5), "stride: expected an int or a pair of ints, got 1.5"),
    (dict(stride=(1, 2, 3, 4)), "stride: expected an int or 1 to 3 ints (one per spatial dimension), got (1, 2, 3, 4)"),
    (dict(stride=(1, 2, 3), padding=(1, 1)), "different numbers of spatial dimensions (padding: 2, stride: 3)"),
    (dict(stride=(1, 2), spatial_dims=3), "stride: expected an int or 3 ints, got (1, 2)"),
    (dict(padding=-1), "padding: must be >= 0, got -1"),
    (dict(padding=(0, -2)), "padding: must be >= 0, got -2"),
    (dict(dilation=0), "dilation: must be >= 1, got 0"),
    (dict(groups=0), "groups: must be >= 1, got 0"),
    (dict(groups=True), "groups: expected an int, got True"),
    (dict(padding=2 ** 41), "padding: must be <= 2**40"),
    (dict(mode="corr"), "mode: expected 'cross_correlation' or 'convolution', got 'corr'"),
    (dict(mode=1), "mode: expected 'cross_correlation' or 'convolution', got 1"),
])
def test_bad_conv_desc(kwargs, text):
    with raises(BadParamError, text):
        convcore.ConvDesc(**kwargs)


def test_bad_convolution_argument():
    with raises(BadParamError, "desc: expected a convcore.ConvDesc, got str"):
        convcore.Convolution("padding=1")


# ---- dtypes -------------------------------------------------------------------------------------

def test_dtype_mismatch():
    with raises(BadParamError, "w: dtype float64 does not match x: dtype float32"):
        conv().forward(X, W.astype(np.float64))


@pytest.mark.parametrize("dtype", [np.int64, np.float16, np.complex64, np.bool_, object])
def test_unsupported_numpy_dtype(dtype):
    name = np.dtype(dtype).name
    with raises(BadParamError, f"x: dtype {name} is not supported; convcore supports float32 and float64"):
        conv().forward(X.astype(dtype), W)
    with raises(BadParamError, f"w: dtype {name} is not supported"):
        conv().forward(X, W.astype(dtype))


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16", "int32", "uint8", "complex64"])
def test_unsupported_torch_dtype(dtype_name, torch):
    dtype = getattr(torch, dtype_name)
    x = torch.ones(1, 3, 5, 5).to(dtype)
    with raises(BadParamError, f"x: dtype {dtype_name} is not supported"):
        conv().forward(x, x.new_ones(4, 3, 3, 3))


def test_bad_dtype_and_device_arguments():
    with raises(BadParamError, "dtype: 'int8' is not supported"):
        conv().applicable_algos(X.shape, W.shape, dtype="int8")
    with raises(BadParamError, "device: expected 'cpu', 'cuda' or 'cuda:<index>', got 'tpu'"):
        conv().applicable_algos(X.shape, W.shape, device="tpu")
    assert conv().applicable_algos(X.shape, W.shape, dtype=np.float64)


# ---- out= ---------------------------------------------------------------------------------------

def test_out_of_wrong_shape():
    with raises(BadParamError, "out: expected shape (1, 4, 3, 3) (the output of this convolution), got (1, 4, 4, 4)"):
        conv().forward(X, W, out=np.empty((1, 4, 4, 4), np.float32))
    with raises(BadParamError, "out: expected a 4-D NCHW array"):
        conv().forward(X, W, out=np.empty((4, 3, 3), np.float32))


def test_out_of_wrong_dtype():
    with raises(BadParamError, "out: dtype float64 does not match x: dtype float32"):
        conv().forward(X, W, out=np.empty((1, 4, 3, 3), np.float64))
    with raises(BadParamError, "out: dtype int32 is not supported"):
        conv().forward(X, W, out=np.empty((1, 4, 3, 3), np.int32))


def test_out_read_only_or_overlapping():
    out = np.empty((1, 4, 3, 3), np.float32)
    out.flags.writeable = False
    with raises(BadParamError, "out: the array is read-only"):
        conv().forward(X, W, out=out)
    x = np.ones((1, 3, 5, 5), np.float32)
    with raises(BadParamError, "out overlaps x"):
        conv().forward(x, W, out=x.reshape(-1)[:36].reshape(1, 4, 3, 3))
    broadcast = np.broadcast_to(np.empty((1, 4, 3, 1), np.float32), (1, 4, 3, 3))
    with raises(BadParamError, "out: the array is read-only"):
        conv().forward(X, W, out=broadcast)
    base = np.empty(64, np.float32)
    for strides in [(0, 12, 4, 4), (144, 4, 4, 4), (144, 36, 12, 0)]:  # elements would alias
        aliased = np.lib.stride_tricks.as_strided(base, (1, 4, 3, 3), strides, writeable=True)
        with raises(BadParamError, "out: strides must be positive and must not make elements overlap"):
            conv().forward(X, W, out=aliased)


def test_torch_out_requiring_grad(torch):
    out = torch.empty(1, 4, 3, 3, requires_grad=True)
    with raises(BadParamError, "out: the tensor requires grad"):
        conv().forward(torch.ones(1, 3, 5, 5), torch.ones(4, 3, 3, 3), out=out)


def test_beta_without_out():
    with raises(BadParamError, "beta: beta=0.5 blends into an existing output; pass out="):
        conv().forward(X, W, beta=0.5)


def test_bad_alpha_beta():
    with raises(BadParamError, "alpha: expected a real number, got 'a'"):
        conv().forward(X, W, alpha="a")
    with raises(BadParamError, "beta: must be finite"):
        conv().forward(X, W, out=np.empty((1, 4, 3, 3), np.float32), beta=float("nan"))


# ---- algorithms -----------------------------------------------------------------------------------

def test_unknown_algorithm_lists_valid_names():
    with pytest.raises(BadParamError) as info:
        conv().forward(X, W, algo="winograd")
    message = str(info.value)
    assert "algo: unknown algorithm 'winograd'" in message
    for name in ["auto", "direct", "im2col_gemm", "implicit_gemm", "winograd_4x4_3x3", "cyclic_minimal"]:
        assert name in message
    with raises(BadParamError, "algo: unknown algorithm 3"):
        conv().forward(X, W, algo=3)


def test_algorithm_that_cannot_run_the_problem():
    # Winograd F(4x4,3x3) needs a 3x3 filter and stride 1: a 5x5 filter with stride 2 is
    # NOT_SUPPORTED whether or not the algorithm is implemented in this build.
    x, w = np.ones((1, 3, 12, 12), np.float32), np.ones((4, 3, 5, 5), np.float32)
    c = conv(stride=2)
    assert "winograd_4x4_3x3" not in c.applicable_algos(x.shape, w.shape)
    with raises(NotSupportedError, "algo=winograd_4x4_3x3: "):
        c.forward(x, w, algo="winograd_4x4_3x3")
    with raises(NotSupportedError, "algo=winograd_4x4_3x3: "):
        c.workspace_size(x.shape, w.shape, convcore.Algo.WINOGRAD_4X4_3X3)


# ---- inputs that are not arrays, and devices ------------------------------------------------------

class FakeDeviceArray:
    """A DLPack producer that claims to live on a CUDA device; convcore must refuse it before
    reading its memory."""

    def __init__(self, shape, device=(2, 0)):
        self.shape, self.device = shape, device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        raise AssertionError("must not be exported")


def test_not_an_array():
    with raises(BadParamError, "x: expected a NumPy array or an object with __dlpack__"):
        conv().forward([[1.0]], W)
    with raises(BadParamError, "w: expected a NumPy array or an object with __dlpack__"):
        conv().forward(X, "w")
    with raises(BadParamError, "out: expected a NumPy array or an object with __dlpack__"):
        conv().forward(X, W, out=[0.0])


def test_inputs_on_different_devices():
    with raises(BadParamError, "x and w are on different devices: x on cuda:0, w on cpu"):
        conv().forward(FakeDeviceArray(X.shape), W)
    with raises(BadParamError, "x and w are on different devices: x on cuda:0, w on cuda:1"):
        conv().forward(FakeDeviceArray(X.shape), FakeDeviceArray(W.shape, (2, 1)))
    with raises(BadParamError, "out is on cuda:0 but x is on cpu"):
        conv().forward(X, W, out=FakeDeviceArray((1, 4, 3, 3)))


@pytest.mark.skipif(convcore.cuda_device_count() > 0, reason="needs a machine without CUDA")
def test_cuda_inputs_without_cuda():
    with raises(NotSupportedError, "x is on cuda:0 but convcore sees 0 CUDA device(s)"):
        conv().forward(FakeDeviceArray(X.shape), FakeDeviceArray(W.shape))
    with pytest.raises(NotSupportedError):
        conv().applicable_algos(X.shape, W.shape, device="cuda")


def test_backward_buffers_are_named_as_the_caller_names_them():
    c = convcore.Convolution(padding=1)
    dy = np.ones((1, 4, 5, 5), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    with raises(BadParamError, "out overlaps dy"):
        c.backward_data(dy, w, (1, 3, 5, 5), out=dy.reshape(-1)[:75].reshape(1, 3, 5, 5))
    x = np.ones((2, 3, 5, 5), np.float32)
    with raises(BadParamError, "out overlaps x"):
        c.backward_filter(x, np.ones((2, 4, 5, 5), np.float32), (4, 3, 3, 3),
                          out=x.reshape(-1)[:108].reshape(4, 3, 3, 3))
    buffer = bytearray(4 * 75 + 1)
    unaligned = np.frombuffer(buffer, np.float32, count=75, offset=1).reshape(1, 3, 5, 5)
    assert not unaligned.flags.aligned
    with raises(BadParamError, "out is not aligned"):
        c.backward_data(dy, w, (1, 3, 5, 5), out=unaligned)
