"""The 1-D and 3-D convolutions of the NumPy-level API (a Convolution whose ConvDesc has 1 or 3
spatial dimensions), on the 2-D one:

- 1-D: the 2-D convolution with H = 1 (arrays viewed with an H axis of length 1), as the C API's
  Nd descriptors store it: every 2-D algorithm and pass serves it, the fused epilogue included.
- 3-D: one 2-D convolution per image and filter tap in depth, accumulated (beta = 1) into the
  output's depth slices: y[n, :, od] = sum over kd of conv2d(x[n, :, od * sd - pd + kd * dd],
  w[:, :, kd]). The slices are views (in N x D x H x W x C memory, NHWC batches). Each pass
  (forward, backward data, backward filter) is its 2-D pass per tap, so every 2-D algorithm
  serves it. No fused epilogue (bias only), no Find: the 2-D slices are what convcore times.
  A second schedule, "stacked", copies the depth taps' input planes side by side as channels
  (N*OD x T*C x H x W: the depth part of an im2col) and runs one 2-D convolution with the
  K x T*C/g x R x S filter: one call and no accumulation, for a copy of T times the input. It
  wins where the planes are small or the depth stride is not 1 (the taps' slices are then not
  packed); "auto" times both on first sight of a problem and pass (the best of three
  interleaved runs each) and keeps the faster.
  A third, "native", makes the forward pass one C API call on the 5-D arrays: with T x 3 x 3
  filters (stride and dilation 1 in H and W, one group, CPU) that is the C API's native 3-D
  Winograd F(4x4,3x3) (cpu/winograd_3d.hpp), which transforms each input plane and each output
  tile once and sums the depth taps in its GEMMs (with 3x3x3 filters and depth stride 1: the
  nested F(4x4x4,3x3x3)); "auto" times it beside the other two there. With algo "fft" and more
  than one depth tap it is the C API's 3-D FFT (cpu/fft_3d.hpp: FFTW's rank-3 transforms, each
  input volume transformed once). With algo "im2col_gemm", and with "auto" where the Winograd
  does not apply (the stems, strided and 1 x k x k or k x 1 x 1 layers), it is the C API's 3-D
  IM2COL_GEMM (cpu/im2col_gemm_nd.hpp: the 3-D im2col per block of output pixels and one GEMM
  over all taps, y written once). It serves backward data too where the stride is 1 in every
  axis and there is one group (the Winograd: dilation 1 too), as one call of the C API's 3-D
  backward data: dx is then the forward convolution of dy by the filter transposed (C x K) and
  mirrored, with padding dil*(k-1)-pad per axis, which the same native algorithms run. Where the
  outputs' windows are disjoint (in every axis a stride of at least the filter size, dilation 1:
  ConvTranspose3d(k=2, s=2), 1x1x1 stride-2 downsamples), backward data is instead IM2COL_GEMM's
  one GEMM and scatter (cpu/im2col_gemm_nd.hpp), for algo "auto" and "im2col_gemm"; with
  overlapping windows IM2COL_GEMM runs it as the forward im2col of dy by the transposed filter
  (algo "im2col_gemm", and "auto" where the Winograd does not apply). In backward filter
  "native" is the C API's 3-D IM2COL_GEMM (any windows, "auto" and "im2col_gemm"; x and dy read
  as they lie).
  A fourth, "merged", serves T x 1 x 1 filters with stride 1 and padding 0 in H and W (the
  temporal convolutions of (2+1)-D networks) in every pass: in N x D x H x W x C memory H and W
  merge into one axis of H*W pixels, so the problem is the 2-D one on N x C x D x (H*W) with the
  T x 1 filter, the depth as its H: one 2-D call, no copy, the taps summed by its reduction.
  With a filter_version (convcore.torch in inference), the forward pass keeps what it makes
  from w between calls: the taps' packed K x C/g x R x S filters or the stacked filter, and the
  2-D plans' transformed filters (one 2-D Convolution per tap, so the taps do not take turns
  re-transforming theirs), until w's address or contents change.

Arrays are NumPy arrays, torch tensors or CuPy arrays: only indexing, swapaxes, reshape and
in-place arithmetic are used on them."""

import itertools
import time
from typing import Any, Dict, List, Optional, Tuple

from . import _convcore as _C
from ._args import _filter_version_arg
from ._dlpack import _allocate_output, _dlpack_device, _is_torch_tensor, _torch_module
from ._errors import BadParamError, NotSupportedError
from ._shapes import output_size


def depth_taps(d_in: int, d_out: int, pad: int, stride: int, dilation: int,
               taps: int) -> List[Tuple[int, int, int, int]]:
    """(kd, od_lo, count, id_lo) for each depth tap kd that reaches an output depth: outputs
    od_lo .. od_lo + count - 1 read input depths id_lo, id_lo + stride, ... (the others only
    padding)."""
    result = []
    for kd in range(taps):
        offset = kd * dilation - pad  # the input depth of output depth 0
        lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
        last = d_in - 1 - offset
        hi = 0 if last < 0 else min(d_out, last // stride + 1)
        if lo < hi:
            result.append((kd, lo, hi - lo, lo * stride + offset))
    return result


def depth_slices(a: Any, n: int, lo: int, count: int, step: int) -> Any:
    """a[n, :, lo : lo + (count - 1) * step + 1 : step] as a 2-D batch (count, C, H, W): a view."""
    return a[n, :, lo:lo + (count - 1) * step + 1:step].swapaxes(0, 1)


def _element_strides(a: Any) -> List[int]:
    if _is_torch(a):
        return list(a.stride())
    return [st // a.itemsize for st in a.strides]


def is_ndhwc(a: Any) -> bool:
    """Whether a (N x C x D x H x W) lies packed in N x D x H x W x C memory (the strides of
    length-1 axes do not matter)."""
    n, c, d, h, w = a.shape
    expected = (d * h * w * c, 1, h * w * c, w * c, c)
    return all(size == 1 or st == e for size, st, e in zip(a.shape, _element_strides(a), expected))


def ndhwc(a: Any) -> Any:
    """a in N x D x H x W x C memory: a itself when it is, else a copy (the 2-D slices of such
    memory are packed NHWC batches; those of N x C x D x H x W memory are not, and convcore
    would copy every slice of every tap)."""
    if is_ndhwc(a):
        return a
    if _is_torch(a):
        import torch
        return a.contiguous(memory_format=torch.channels_last_3d)
    return a.transpose(0, 2, 3, 4, 1).copy().transpose(0, 4, 1, 2, 3)  # NumPy, CuPy


def _ndhwc_empty(like: Any, shape: Tuple[int, ...]) -> Any:
    """An array of ``shape`` (N x C x D x H x W) in N x D x H x W x C memory, of like's kind,
    not initialised."""
    n, c, d, h, w = shape
    if _is_torch_tensor(like):
        # channels_last_3d strides on a tensor of its own, not a permuted view: an operator's
        # output that is a view cannot be changed in place under autograd (y += r, relu_)
        torch = _torch_module()
        return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=torch.channels_last_3d)
    buf = _allocate_output(like, (n, d, h, w, c), like.dtype, _dlpack_device(like, "x"))
    return buf.transpose(0, 4, 1, 2, 3)


def _accumulate_taps(taps: List[Tuple[int, int, int, int]], covers: Any, beta: float, out: Any,
                     run: Any) -> None:
    """out = beta * out + the sum over ``taps`` of run(tap, beta of the call): a tap whose slices
    cover all of out's depths (``covers(tap)``) goes first with beta, the others then with 1, so
    out is neither cleared nor scaled in a pass of its own; without one, out is scaled first."""
    first = next((t for t in taps if covers(t)), None)
    if first is None:
        NdConvolution._scale(out, beta)
    else:
        run(first, beta)
    for tap in taps:
        if tap is not first:
            run(tap, 1.0)


def _in_layout_of(result: Any, like: Any) -> Any:
    """result (N x D x H x W x C memory) in like's layout: itself, or a packed N x C x D x H x W
    copy when like is not channels-last."""
    if is_ndhwc(like):
        return result
    if _is_torch(result):
        return result.contiguous()
    return result.copy()  # NumPy, CuPy: C order


def _is_torch(a: Any) -> bool:
    return callable(getattr(a, "stride", None))  # NumPy's and CuPy's strides are a tuple


_filter_versions = itertools.count()  # the numbers that name prepared filters, unique here


def _weight_identity(w: Any, filter_version: Any) -> Optional[Tuple[Any, ...]]:
    """What names w's contents for a forward pass with ``filter_version``: its address, shape
    and dtype with the caller's number, or with the fingerprint of its bytes ("check": one read
    of w per call). None when nothing can be kept: no filter_version, or w not dense in host
    memory (no fingerprint)."""
    if filter_version is None:
        return None
    if _is_torch(w):
        address = w.data_ptr()
    else:
        address = w.__array_interface__["data"][0] if hasattr(w, "__array_interface__") else None
    if address is None:
        return None
    if filter_version != "check":
        return (address, tuple(w.shape), str(w.dtype), _filter_version_arg(filter_version))
    try:
        if _is_torch(w):
            import torch
            capsule = torch.utils.dlpack.to_dlpack(w)
        else:
            capsule = w.__dlpack__()
    except (BufferError, RuntimeError, TypeError):  # e.g. a read-only NumPy array
        return None
    fingerprint = _C.fingerprint_tensors([capsule])
    if fingerprint is None:
        return None
    return (address, tuple(w.shape), str(w.dtype), "check", fingerprint)


def _cpu_float(a: Any) -> bool:
    """float32 or float64 on the CPU: what the C API's native 3-D forms run."""
    return str(getattr(a, "device", "cpu")) == "cpu" and "float" in str(a.dtype) and "16" not in str(a.dtype)


def _is_packed(a: Any) -> bool:
    return bool(a.is_contiguous()) if _is_torch(a) else bool(a.flags.c_contiguous)


def _pixels_one_stride_apart(a: Any) -> bool:
    """Whether a (N x C x D x H x W) lies NCDHW or NDHWC within each image: the 3-D IM2COL_GEMM
    reads its output pixels so (cpu/im2col_gemm_nd.hpp)."""
    _, c, d, h, w = a.shape
    s = _element_strides(a)
    if s[1] == 1 or c == 1:  # channels last: pixels C apart
        return (w == 1 or s[4] == c) and (h == 1 or s[3] == w * s[4]) and (d == 1 or s[2] == h * w * s[4])
    return (w == 1 or s[4] == 1) and (h == 1 or s[3] == w) and (d == 1 or s[2] == h * w) and s[1] >= d * h * w


def _packed_copy(a: Any) -> Any:
    return a.contiguous() if _is_torch(a) else a.copy()  # NumPy, CuPy: C order


def _packed(a: Any) -> Any:
    """a itself where it is packed (C order), else a packed copy."""
    if _is_torch(a):
        return a.contiguous()
    return a if a.flags.c_contiguous else a.copy()


def _last_axis_channels(a: Any) -> Any:
    """a (N x C x spatial...) as N x spatial... x C: the order of channels-last memory."""
    order = (0,) + tuple(range(2, a.ndim)) + (1,)
    return a.permute(*order) if _is_torch(a) else a.transpose(order)


def _channels_second(a: Any) -> Any:
    """The inverse of _last_axis_channels."""
    order = (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))
    return a.permute(*order) if _is_torch(a) else a.transpose(order)


def _new_like(like: Any, shape: Tuple[int, ...]) -> Any:
    return _allocate_output(like, shape, like.dtype, _dlpack_device(like, "x"))


def _plane_batch(a: Any) -> Any:
    """a (N x C x D x H x W in N x D x H x W x C memory) as the 2-D batch N*D x C x H x W: a view."""
    n, c, d, h, w = a.shape
    return _channels_second(_last_axis_channels(a).reshape(n * d, h, w, c))


def _with_h(a: Any) -> Any:
    return None if a is None else a[:, :, None]


def _shape_with_h(shape: Any) -> Tuple[int, ...]:
    shape = tuple(shape)
    return shape[:2] + (1,) + shape[2:]


_CHOSEN_SCHEDULES: Dict[Tuple[Any, ...], Dict[Tuple[Any, ...], str]] = {}  # NdConvolution._chosen


def _schedule_of(plane_key: Any) -> str:
    """The schedule of a kept 2-D Convolution's key: "stacked", "native", "merged", or a tap
    index ("taps")."""
    return plane_key if plane_key in ("stacked", "native", "merged") else "taps"


def _merge_hw(a: Any) -> Any:
    """N x C x D x H x W in N x D x H x W x C memory as the view N x C x D x (H*W) (H's stride is
    W times W's: the axes merge)."""
    n, c, d, h, w = a.shape
    return a.reshape(n, c, d, h * w)


def _kind(a: Any) -> str:
    """What, besides the shapes, the schedules' times depend on: the element type, the device
    and (3-D) the layout."""
    layout = "/ndhwc" if len(a.shape) == 5 and is_ndhwc(a) else ""
    return f"{a.dtype}@{getattr(a, 'device', 'cpu')}{layout}"


class NdConvolution:
    """What Convolution runs for a 1-D or 3-D ConvDesc: ``plane`` is the 2-D Convolution of the
    last two spatial dimensions (1-D: H = 1)."""

    def __init__(self, desc: Any, plane: Any) -> None:
        self.desc = desc
        self.plane = plane
        self.dims = desc.spatial_dims
        # auto's schedule per pass and problem, shared by the Convolutions of one geometry (a
        # converted layer in inference makes one per weight: none times the schedules again)
        params = (desc.padding, desc.stride, desc.dilation, desc.groups, desc.mode)
        self._chosen: Dict[Tuple[Any, ...], str] = _CHOSEN_SCHEDULES.setdefault(params, {})
        self._kept: Dict[str, Any] = {}  # the forward pass's prepared filters (_kept_filters)
        self.last_plane = plane  # the 2-D Convolution of the last forward call (its last_algo)
        self._merged: Optional[Any] = None  # the "merged" schedule's 2-D Convolution

    # ---- shapes ----

    def _check_rank(self, name: str, shape: Tuple[int, ...]) -> None:
        if len(shape) != self.dims + 2:
            layout = {1: "N, C, L", 3: "N, C, D, H, W"}[self.dims]
            raise BadParamError(f"{name}: expected {self.dims + 2} sizes ({layout}) for a "
                                f"{self.dims}-D convolution, got {shape}")

    def output_shape(self, x_shape: Any, w_shape: Any) -> Tuple[int, ...]:
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        self._check_rank("x_shape", x_shape)
        self._check_rank("w_shape", w_shape)
        if self.dims == 1:
            y = self.plane.output_shape(_shape_with_h(x_shape), _shape_with_h(w_shape))
            return y[:2] + y[3:]
        plane = self.plane.output_shape(x_shape[:2] + x_shape[3:], w_shape[:2] + w_shape[3:])
        (pd,), (sd,), (dd,) = self.desc.padding[:1], self.desc.stride[:1], self.desc.dilation[:1]
        depth = output_size(x_shape[2], pd, w_shape[2], sd, dd)
        if depth < 1:
            raise BadParamError(f"x_shape: the output depth would be {depth} (input depth "
                                f"{x_shape[2]}, filter depth {w_shape[2]}, padding {pd}, stride "
                                f"{sd}, dilation {dd}); it must be at least 1")
        return plane[:2] + (depth,) + plane[2:]

    def plane_shapes(self, x_shape: Any, w_shape: Any) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """The 2-D problem convcore runs: 1-D, with H = 1; 3-D, one depth tap over every output
        depth (the batch of its largest call)."""
        x_shape, w_shape = tuple(x_shape), tuple(w_shape)
        self._check_rank("x_shape", x_shape)
        self._check_rank("w_shape", w_shape)
        if self.dims == 1:
            return _shape_with_h(x_shape), _shape_with_h(w_shape)
        depth = self.output_shape(x_shape, w_shape)[2]
        return (depth,) + x_shape[1:2] + x_shape[3:], w_shape[:2] + w_shape[3:]

    # ---- the passes ----

    def forward(self, x: Any, w: Any, algo: Any = "auto", out: Optional[Any] = None,
                alpha: float = 1.0, beta: float = 0.0, filter_version: Any = None,
                bias: Optional[Any] = None, activation: Optional[str] = "identity",
                residual: Optional[Any] = None, alpha2: float = 1.0) -> Any:
        self._check_rank("x", tuple(x.shape))
        self._check_rank("w", tuple(w.shape))
        if self.dims == 1:
            y = self.plane.forward(_with_h(x), _with_h(w), algo, _with_h(out), alpha, beta,
                                   filter_version, bias, activation, _with_h(residual), alpha2)
            return y[:, :, 0] if out is None else out
        if residual is not None or activation not in (None, "identity"):
            raise NotSupportedError("a 3-D convolution has no fused epilogue (activation, "
                                    "residual) yet; apply them to its output")
        y_shape = self.output_shape(x.shape, w.shape)
        kept = self._kept_filters(w, filter_version)
        schedules = self._schedules(w.shape) + (
            ("native",) if self._native_algo(x, w, algo) is not None else ())
        return self._scheduled("forward", (x.shape, w.shape, _kind(x), algo, kept is not None), x,
                               lambda schedule, out, beta: self._forward_3d(
                                   x, w, algo, out, alpha, beta, bias, schedule, kept), out, beta,
                               kept, schedules)

    def backward_data(self, dy: Any, w: Any, x_shape: Any, algo: Any = "auto",
                      out: Optional[Any] = None, alpha: float = 1.0, beta: float = 0.0) -> Any:
        x_shape = tuple(x_shape)
        self._check_rank("x_shape", x_shape)
        self._check_rank("dy", tuple(dy.shape))
        if self.dims == 1:
            dx = self.plane.backward_data(_with_h(dy), _with_h(w), _shape_with_h(x_shape), algo,
                                          _with_h(out), alpha, beta)
            return dx[:, :, 0] if out is None else out
        y_shape = self.output_shape(x_shape, w.shape)
        if tuple(dy.shape) != y_shape:
            raise BadParamError(f"dy: expected shape {y_shape} (the output for an input of "
                                f"shape {x_shape}), got {tuple(dy.shape)}")
        schedules = self._schedules(w.shape) + (
            ("native",) if self._native_backward_data_algo(dy, w, algo) is not None else ())
        return self._scheduled("backward_data", (x_shape, w.shape, _kind(dy), algo), dy, lambda schedule, out, beta:
                               self._backward_data_3d(dy, w, x_shape, algo, out, alpha, beta,
                                                      schedule), out, beta, None, schedules)

    def backward_filter(self, x: Any, dy: Any, w_shape: Any, algo: Any = "auto",
                        out: Optional[Any] = None, alpha: float = 1.0, beta: float = 0.0) -> Any:
        w_shape = tuple(w_shape)
        self._check_rank("w_shape", w_shape)
        self._check_rank("x", tuple(x.shape))
        if self.dims == 1:
            dw = self.plane.backward_filter(_with_h(x), _with_h(dy), _shape_with_h(w_shape), algo,
                                            _with_h(out), alpha, beta)
            return dw[:, :, 0] if out is None else out
        y_shape = self.output_shape(x.shape, w_shape)
        if tuple(dy.shape) != y_shape:
            raise BadParamError(f"dy: expected shape {y_shape}, got {tuple(dy.shape)}")
        schedules = self._schedules(w_shape) + (
            ("native",) if self._native_backward_filter_algo(x, w_shape, algo) is not None else ())
        return self._scheduled("backward_filter", (x.shape, w_shape, _kind(x), algo), x, lambda schedule, out, beta:
                               self._backward_filter_3d(x, dy, w_shape, algo, out, alpha, beta,
                                                        schedule), out, beta, None, schedules)

    # ---- 3-D: the schedules ----

    schedule = "auto"  # "taps", "stacked", "native", "merged" or "auto": each that applies timed
    _SCHEDULE_TIMINGS = 3  # auto's timed runs of each schedule, interleaved

    def _schedules(self, w_shape: Tuple[int, ...]) -> Tuple[str, ...]:
        """The schedules that run this filter shape in every pass: "merged" too for T x 1 x 1
        filters with stride 1 and padding 0 in H and W."""
        merges = (tuple(w_shape[3:]) == (1, 1) and tuple(self.desc.stride[1:]) == (1, 1)
                  and tuple(self.desc.padding[1:]) == (0, 0))
        return ("taps", "stacked", "merged") if merges else ("taps", "stacked")

    def _merged_plane(self) -> Any:
        """The 2-D Convolution of the "merged" schedule: the depth as H, H*W pixels as W."""
        if self._merged is None:
            d = self.desc
            self._merged = type(self.plane)(type(self.plane.desc)(
                padding=(d.padding[0], 0), stride=(d.stride[0], 1), dilation=(d.dilation[0], 1),
                groups=d.groups, mode=d.mode))
        return self._merged

    _NATIVE_ALGOS = {"AUTO": "WINOGRAD_4X4_3X3", "WINOGRAD_4X4_3X3": "WINOGRAD_4X4_3X3",
                     "WINOGRAD_2X2_3X3": "WINOGRAD_2X2_3X3", "FFT": "FFT",
                     "CYCLIC_MINIMAL": "CYCLIC_MINIMAL", "IM2COL_GEMM": "IM2COL_GEMM"}

    def _one_to_one(self, w_shape: Tuple[int, ...]) -> bool:
        """A 1x1x1 filter at stride 1 without padding: each output reads the input at its own
        position, so the GEMMs run on the tensors in place (decomposed), with no im2col."""
        d = self.desc
        return (all(k == 1 for k in w_shape[2:]) and all(s == 1 for s in d.stride)
                and all(p == 0 for p in d.padding))

    def _native_algo(self, x: Any, w: Any, algo: Any) -> Optional[str]:
        """The algorithm the "native" schedule runs for this forward problem, None when it does
        not apply (float32/float64 on the CPU): the C API's 3-D Winograd for T x 3 x 3 filters
        with stride and dilation 1 in H and W and one group; its 3-D FFT (algo "fft") for filters
        of more than one depth tap; its nested CYCLIC_MINIMAL for 2 or 3 depth taps with depth
        stride and dilation 1 where that makes fewer 2-D convolutions than the taps (5 per tile of
        5 - T output depths; cpu/cyclic_minimal_3d.hpp); its 3-D IM2COL_GEMM
        (cpu/im2col_gemm_nd.hpp: the 3-D im2col per block of output pixels, one GEMM over all
        taps) for "im2col_gemm", and for "auto" where the Winograd does not apply; neither for a
        1x1x1 filter at stride 1 without padding, which runs in place decomposed."""
        name = self._NATIVE_ALGOS.get(str(algo).upper())
        if self.dims != 3 or name is None or not _cpu_float(x):
            return None
        if name == "FFT":
            return name if w.shape[2] > 1 else None
        if name == "CYCLIC_MINIMAL":
            taps, d = w.shape[2], self.desc
            plane_filter = tuple(w.shape[3:]) in ((3, 3), (2, 2), (1, 3), (1, 2), (3, 1), (2, 1))
            if (taps not in (2, 3) or not plane_filter or any(v != 1 for v in d.stride)
                    or any(v != 1 for v in d.dilation)):
                return None
            d_out = self.output_shape(x.shape, w.shape)[2]
            per_tap = sum(max(0, min(d_out, x.shape[2] - (t - d.padding[0])) - max(0, d.padding[0] - t))
                          for t in range(taps))
            return name if -(-d_out // (5 - taps)) * 5 < per_tap else None
        one_to_one = self._one_to_one(w.shape)
        if name == "IM2COL_GEMM":
            return None if one_to_one else name
        winograd = (tuple(w.shape[3:]) == (3, 3) and self.desc.groups == 1
                    and tuple(self.desc.stride[1:]) == (1, 1) and tuple(self.desc.dilation[1:]) == (1, 1))
        if winograd:
            return name
        return "IM2COL_GEMM" if name == "WINOGRAD_4X4_3X3" and str(algo).upper() == "AUTO" and not one_to_one else None

    def _native_backward_data_algo(self, dy: Any, w: Any, algo: Any) -> Optional[str]:
        """The algorithm of the "native" schedule in backward data (the C API's 3-D backward
        data), None when it does not apply: with stride 1 in every axis, one group and padding at
        most the dilated filter's reach, dx is the forward convolution of dy by the filter
        transposed (C x K) and mirrored, with padding dil*(k-1)-pad per axis, which the C API's
        native 3-D Winograd (dilation 1), FFT or IM2COL_GEMM (any dilation; for "auto" where the
        Winograd does not apply) runs. Where the outputs' windows are disjoint (in every axis a
        stride of at least the filter size, dilation 1: ConvTranspose3d(k=2, s=2)), IM2COL_GEMM's
        scatter form (cpu/im2col_gemm_nd.hpp) runs it, for "auto" too."""
        d = self.desc
        gemm = str(algo).upper() in ("AUTO", "IM2COL_GEMM") and _cpu_float(dy) and not self._one_to_one(w.shape)
        if gemm and all(s >= k and (k == 1 or dil == 1) for s, k, dil in zip(d.stride, w.shape[2:], d.dilation)):
            return "IM2COL_GEMM"  # disjoint windows: one GEMM and a scatter
        if (any(s != 1 for s in d.stride) or d.groups != 1
                or any(p > dil * (k - 1) for p, dil, k in zip(d.padding, d.dilation, w.shape[2:]))):
            return None
        if self._NATIVE_ALGOS.get(str(algo).upper()) == "CYCLIC_MINIMAL":  # a forward algorithm only
            return None
        name = self._native_algo(dy, w, algo)
        if name == "IM2COL_GEMM":  # the forward IM2COL_GEMM of dy by w transposed: any dilation
            return name
        return name if name == "FFT" or all(dil == 1 for dil in d.dilation) else None

    def _native_backward_filter_algo(self, x: Any, w_shape: Tuple[int, ...], algo: Any) -> Optional[str]:
        """The algorithm of the "native" schedule in backward filter, None when it does not
        apply: the C API's 3-D IM2COL_GEMM (cpu/im2col_gemm_nd.hpp: the 3-D im2col per block of
        output pixels, each thread's dW partial summed over its blocks) for "auto" and
        "im2col_gemm" (float32/float64 on the CPU), but a 1x1x1 filter at stride 1 without
        padding, whose GEMM runs in place decomposed."""
        if (self.dims != 3 or str(algo).upper() not in ("AUTO", "IM2COL_GEMM") or self._one_to_one(w_shape)
                or not _cpu_float(x)):
            return None
        return "IM2COL_GEMM"

    def _scheduled(self, pass_name: str, problem: Tuple[Any, ...], like: Any, run: Any,
                   out: Optional[Any], beta: float, kept: Optional[Dict[str, Any]] = None,
                   schedules: Tuple[str, ...] = ("taps", "stacked")) -> Any:
        """run(schedule, out, beta) with this pass's schedule: the fixed one (any of
        ``schedules``), or (auto) the one of them that was fastest on this problem (``like``:
        the input whose device it ran on). That is the find-db's choice when an earlier process
        timed them (convcoreGetFastestChoice), else timed on first sight (each schedule run once
        into a new output, so that none pays the 2-D selections it makes, then timed in
        _SCHEDULE_TIMINGS rounds over the schedules, the fastest run of each kept: one timed run
        let a machine's noise keep a slower schedule) and the times stored. A schedule whose 2-D
        problems an explicit algo cannot run (NotSupportedError) is left out; if none can, the
        first refusal is raised."""
        if self.schedule != "auto":
            if self.schedule not in schedules:
                raise NotSupportedError(f"schedule {self.schedule!r} does not run this {pass_name} "
                                        f"problem (it takes {', '.join(schedules)})")
            return run(self.schedule, out, beta)
        key = (pass_name,) + tuple(tuple(p) if isinstance(p, tuple) else str(p) for p in problem)
        chosen = self._chosen.get(key)
        if chosen is None:
            chosen = self._chosen[key] = (self._stored_schedule(pass_name, key, like, schedules)
                                          or self._timed_schedule(pass_name, key, like, run, schedules))
            if kept is not None:  # what only the other schedules use goes
                for other in schedules:
                    if other != chosen:
                        kept.pop(other, None)
                for name in [k for k in kept["planes"] if _schedule_of(k) != chosen]:
                    del kept["planes"][name]
        return run(chosen, out, beta)

    def _choice_key(self, pass_name: str, key: Tuple[Any, ...], like: Any) -> Tuple[Any, str, str]:
        """(C device, direction, problem) of this pass's schedule choice in the find-db."""
        dev_type, dev_index = _dlpack_device(like, "x")
        device = (_C.DEVICE_CUDA, dev_index) if dev_type == _C.DLPACK_CUDA else (_C.DEVICE_CPU, 0)
        d = self.desc
        problem = (f"{self.dims}d_pad{d.padding}_str{d.stride}_dil{d.dilation}_g{d.groups}_{d.mode}_"
                   + "_".join(str(k) for k in key[1:])).replace(" ", "")
        return device, f"nd_schedule_{pass_name}", problem

    def _stored_schedule(self, pass_name: str, key: Tuple[Any, ...], like: Any,
                         schedules: Tuple[str, ...]) -> Optional[str]:
        """The schedule the find-db holds as the fastest for this problem (an earlier process
        timed them), None when it holds none of ``schedules``."""
        device, direction, problem = self._choice_key(pass_name, key, like)
        stored = _C.fastest_choice(*device, direction, problem)
        return stored if stored in schedules else None

    def _timed_schedule(self, pass_name: str, key: Tuple[Any, ...], like: Any, run: Any,
                        schedules: Tuple[str, ...]) -> str:
        """The fastest of ``schedules`` on this problem, timed (see _scheduled); the times go
        into the find-db."""
        times = {}
        refusals = []
        for schedule in schedules:
            try:
                run(schedule, None, 0.0)
            except NotSupportedError as e:  # an explicit algo that this schedule's 2-D
                refusals.append(e)          # problems cannot run: the others may
                continue
            times[schedule] = float("inf")
        if not times:
            raise refusals[0]
        schedules = tuple(times)
        for _ in range(self._SCHEDULE_TIMINGS):  # rounds over the schedules: min of each
            for schedule in schedules:
                start = time.perf_counter()
                run(schedule, None, 0.0)
                times[schedule] = min(times[schedule], time.perf_counter() - start)
        device, direction, problem = self._choice_key(pass_name, key, like)
        _C.store_choice_times(*device, direction, problem, {name: t * 1e3 for name, t in times.items()})
        return min(times, key=lambda k: times[k])

    def _depth_geometry(self, d_in: int, d_out: int, taps: int) -> List[Tuple[int, int, int, int]]:
        (pd,), (sd,), (dd,) = self.desc.padding[:1], self.desc.stride[:1], self.desc.dilation[:1]
        return depth_taps(d_in, d_out, pd, sd, dd, taps)

    def _filter_tap(self, taps: int, kd: int) -> int:
        """The filter's depth index of tap kd (mode "convolution" flips it)."""
        return taps - 1 - kd if self.desc.mode == "convolution" else kd

    def _kept_filters(self, w: Any, filter_version: Any) -> Optional[Dict[str, Any]]:
        """The forward pass's filters kept for w (with a filter_version): a dict of what the
        schedules made from w ("taps": the taps' packed filters, "stacked": the stacked filter),
        "planes" (the 2-D Convolutions that keep their transformed filters: one per tap, one for
        the stacked call) and "version" (the filter_version those are called with). A new one
        when w's address or contents changed; None when nothing can be kept."""
        identity = _weight_identity(w, filter_version)
        if identity is None:
            return None
        if self._kept.get("identity") != identity:
            self._kept = {"identity": identity, "version": next(_filter_versions), "planes": {}}
        return self._kept

    def _forward_filters(self, w: Any, kept: Optional[Dict[str, Any]], schedule: str,
                         kd: int = 0) -> Tuple[Any, Any, Optional[int]]:
        """(2-D Convolution, filter, filter_version) of a forward call: tap kd's, or (stacked)
        the stacked filter's; per call (the plane, w's slice or a new stacked filter) without
        ``kept``."""
        if schedule == "merged":  # a view of w: K x C/g x T x 1
            if kept is None:
                return self._merged_plane(), w[..., 0], None
            if "merged" not in kept["planes"]:
                kept["planes"]["merged"] = type(self.plane)(self._merged_plane().desc)
            return kept["planes"]["merged"], w[..., 0], kept["version"]
        if kept is None:
            if schedule == "stacked":
                return self.plane, self._stacked_filter(w), None
            if schedule == "native":  # the C API takes a packed w: copied only where it is not
                return self.plane, _packed(w), None
            return self.plane, w[:, :, self._filter_tap(w.shape[2], kd)], None
        key: Any = schedule
        if schedule in ("stacked", "native"):
            if schedule not in kept:
                kept[schedule] = self._stacked_filter(w) if schedule == "stacked" else _packed_copy(w)
            filters = kept[schedule]
        else:
            taps = kept.setdefault("taps", {})
            if kd not in taps:
                taps[kd] = _packed_copy(w[:, :, self._filter_tap(w.shape[2], kd)])
            filters, key = taps[kd], kd
        planes = kept["planes"]
        if key not in planes:
            planes[key] = type(self.plane)(self.plane.desc)
        return planes[key], filters, kept["version"]

    def _forward_3d(self, x: Any, w: Any, algo: Any, out: Optional[Any], alpha: float,
                    beta: float, bias: Optional[Any], schedule: str,
                    kept: Optional[Dict[str, Any]] = None) -> Any:
        y_shape = self.output_shape(x.shape, w.shape)
        sd = self.desc.stride[0]
        taps = self._depth_geometry(x.shape[2], y_shape[2], w.shape[2])
        reads_any = schedule == "native" and self._native_algo(x, w, algo) in ("FFT", "CYCLIC_MINIMAL",
                                                                                "IM2COL_GEMM")
        x_run = x if reads_any else ndhwc(x)  # the 3-D FFT, cyclic and IM2COL_GEMM read any strides

        def accumulate(y, beta_y):
            if schedule == "merged":
                plane, w2, version = self._forward_filters(w, kept, schedule)
                plane.forward(_merge_hw(x_run), w2, algo, _merge_hw(y), alpha, beta_y, version)
                self.last_plane = plane
            elif schedule == "native":  # one C API call on the 5-D arrays
                plane, w5, version = self._forward_filters(w, kept, schedule)
                depth = (self.desc.padding[0], sd, self.desc.dilation[0])
                plane._forward_3d_one_call(x_run, w5, y, depth, self._native_algo(x, w, algo),
                                           alpha, beta_y, version)
                self.last_plane = plane
            elif schedule == "stacked":
                plane, w2, version = self._forward_filters(w, kept, schedule)
                plane.forward(self._stacked_input(x_run, taps, w.shape, y_shape[2]), w2, algo,
                              _plane_batch(y), alpha, beta_y, version)
                self.last_plane = plane
            else:
                def run(tap, beta_call):
                    kd, lo, count, id_lo = tap
                    plane, w2, version = self._forward_filters(w, kept, schedule, kd)
                    for n in range(x.shape[0]):
                        plane.forward(depth_slices(x_run, n, id_lo, count, sd), w2, algo,
                                      depth_slices(y, n, lo, count, 1), alpha, beta_call,
                                      version)
                    self.last_plane = plane
                # a tap covers y when it reaches every output depth
                _accumulate_taps(taps, lambda t: t[1] == 0 and t[2] == y_shape[2], beta_y, y, run)
            if bias is not None:
                y += alpha * bias.reshape(1, -1, 1, 1, 1)
        return self._run(x, y_shape, out, beta, accumulate)

    def _backward_data_3d(self, dy: Any, w: Any, x_shape: Tuple[int, ...], algo: Any,
                          out: Optional[Any], alpha: float, beta: float, schedule: str) -> Any:
        sd = self.desc.stride[0]
        taps = self._depth_geometry(x_shape[2], dy.shape[2], w.shape[2])
        dy_run = ndhwc(dy)

        def accumulate(dx, beta_dx):
            if schedule == "native":  # the C API's 3-D backward data (its native Winograd, FFT or IM2COL_GEMM)
                d = self.desc
                self.plane._backward_data_3d_one_call(
                    dy_run, _packed(w), dx, (d.padding[0], d.stride[0], d.dilation[0]),
                    self._native_backward_data_algo(dy, w, algo), alpha, beta_dx)
                return
            if schedule == "merged":
                merged_dx = _merge_hw(dx)
                self._merged_plane().backward_data(_merge_hw(dy_run), w[..., 0], merged_dx.shape, algo,
                                                   merged_dx, alpha, beta_dx)
                return
            if schedule == "stacked":
                # the gradient of the stacked input, then each tap's block added to its planes
                n, c, _, h, wd = x_shape
                t, g = w.shape[2], self.desc.groups
                stacked = _new_like(dy_run, (n, dy.shape[2], h, wd, t * c))
                planes = _channels_second(stacked.reshape(n * dy.shape[2], h, wd, t * c))
                self.plane.backward_data(_plane_batch(dy_run), self._stacked_filter(w),
                                         planes.shape, algo, planes, alpha, 0.0)
                blocks = stacked.reshape(n, dy.shape[2], h, wd, g, t, c // g)
                NdConvolution._scale(dx, beta_dx)
                dxv = _last_axis_channels(dx)
                for kd, lo, count, id_lo in taps:
                    dxv[:, id_lo:id_lo + (count - 1) * sd + 1:sd] += \
                        blocks[:, lo:lo + count, :, :, :, kd].reshape(n, count, h, wd, c)
                return

            def run(tap, beta_call):
                kd, lo, count, id_lo = tap
                w2 = w[:, :, self._filter_tap(w.shape[2], kd)]
                for n in range(dy.shape[0]):
                    dx2 = depth_slices(dx, n, id_lo, count, sd)
                    self.plane.backward_data(depth_slices(dy_run, n, lo, count, 1), w2, dx2.shape,
                                             algo, dx2, alpha, beta_call)
            # a tap covers dx when its input depths, sd apart, are all of them
            _accumulate_taps(taps, lambda t: sd == 1 and t[3] == 0 and t[2] == x_shape[2],
                             beta_dx, dx, run)
        return self._run(dy, x_shape, out, beta, accumulate)

    def _backward_filter_3d(self, x: Any, dy: Any, w_shape: Tuple[int, ...], algo: Any,
                            out: Optional[Any], alpha: float, beta: float, schedule: str) -> Any:
        out = self._scaled_output(x, w_shape, out, beta)
        sd = self.desc.stride[0]
        taps = self._depth_geometry(x.shape[2], dy.shape[2], w_shape[2])
        if schedule == "native":  # the C API's 3-D IM2COL_GEMM: x and dy as they lie, dw packed
            d = self.desc
            depth = (d.padding[0], d.stride[0], d.dilation[0])
            packed_out = _is_packed(out)
            dw = out if packed_out else _new_like(x, w_shape)
            self.plane._backward_filter_3d_one_call(x, ndhwc(dy) if not _pixels_one_stride_apart(dy) else dy,
                                                    dw, depth, "IM2COL_GEMM", alpha, 1.0 if packed_out else 0.0)
            if not packed_out:
                out += dw
            return out
        x_run, dy_run = ndhwc(x), ndhwc(dy)
        if schedule == "merged":
            dw2 = out[..., 0]
            self._merged_plane().backward_filter(_merge_hw(x_run), _merge_hw(dy_run), dw2.shape, algo,
                                                 dw2, alpha, 1.0)
            return out
        if schedule == "stacked":
            k, cg, t, r, s = w_shape
            grad = self.plane.backward_filter(self._stacked_input(x_run, taps, w_shape, dy.shape[2]),
                                              _plane_batch(dy_run), (k, t * cg, r, s), algo, None,
                                              alpha)
            blocks = grad.reshape(k, t, cg, r, s)
            for kd in range(t):
                out[:, :, self._filter_tap(t, kd)] += blocks[:, kd]
            return out
        for kd, lo, count, id_lo in taps:
            dw2 = out[:, :, self._filter_tap(w_shape[2], kd)]
            for n in range(x.shape[0]):
                self.plane.backward_filter(depth_slices(x_run, n, id_lo, count, sd),
                                           depth_slices(dy_run, n, lo, count, 1), dw2.shape, algo,
                                           dw2, alpha, 1.0)
        return out

    def _stacked_input(self, x_run: Any, taps: List[Tuple[int, int, int, int]],
                       w_shape: Tuple[int, ...], d_out: int) -> Any:
        """The depth taps' input planes side by side as channels: N*OD x T*C x H x W in
        N x OD x H x W x T*C memory, channels ordered (group, tap, channel of the group) as the
        stacked filter's; zeros where a tap reads padding."""
        n, c, _, h, wd = x_run.shape
        t, g, sd = w_shape[2], self.desc.groups, self.desc.stride[0]
        stacked = _new_like(x_run, (n, d_out, h, wd, t * c))
        blocks = stacked.reshape(n, d_out, h, wd, g, t, c // g)
        xv = _last_axis_channels(x_run)  # N x D x H x W x C
        reached = {tap[0]: tap for tap in taps}
        for kd in range(t):
            if kd not in reached:
                blocks[:, :, :, :, :, kd] = 0
                continue
            _, lo, count, id_lo = reached[kd]
            blocks[:, :lo, :, :, :, kd] = 0
            blocks[:, lo + count:, :, :, :, kd] = 0
            blocks[:, lo:lo + count, :, :, :, kd] = \
                xv[:, id_lo:id_lo + (count - 1) * sd + 1:sd].reshape(n, count, h, wd, g, c // g)
        return _channels_second(stacked.reshape(n * d_out, h, wd, t * c))

    def _stacked_filter(self, w: Any) -> Any:
        """K x T*C/g x R x S: the filter's depth taps side by side, as _stacked_input's channels."""
        k, cg, t, r, s = w.shape
        stacked = _new_like(w, (k, t * cg, r, s))
        blocks = stacked.reshape(k, t, cg, r, s)
        for kd in range(t):
            blocks[:, kd] = w[:, :, self._filter_tap(t, kd)]
        return stacked

    def backward_bias(self, dy: Any, out: Optional[Any] = None, alpha: float = 1.0,
                      beta: float = 0.0) -> Any:
        self._check_rank("dy", tuple(dy.shape))
        n, k = dy.shape[:2]
        # the sum over N and every position, of dy seen as N x K x (positions) x 1
        return self.plane.backward_bias(dy.reshape(n, k, -1, 1), out, alpha, beta)

    @staticmethod
    def _run(like: Any, shape: Tuple[int, ...], out: Optional[Any], beta: float,
             accumulate: Any) -> Any:
        """accumulate(buffer, beta): buffer = beta * buffer + alpha * the pass, in
        N x D x H x W x C memory: out itself when it lies so, else a new buffer (beta 0, not
        initialised), then blended into out or, without out, returned in like's layout."""
        if out is not None and tuple(out.shape) != tuple(shape):
            raise BadParamError(f"out: expected shape {tuple(shape)}, got {tuple(out.shape)}")
        if out is not None and is_ndhwc(out):
            accumulate(out, beta)
            return out
        if out is None and beta != 0.0:
            raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
        result = _ndhwc_empty(like, shape)
        accumulate(result, 0.0)
        if out is None:
            return _in_layout_of(result, like)
        NdConvolution._scale(out, beta)
        out += result
        return out

    @staticmethod
    def _scale(out: Any, beta: float) -> None:
        if beta == 0.0:
            out[...] = 0  # never reads out
        else:
            out *= beta

    def _scaled_output(self, like: Any, shape: Tuple[int, ...], out: Optional[Any],
                       beta: float) -> Any:
        """out * beta (zeros when beta == 0, never reading out), or new zeros of ``like``'s kind
        when out is None: the filter gradient's output."""
        if out is None:
            if beta != 0.0:
                raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
            out = _allocate_output(like, shape, like.dtype, _dlpack_device(like, "x"))
        elif tuple(out.shape) != tuple(shape):
            raise BadParamError(f"out: expected shape {tuple(shape)}, got {tuple(out.shape)}")
        self._scale(out, beta)
        return out
