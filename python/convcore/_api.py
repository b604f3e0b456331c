"""The user-facing Python API over the C bindings (_convcore): ConvDesc, Convolution (its
forward, backward and transposed passes, Find and the shape queries) and conv2d.

Inputs are NumPy arrays or any object with ``__dlpack__`` (PyTorch, CuPy, JAX, ...); they are
read in place through DLPack (convcore/_dlpack.py). The output has the type of ``x``: NumPy in ->
NumPy out, PyTorch in -> PyTorch out, other DLPack producers -> NumPy out (CPU).
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _convcore as _C
from ._args import (_SUPPORTED_DTYPE_NAMES, MODES, AlgoArg, Array, DeviceArg, DTypeArg, IntPair, Shape,
                    _activation_arg, _device_arg, _dims_arg, _dtype_arg, _filter_version_arg, _int_arg,
                    _pair_arg, _scalar_arg, _shape_arg, _spatial_dims_arg)
from ._dlpack import (_allocate_output, _cuda_streams, _device_name, _dlpack_device, _import_input,
                      _import_output, _in_layout_of, _is_torch_tensor, _torch_memory_format, _torch_module)
from ._enums import (_ALGO_IDS, Algo, BwdDataAlgo, BwdFilterAlgo, _algo_for, _algo_id, _direction_arg,
                     _enum_algo_id)
from ._errors import BadParamError, NotSupportedError
from ._nd import NdConvolution
from ._shapes import output_size

__all__ = ["ConvDesc", "Convolution", "FindResult", "conv2d"]


# ---- the convolution ---------------------------------------------------------------------------------

_STATUS_NAMES = {0: "success", _C.STATUS_BAD_PARAM: "bad_param",
                 _C.STATUS_NOT_SUPPORTED: "not_supported", _C.STATUS_ALLOC_FAILED: "alloc_failed",
                 _C.STATUS_EXECUTION_FAILED: "execution_failed",
                 _C.STATUS_INTERNAL_ERROR: "internal_error"}


class FindResult(tuple):
    """One algorithm's result from Convolution.find: ``algo`` (a convcore.Algo), ``status``
    ("success", "not_supported", "alloc_failed", ...), ``time_ms`` (None unless it ran: the time
    for the way the caller runs, find's ``filters``), ``workspace`` (bytes it needs),
    ``deterministic`` (bool), and both times: ``time_per_call_ms`` (the filters transformed by
    every call) and ``time_prepared_ms`` (the filters prepared once; equal to the other for an
    algorithm with nothing to prepare). ``name`` is the algorithm's name as algo= takes it."""

    __slots__ = ()
    _fields = ("algo", "status", "time_ms", "workspace", "deterministic", "time_per_call_ms",
               "time_prepared_ms")

    def __new__(cls, algo: Algo, status: str, time_ms: Optional[float], workspace: int,
                deterministic: bool, time_per_call_ms: Optional[float] = None,
                time_prepared_ms: Optional[float] = None) -> FindResult:
        return tuple.__new__(cls, (algo, status, time_ms, workspace, deterministic,
                                   time_per_call_ms, time_prepared_ms))

    @property
    def algo(self) -> Algo:
        return self[0]

    @property
    def status(self) -> str:
        return self[1]

    @property
    def time_ms(self) -> Optional[float]:
        return self[2]

    @property
    def workspace(self) -> int:
        return self[3]

    @property
    def deterministic(self) -> bool:
        return self[4]

    @property
    def time_per_call_ms(self) -> Optional[float]:
        return self[5]

    @property
    def time_prepared_ms(self) -> Optional[float]:
        return self[6]

    @property
    def name(self) -> str:
        return self[0].name.lower()

    def __repr__(self) -> str:
        def ms(t):
            return "None" if t is None else f"{t:.4g}"
        return (f"FindResult({self.name}, {self.status}, time_ms={ms(self.time_ms)}, "
                f"workspace={self.workspace}, deterministic={self.deterministic}, "
                f"time_per_call_ms={ms(self.time_per_call_ms)}, "
                f"time_prepared_ms={ms(self.time_prepared_ms)})")


class ConvDesc:
    """Convolution parameters (immutable): padding, stride, dilation (ints or one per spatial
    dimension), groups, and mode "cross_correlation" (what frameworks call conv) or
    "convolution" (the filter flipped in every spatial axis).

    ``spatial_dims``: 1, 2 or 3 (None: the length of the sequences given, else 2). 1-D arrays are
    N x C x L, 3-D ones N x C x D x H x W (convcore/_nd.py says how they run)."""

    def __init__(self, padding: IntPair = 0, stride: IntPair = 1, dilation: IntPair = 1,
                 groups: int = 1, mode: str = "cross_correlation",
                 spatial_dims: Optional[int] = None) -> None:
        dims = _spatial_dims_arg(spatial_dims, padding=padding, stride=stride, dilation=dilation)
        self._spatial_dims = dims
        self._padding = _dims_arg("padding", padding, 0, dims)
        self._stride = _dims_arg("stride", stride, 1, dims)
        self._dilation = _dims_arg("dilation", dilation, 1, dims)
        self._groups = _int_arg("groups", groups, 1)
        if not isinstance(mode, str) or mode not in MODES:
            raise BadParamError(f"mode: expected 'cross_correlation' or 'convolution', got {mode!r}")
        self._mode = mode
        # the 2-D parameters convcore runs: (H, W); 1-D: H = 1, unpadded; 3-D: the last two
        (ph, pw), (sh, sw), (dh, dw) = [((0,) + v if dims == 1 else v[-2:]) for v in
                                        (self._padding, self._stride, self._dilation)]
        if dims == 1:
            sh = dh = 1
        self._params = _C.ConvParams(ph, pw, sh, sw, dh, dw, self._groups, MODES[mode])

    @property
    def spatial_dims(self) -> int:
        return self._spatial_dims

    @property
    def padding(self) -> Tuple[int, ...]:
        return self._padding

    @property
    def stride(self) -> Tuple[int, ...]:
        return self._stride

    @property
    def dilation(self) -> Tuple[int, ...]:
        return self._dilation

    @property
    def groups(self) -> int:
        return self._groups

    @property
    def mode(self) -> str:
        return self._mode

    def _key(self) -> Tuple[Any, ...]:
        return (self._padding, self._stride, self._dilation, self._groups, self._mode,
                self._spatial_dims)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConvDesc) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        dims = "" if self._spatial_dims == 2 else f", spatial_dims={self._spatial_dims}"
        return (f"ConvDesc(padding={self._padding}, stride={self._stride}, "
                f"dilation={self._dilation}, groups={self._groups}, mode={self._mode!r}{dims})")


class Convolution:
    """A 2-D convolution: ``Convolution(ConvDesc(padding=1)).forward(x, w)``.

    ``x`` is N x C x H x W, ``w`` is K x C/groups x R x S, the output N x K x P x Q. One object
    may be shared by several threads (each thread gets its own handle, workspace and plans)."""

    def __init__(self, desc: Optional[ConvDesc] = None, **kwargs: Any) -> None:
        if desc is None:
            desc = ConvDesc(**kwargs)
        elif kwargs:
            raise BadParamError("pass either a ConvDesc or its keyword arguments, not both")
        elif not isinstance(desc, ConvDesc):
            raise BadParamError(f"desc: expected a convcore.ConvDesc, got {type(desc).__name__}")
        self.desc = desc
        self._local = threading.local()  # per-thread plans, last algorithm and output shapes
        self._nd: Optional[NdConvolution] = None  # 1-D and 3-D: on a 2-D Convolution (_nd.py)
        if desc.spatial_dims != 2:
            h_w = (lambda v: (1,) + v) if desc.spatial_dims == 1 else (lambda v: v[1:])
            plane = ConvDesc(padding=(0,) + desc.padding if desc.spatial_dims == 1 else desc.padding[1:],
                             stride=h_w(desc.stride), dilation=h_w(desc.dilation),
                             groups=desc.groups, mode=desc.mode)
            self._nd = NdConvolution(desc, Convolution(plane))

    def __repr__(self) -> str:
        return f"Convolution({self.desc!r})"

    def _problems(self):
        """The problems this Convolution has seen on this thread (shapes, strides, dtype, device,
        algo), each validated and chosen once. Their plans, prepared filters and workspace are
        the core's (the thread's handle's plan cache: plan_cache_info())."""
        try:
            return self._local.problems
        except AttributeError:
            problems = self._local.problems = _C.KnownProblems()
            return problems

    def output_shape(self, x_shape: Shape, w_shape: Shape) -> Tuple[int, ...]:
        """The output shape (N, K, P, Q) for inputs of these shapes."""
        if self._nd is not None:
            return self._nd.output_shape(x_shape, w_shape)
        x_shape, w_shape = _shape_arg("x_shape", x_shape), _shape_arg("w_shape", w_shape)
        if len(x_shape) == 4 and x_shape[0] == 0:  # an empty batch
            return (0,) + tuple(_C.output_shape((1,) + x_shape[1:], w_shape, self.desc._params))[1:]
        return tuple(_C.output_shape(x_shape, w_shape, self.desc._params))

    def _rank(self, x_shape, w_shape, device, dtype, direction="forward"):
        _, code = _direction_arg(direction)
        dev_type, dev_index = _device_arg(device)
        x_shape, w_shape = _shape_arg("x_shape", x_shape), _shape_arg("w_shape", w_shape)
        if code == 0:
            return _C.rank_algos(x_shape, w_shape, self.desc._params, dev_type, dev_index,
                                 _dtype_arg(dtype))
        return _C.rank_bwd_algos(x_shape, w_shape, self.desc._params, code, dev_type, dev_index,
                                 _dtype_arg(dtype))

    def applicable_algos(self, x_shape: Shape, w_shape: Shape, device: DeviceArg = "cpu",
                         dtype: DTypeArg = "float32", direction: str = "forward") -> List[str]:
        """Names of the algorithms that can run this problem on ``device``, best first by
        convcore's heuristic (convcoreGetConvolutionForwardAlgorithm, or the backward rankings
        for ``direction="backward_data"`` / ``"backward_filter"``; the problem is always given
        by the forward shapes of x and w). Each is valid as algo= of that direction's method."""
        if self._nd is not None:
            return self._nd.plane.applicable_algos(*self._nd.plane_shapes(x_shape, w_shape),
                                                   device, dtype, direction)
        enum_cls, _ = _direction_arg(direction)
        return [enum_cls(a).name.lower() for a, supported, _, _ in
                self._rank(x_shape, w_shape, device, dtype, direction) if supported]

    def workspace_size(self, x_shape: Shape, w_shape: Shape, algo: AlgoArg,
                       device: DeviceArg = "cpu", dtype: DTypeArg = "float32",
                       direction: str = "forward") -> int:
        """Workspace bytes ``algo`` needs for this problem (NotSupportedError when it cannot
        run it) in ``direction`` ("forward", "backward_data", "backward_filter"). For packed
        inputs; strided ones may need more."""
        if self._nd is not None:
            return self._nd.plane.workspace_size(*self._nd.plane_shapes(x_shape, w_shape), algo,
                                                 device, dtype, direction)
        enum_cls, code = _direction_arg(direction)
        algo_id = _algo_id(algo) if code == 0 else _enum_algo_id(algo, enum_cls)
        if algo_id == _C.ALGO_FIND:
            raise BadParamError("algo: 'find' has no fixed workspace; Convolution.find() reports "
                                "each algorithm's")
        if algo_id < 0:
            for _, supported, workspace, _ in self._rank(x_shape, w_shape, device, dtype, direction):
                if supported:
                    return workspace
            raise NotSupportedError("no convcore algorithm can run this problem on this device")
        dev_type, dev_index = _device_arg(device)
        x_shape, w_shape = _shape_arg("x_shape", x_shape), _shape_arg("w_shape", w_shape)
        if code == 0:
            return _C.workspace_size(x_shape, w_shape, self.desc._params, algo_id, dev_type,
                                     dev_index, _dtype_arg(dtype))
        return _C.workspace_size_bwd(x_shape, w_shape, self.desc._params, algo_id, code, dev_type,
                                     dev_index, _dtype_arg(dtype))

    def forward(self, x: Array, w: Array, algo: AlgoArg = "auto", out: Optional[Array] = None,
                alpha: float = 1.0, beta: float = 0.0,
                filter_version: Union[None, str, int] = None, bias: Optional[Array] = None,
                activation: Optional[str] = "identity", residual: Optional[Array] = None,
                alpha2: float = 1.0) -> Array:
        """``alpha * conv(x, w) + beta * out``, into ``out`` when given (else a new array of the
        type of x). With beta == 0 the previous contents of out are never read.

        The fused epilogue (convcoreConvolutionBiasActivationForward):
        ``act(alpha * conv(x, w) + alpha2 * residual + bias)`` with ``bias`` (K values, one per
        output channel, or None), ``activation`` (a name in ACTIVATIONS: "identity", "relu",
        "relu6", "silu", "gelu" or "gelu_tanh") and
        ``residual`` (an array of the output's shape and layout, or None; it may be ``out``
        itself, added in place). With any of them beta must be 0 (out is not read; pass
        residual=out, alpha2=beta instead). Algorithms that fuse it apply it in their stores;
        for the others convcore applies it in one pass over the output.

        ``filter_version`` says whether the plan may keep w's transformed filters (Winograd's U,
        packed filters, filter spectra) between calls instead of transforming w at every call:
        - None (the default): transformed at every call;
        - ``"check"``: kept while w is the same memory and its bytes have the same 64-bit
          fingerprint, computed at every call (one read of w; right however w was changed);
        - an int >= 0 that identifies the contents of w: kept while w is the same memory with the
          same number; the caller vouches for it (pass another number after changing w).
        convcore.torch.Conv2d passes "check" (or, with ``freeze=True``, a number).

        ``algo="auto"`` times the heuristic's few best candidates on x and w at the first call
        of a problem and keeps the fastest (convcoreSelectConvolutionForwardAlgorithm, mode
        MEASURED; the times go into the find-db, so another process times nothing); later calls
        look the decision up. ``algo="find"`` does the same with every algorithm.
        CONVCORE_AUTO=heuristic makes "auto" the heuristic's first choice, timing nothing."""
        if self._nd is not None:
            return self._nd.forward(x, w, algo, out, alpha, beta, filter_version, bias,
                                    activation, residual, alpha2)
        version = _filter_version_arg(filter_version)
        if (type(x) is np.ndarray and out is None and bias is None and residual is None
                and alpha == 1.0 and beta == 0.0 and activation == "identity" and type(algo) is str):
            # The common NumPy call, in one C++ call once its plan exists (_C.forward_array).
            algo_id = _ALGO_IDS.get(algo)
            done = None if algo_id is None else _C.forward_array(x, w, self.desc._params, algo_id,
                                                                 self._problems(), version)
            if done is not None:
                y, self._local.last_algo = done
                return y
        act = _activation_arg(activation)
        if out is None and alpha == 1.0 and beta == 0.0 and residual is None:
            y = self._forward_torch_cpu(x, w, algo, version, bias, act)
            if y is not None:
                return y
        algo_id = _algo_id(algo)
        alpha = _scalar_arg("alpha", alpha)
        beta = _scalar_arg("beta", beta)
        alpha2 = _scalar_arg("alpha2", alpha2)
        epilogue = bias is not None or residual is not None or act != 0
        if epilogue and beta != 0.0:
            raise BadParamError(f"beta: beta={beta} with bias, activation or residual: the epilogue "
                                f"does not read out; pass residual=out, alpha2=beta to add it")
        device = _dlpack_device(x, "x")
        w_device = _dlpack_device(w, "w")
        if w_device != device:
            raise BadParamError(f"x and w are on different devices: x on {_device_name(device)}, "
                                f"w on {_device_name(w_device)}")
        if out is not None and _dlpack_device(out, "out") != device:
            raise BadParamError(f"out is on {_device_name(_dlpack_device(out, 'out'))} but x is "
                                f"on {_device_name(device)}")
        dlpack_stream, stream = None, 0
        if device[0] == _C.DLPACK_CUDA:
            dlpack_stream, stream = _cuda_streams(x, device)

        xt = _import_input(x, "x", dlpack_stream)
        wt = _import_input(w, "w", dlpack_stream)
        dtype = _C.check_inputs(xt, wt)
        # With out given, _C.forward checks its shape (the output shape is not computed here
        # too: a call's fixed cost matters on small layers).
        if out is None or xt.shape[0] == 0:
            y_shape = self.output_shape(xt.shape, wt.shape)
            if out is None:
                if beta != 0.0:
                    raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
                out = _allocate_output(x, y_shape, dtype, device, follow_layout=True)
            if y_shape[0] == 0:  # an empty batch: nothing to compute, only check out
                if tuple(out.shape) != y_shape:
                    raise BadParamError(f"out: expected shape {y_shape}, got {tuple(out.shape)}")
                ot = _import_output(out, dlpack_stream)  # read-only, requires grad, ...
                if ot.dtype != dtype:
                    raise BadParamError(f"out: dtype {ot.dtype} does not match x: dtype {dtype}")
                return out
        yt = _import_output(out, dlpack_stream)
        if not epilogue:
            self._local.last_algo = _C.forward(xt, wt, yt, self.desc._params, algo_id, alpha, beta,
                                               self._problems(), stream, version)
            return out
        bt = None if bias is None else _import_input(bias, "bias", dlpack_stream)
        zt = None
        if residual is not None:
            if _dlpack_device(residual, "residual") != device:
                raise BadParamError(f"residual is on {_device_name(_dlpack_device(residual, 'residual'))} "
                                    f"but x is on {_device_name(device)}")
            zt = _import_input(_in_layout_of(residual, out), "residual", dlpack_stream)
        self._local.last_algo = _C.forward(xt, wt, yt, self.desc._params, algo_id, alpha, beta,
                                           self._problems(), stream, version, bt, act, zt, alpha2)
        return out

    __call__ = forward

    def _forward_3d_one_call(self, x, w, out, depth, algo, alpha, beta, filter_version):
        """out = alpha * conv3d(x, w) + beta * out in one C API call on 5-D arrays (convcore/
        _nd.py's "native" schedule): this Convolution's parameters for H and W, ``depth`` the
        depth axis's (padding, stride, dilation), w packed, ``algo`` an algorithm's name;
        filter_version as forward's. Returns the algorithm that ran."""
        xt = _import_input(x, "x", None)
        wt = _import_input(w, "w", None)
        yt = _import_output(out, None)
        self._local.last_algo = _C.forward_3d(xt, wt, yt, self.desc._params, list(depth),
                                              _algo_id(algo), float(alpha), float(beta),
                                              self._problems(), _filter_version_arg(filter_version))
        return self._local.last_algo

    def _backward_data_3d_one_call(self, dy, w, out, depth, algo, alpha, beta):
        """out = alpha * conv3d_backward_data(dy, w) + beta * out in one C API call on 5-D arrays
        (convcore/_nd.py's "native" schedule): this Convolution's parameters for H and W,
        ``depth`` the depth axis's (padding, stride, dilation), w packed, ``algo`` a
        backward-data algorithm's name. Returns the algorithm that ran."""
        dyt = _import_input(dy, "dy", None)
        wt = _import_input(w, "w", None)
        dxt = _import_output(out, None)
        self._local.last_algo = _C.backward_data_3d(dyt, wt, dxt, self.desc._params, list(depth),
                                                    _enum_algo_id(algo, BwdDataAlgo), float(alpha),
                                                    float(beta), self._problems())
        return self._local.last_algo

    def _backward_filter_3d_one_call(self, x, dy, out, depth, algo, alpha, beta):
        """out = alpha * conv3d_backward_filter(x, dy) + beta * out in one C API call on 5-D
        arrays (convcore/_nd.py's "native" schedule): this Convolution's parameters for H and W,
        ``depth`` the depth axis's (padding, stride, dilation), out packed, ``algo`` a
        backward-filter algorithm's name. Returns the algorithm that ran."""
        xt = _import_input(x, "x", None)
        dyt = _import_input(dy, "dy", None)
        dwt = _import_output(out, None)
        self._local.last_algo = _C.backward_filter_3d(xt, dyt, dwt, self.desc._params, list(depth),
                                                      _enum_algo_id(algo, BwdFilterAlgo), float(alpha),
                                                      float(beta), self._problems())
        return self._local.last_algo

    def _forward_torch_cpu(self, x, w, algo, filter_version=_C.FILTERS_PER_CALL, bias=None,
                           activation=0, residual=None):
        """The common case of convcore.torch in inference, kept short (a layer pays it per call):
        CPU torch tensors, a new output. None when the call is anything else or looks wrong: the
        general path then handles it or says what is wrong. filter_version >= 0 identifies the
        contents of w: the plan keeps w's transformed filters for as long as w's pointer and
        filter_version stay the same (convcore.torch.Conv2d passes a number that changes with
        the weight's version counter). bias (a CPU tensor of K values, or None), activation (an
        ACTIVATIONS code) and residual (a CPU tensor of the output's shape, dtype and memory
        format, or None; anything else returns None) run in the fused epilogue."""
        torch = _torch_module()
        algo_id = _ALGO_IDS.get(algo) if type(algo) is str else None
        if (torch is None or algo_id is None or not isinstance(x, torch.Tensor)
                or not isinstance(w, torch.Tensor) or not x.is_cpu or not w.is_cpu):
            return None
        if bias is not None and (not isinstance(bias, torch.Tensor) or not bias.is_cpu
                                 or bias.dtype != x.dtype or bias.dim() != 1
                                 or bias.shape[0] != w.shape[0] or not bias.is_contiguous()):
            return None
        local = self._local
        try:
            shapes = local.output_shapes
        except AttributeError:
            shapes = local.output_shapes = {}
        key = (x.shape, w.shape, x.dtype, w.dtype)
        y_shape = shapes.get(key)
        if y_shape is None:
            y_shape = self._torch_output_shape(x, w)
            if y_shape is None:
                return None
            if len(shapes) >= 64:
                shapes.clear()
            shapes[key] = y_shape
        to_dlpack = torch.utils.dlpack.to_dlpack
        if x.is_contiguous():  # (torch.empty(*sizes) parses its arguments fastest)
            out = torch.empty(*y_shape, dtype=x.dtype)
        else:  # channels_last in, channels_last out
            out = torch.empty(y_shape, dtype=x.dtype, memory_format=_torch_memory_format(x))
        if residual is not None and (
                not isinstance(residual, torch.Tensor) or residual.shape != out.shape
                or residual.dtype != out.dtype or not residual.is_cpu
                or residual.stride() != out.stride()):
            return None
        try:  # (to_dlpack exports tensors that require grad as they are)
            xc, wc = to_dlpack(x), to_dlpack(w)
            bc = None if bias is None else to_dlpack(bias)
            zc = None if residual is None else to_dlpack(residual)
        except RuntimeError:  # e.g. a tensor with the negative bit: the general path copies it
            return None
        local.last_algo = _C.forward_capsules(xc, wc, to_dlpack(out), bc, self.desc._params, algo_id,
                                              self._problems(), filter_version, activation, zc)
        return out

    def _backward_torch_cpu(self, direction, a, b, shape, algo_id, with_bias=False):
        """convcore.torch's eager autograd, kept short: dx (direction _C.BACKWARD_DATA: a = dy,
        b = w, shape = x's, in dy's memory format) or dw (_C.BACKWARD_FILTER: a = x, b = dy,
        shape = w's) of CPU torch tensors, into a new tensor; with_bias: (dw, db). What this does
        not take (an empty batch, a tensor DLPack cannot export) goes to the general path."""
        if with_bias:
            dw = self._backward_torch_cpu(direction, a, b, shape, algo_id)
            return dw, self.backward_bias(b)
        torch = _torch_module()
        data = direction == _C.BACKWARD_DATA
        if (shape if data else a.shape)[0] == 0:
            if data:
                return self.backward_data(a, b, shape, algo=_algo_for(BwdDataAlgo, algo_id))
            return self.backward_filter(a, b, shape, algo=_algo_for(BwdFilterAlgo, algo_id))
        if not data or a.is_contiguous():
            out = torch.empty(*shape, dtype=a.dtype)
        else:
            out = torch.empty(*shape, dtype=a.dtype, memory_format=_torch_memory_format(a))
        to_dlpack = torch.utils.dlpack.to_dlpack
        try:
            ac, bc = to_dlpack(a), to_dlpack(b)
        except RuntimeError:  # e.g. the negative bit: the general path copies it
            ac = None
        if ac is None or min(a.stride()) < 1 or min(b.stride()) < 1:  # e.g. expanded: copied there
            if data:
                return self.backward_data(a, b, shape, algo=_algo_for(BwdDataAlgo, algo_id), out=out)
            return self.backward_filter(a, b, shape, algo=_algo_for(BwdFilterAlgo, algo_id), out=out)
        _C.backward_capsules(direction, ac, bc, to_dlpack(out), self.desc._params, algo_id,
                             self._problems())
        return out

    def _backward_filter_bias_torch_cpu(self, x, dy, w_shape, algo_id):
        """(dw, db) of CPU torch tensors in one call (convcore.torch's eager autograd)."""
        torch = _torch_module()
        if x.shape[0] == 0 or min(x.stride()) < 1 or min(dy.stride()) < 1:
            return self._backward_torch_cpu(_C.BACKWARD_FILTER, x, dy, w_shape, algo_id, with_bias=True)
        to_dlpack = torch.utils.dlpack.to_dlpack
        try:
            xc, dyc = to_dlpack(x), to_dlpack(dy)
        except RuntimeError:  # e.g. the negative bit: the general path copies it
            return self._backward_torch_cpu(_C.BACKWARD_FILTER, x, dy, w_shape, algo_id, with_bias=True)
        dw = torch.empty(*w_shape, dtype=x.dtype)
        db = torch.empty(dy.shape[1], dtype=x.dtype)
        _C.backward_capsules(_C.BACKWARD_FILTER, xc, dyc, to_dlpack(dw), self.desc._params, algo_id,
                             self._problems(), to_dlpack(db))
        return dw, db

    def _torch_output_shape(self, x, w):
        """The output shape for torch tensors x and w when the fast path can take them: 4-D
        float32/float64 tensors of a non-empty problem whose channels match."""
        torch = _torch_module()
        if (x.dim() != 4 or w.dim() != 4 or x.dtype not in (torch.float32, torch.float64)
                or w.dtype != x.dtype):
            return None
        n, c, h, wd = x.shape
        k, cg, r, s = w.shape
        (ph, pw), (sh, sw), (dh, dw), g = (self.desc._padding, self.desc._stride,
                                           self.desc._dilation, self.desc._groups)
        p, q = output_size(h, ph, r, sh, dh), output_size(wd, pw, s, sw, dw)
        if n < 1 or p < 1 or q < 1 or cg * g != c or k % g:
            return None
        return (n, k, p, q)

    @property
    def last_algo(self) -> Optional[str]:
        """The name of the algorithm the last forward call of this thread ran (what "auto" or
        "find" chose), or None before the first call."""
        if self._nd is not None:
            return self._nd.last_plane.last_algo
        algo = getattr(self._local, "last_algo", None)
        return None if algo is None else Algo(algo).name.lower()

    def find(self, x: Array, w: Array, workspace_limit: Optional[int] = None,
             deterministic: bool = False, filters: str = "per-call") -> List[FindResult]:
        """Times every forward algorithm on ``x`` and ``w`` (cuDNN's FindEx; nothing is written
        to x or w) and returns a FindResult per algorithm: those that ran, fastest first, then
        the others with their status ("not_supported": cannot run the problem, disabled by
        CONVCORE_DISABLE_ALGOS, or not deterministic when ``deterministic=True``;
        "alloc_failed": needs more workspace than ``workspace_limit`` bytes). Results come
        from the find-db when this problem was timed before on this machine (docs/find.md);
        convcore.find_stats() counts what was timed.

        ``filters`` says how the caller runs the filters, which orders the results and sets
        ``time_ms``: "per-call" (the default: transformed at every call, as forward without
        filter_version) or "prepared" (kept between calls: forward with a filter_version or
        "check", convcore.torch in inference). Each result holds both times."""
        if self._nd is not None:
            if self.desc.spatial_dims == 3:
                raise NotSupportedError("find: a 3-D convolution runs one 2-D convolution per "
                                        "depth tap; time those (applicable_algos lists them)")
            return self._nd.plane.find(x[:, :, None], w[:, :, None], workspace_limit,
                                       deterministic, filters)
        if filters not in ("per-call", "prepared"):
            raise BadParamError(f"filters: expected 'per-call' or 'prepared', got {filters!r}")
        if workspace_limit is not None:
            workspace_limit = _int_arg("workspace_limit", workspace_limit, 0)
        if not isinstance(deterministic, bool):
            raise BadParamError(f"deterministic: expected a bool, got {deterministic!r}")
        device = _dlpack_device(x, "x")
        w_device = _dlpack_device(w, "w")
        if w_device != device:
            raise BadParamError(f"x and w are on different devices: x on {_device_name(device)}, "
                                f"w on {_device_name(w_device)}")
        dlpack_stream, stream = None, 0
        if device[0] == _C.DLPACK_CUDA:
            dlpack_stream, stream = _cuda_streams(x, device)
        xt = _import_input(x, "x", dlpack_stream)
        wt = _import_input(w, "w", dlpack_stream)
        dtype = _C.check_inputs(xt, wt)
        y_shape = self.output_shape(xt.shape, wt.shape)
        if y_shape[0] == 0:
            raise BadParamError("x: an empty batch has nothing to time")
        scratch = _allocate_output(x, y_shape, dtype, device)
        yt = _import_output(scratch, dlpack_stream)
        rows = _C.find(xt, wt, yt, self.desc._params, -1 if workspace_limit is None else workspace_limit,
                       deterministic, stream, filters == "prepared")
        return [FindResult(Algo(algo), _STATUS_NAMES.get(status, str(status)),
                           *((time_ms, workspace, det, per_call, prepared) if status == 0 else
                             (None, workspace, det, None, None)))
                for algo, status, time_ms, workspace, det, per_call, prepared in rows]

    # ---- backward passes (training) ----

    def _prepare(self, first, first_name, second, second_name, out):
        """Device checks of two inputs (and out); the streams for CUDA tensors."""
        device = _dlpack_device(first, first_name)
        second_device = _dlpack_device(second, second_name)
        if second_device != device:
            raise BadParamError(f"{first_name} and {second_name} are on different devices: "
                                f"{first_name} on {_device_name(device)}, {second_name} on "
                                f"{_device_name(second_device)}")
        if out is not None and _dlpack_device(out, "out") != device:
            raise BadParamError(f"out is on {_device_name(_dlpack_device(out, 'out'))} but "
                                f"{first_name} is on {_device_name(device)}")
        dlpack_stream, stream = None, 0
        if device[0] == _C.DLPACK_CUDA:
            dlpack_stream, stream = _cuda_streams(first, device)
        return device, dlpack_stream, stream

    @staticmethod
    def _empty_result(out, shape, beta):
        """The gradient of an empty sum (an empty batch): zeros, or beta * out."""
        if tuple(out.shape) != tuple(shape):
            raise BadParamError(f"out: expected shape {tuple(shape)}, got {tuple(out.shape)}")
        if beta == 0.0:
            out[...] = 0
        else:
            out *= beta
        return out

    def conv_transpose(self, x: Array, w: Array, output_padding: Union[int, Sequence[int]] = 0,
                       algo: AlgoArg = "auto", out: Optional[Array] = None) -> Array:
        """The transposed convolution (PyTorch's conv_transpose1d/2d/3d) of x (N, K, spatial...)
        by w (K, C/groups, filter...) with this Convolution's padding, stride, dilation and groups:
        as in cuDNN, the backward-data pass of the convolution it transposes (``algo``: a
        BwdDataAlgo, its name, "auto" or "find"). ``output_padding`` (an int or one per spatial
        axis, each smaller than its stride or dilation, PyTorch's rule, checked by the core) adds
        rows and columns at the end of the output, which has the shape
        ``(in - 1) * stride - 2 * padding + dilation * (filter - 1) + output_padding + 1``."""
        d = self.desc
        padding = _dims_arg("output_padding", output_padding, 0, d.spatial_dims)
        x_shape = tuple(int(v) for v in getattr(x, "shape", ()))
        w_shape = tuple(int(v) for v in getattr(w, "shape", ()))
        if len(x_shape) != d.spatial_dims + 2:
            raise BadParamError(f"x: expected {d.spatial_dims + 2} dimensions (N, K, spatial...) for a "
                                f"{d.spatial_dims}-D Convolution, got shape {x_shape}")
        out_shape = tuple(_C.transposed_output_shape(
            list(x_shape), list(w_shape), list(d.padding), list(d.stride), list(d.dilation), d.groups,
            list(padding)))
        return self.backward_data(x, w, out_shape, algo=algo, out=out)

    def backward_data(self, dy: Array, w: Array, x_shape: Shape, algo: AlgoArg = "auto",
                      out: Optional[Array] = None, alpha: float = 1.0, beta: float = 0.0) -> Array:
        """``dx = alpha * (gradient of conv(x, w) with respect to x, given dy) + beta * out``
        for an input of shape ``x_shape``: into ``out`` when given (else a new array of the type
        of dy). ``algo``: a BwdDataAlgo, its name, "auto" or "find". With beta == 0 out is never read."""
        if self._nd is not None:
            return self._nd.backward_data(dy, w, x_shape, algo, out, alpha, beta)
        algo_id = _enum_algo_id(algo, BwdDataAlgo)
        alpha = _scalar_arg("alpha", alpha)
        beta = _scalar_arg("beta", beta)
        x_shape = _shape_arg("x_shape", x_shape)
        if len(x_shape) != 4:
            raise BadParamError(f"x_shape: expected 4 sizes (N, C, H, W), got {x_shape}")
        device, dlpack_stream, stream = self._prepare(dy, "dy", w, "w", out)
        dyt = _import_input(dy, "dy", dlpack_stream)
        wt = _import_input(w, "w", dlpack_stream)
        dtype = dyt.dtype
        if out is None:
            if beta != 0.0:
                raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
            if dtype not in _SUPPORTED_DTYPE_NAMES:
                raise BadParamError(f"dy: dtype {dtype} is not supported; convcore supports "
                                    f"float32 and float64")
            out = _allocate_output(dy, x_shape, dtype, device, follow_layout=True)
        if x_shape[0] == 0:  # an empty batch: nothing to compute, only check the shapes
            y_shape = self.output_shape(x_shape, wt.shape)
            if tuple(dyt.shape) != y_shape:
                raise BadParamError(f"dy: expected shape {y_shape}, got {tuple(dyt.shape)}")
            if tuple(out.shape) != x_shape:
                raise BadParamError(f"out: expected shape {x_shape}, got {tuple(out.shape)}")
            return out
        dxt = _import_output(out, dlpack_stream)
        _C.backward_data(dyt, wt, dxt, self.desc._params, algo_id, alpha, beta, self._problems(),
                         stream)
        return out

    def backward_filter(self, x: Array, dy: Array, w_shape: Shape, algo: AlgoArg = "auto",
                        out: Optional[Array] = None, alpha: float = 1.0,
                        beta: float = 0.0) -> Array:
        """``dw = alpha * (gradient of conv(x, w) with respect to w, given dy) + beta * out`` for
        a filter of shape ``w_shape``: into ``out`` when given (else a new array of the type of
        x). ``algo``: a BwdFilterAlgo, its name, "auto" or "find". With beta == 0 out is never read."""
        if self._nd is not None:
            return self._nd.backward_filter(x, dy, w_shape, algo, out, alpha, beta)
        algo_id = _enum_algo_id(algo, BwdFilterAlgo)
        alpha = _scalar_arg("alpha", alpha)
        beta = _scalar_arg("beta", beta)
        w_shape = _shape_arg("w_shape", w_shape)
        if len(w_shape) != 4:
            raise BadParamError(f"w_shape: expected 4 sizes (K, C/groups, R, S), got {w_shape}")
        device, dlpack_stream, stream = self._prepare(x, "x", dy, "dy", out)
        xt = _import_input(x, "x", dlpack_stream)
        dyt = _import_input(dy, "dy", dlpack_stream)
        if out is None:
            if beta != 0.0:
                raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
            if xt.dtype not in _SUPPORTED_DTYPE_NAMES:
                raise BadParamError(f"x: dtype {xt.dtype} is not supported; convcore supports "
                                    f"float32 and float64")
            out = _allocate_output(x, w_shape, xt.dtype, device)
        if len(xt.shape) == 4 and xt.shape[0] == 0:  # an empty batch: dw is an empty sum
            y_shape = self.output_shape(xt.shape, w_shape)
            if tuple(dyt.shape) != y_shape:
                raise BadParamError(f"dy: expected shape {y_shape}, got {tuple(dyt.shape)}")
            return self._empty_result(out, w_shape, beta)
        dwt = _import_output(out, dlpack_stream)
        if tuple(dwt.shape) != w_shape:
            raise BadParamError(f"out: expected shape {w_shape} (w_shape), got {tuple(dwt.shape)}")
        _C.backward_filter(xt, dyt, dwt, self.desc._params, algo_id, alpha, beta,
                           self._problems(), stream)
        return out

    def backward_bias(self, dy: Array, out: Optional[Array] = None, alpha: float = 1.0,
                      beta: float = 0.0) -> Array:
        """``db = alpha * dy.sum over (N, P, Q) + beta * out``, shape (K,), accumulated in float64:
        into ``out`` when given (else a new array of the type of dy)."""
        if self._nd is not None:
            return self._nd.backward_bias(dy, out, alpha, beta)
        alpha = _scalar_arg("alpha", alpha)
        beta = _scalar_arg("beta", beta)
        device, dlpack_stream, stream = self._prepare(dy, "dy", dy, "dy", out)
        dyt = _import_input(dy, "dy", dlpack_stream)
        if len(dyt.shape) != 4:
            raise BadParamError(f"dy: expected a 4-D array (N, K, P, Q), got shape {tuple(dyt.shape)}")
        if out is None:
            if beta != 0.0:
                raise BadParamError(f"beta: beta={beta} blends into an existing output; pass out=")
            if dyt.dtype not in _SUPPORTED_DTYPE_NAMES:
                raise BadParamError(f"dy: dtype {dyt.dtype} is not supported; convcore supports "
                                    f"float32 and float64")
            out = _allocate_output(dy, (dyt.shape[1],), dyt.dtype, device)
        if 0 in dyt.shape:  # an empty sum
            return self._empty_result(out, (dyt.shape[1],), beta)
        dbt = _import_output(out, dlpack_stream)
        _C.backward_bias(dyt, dbt, alpha, beta, stream)
        return out


def _same_padding(kernel: int, dilation: int) -> Tuple[int, int]:
    """(symmetric part, extra on the bottom/right) of padding="same" along one axis, as
    torch.nn.functional.conv2d pads it."""
    total = dilation * (kernel - 1)
    return total // 2, total - 2 * (total // 2)


def _padding_string(fn: str, padding: str, x: Array, w: Array, stride: Sequence[int],
                    dilation: Sequence[int]) -> Tuple[Array, Tuple[int, int]]:
    """(x, padding) for padding="valid" or "same": "same" keeps the size at stride 1; where its
    total padding along an axis is odd, x gets the extra row/column at the bottom/right (as
    PyTorch pads), in a copy."""
    if padding == "valid":
        return x, (0, 0)
    if padding != "same":
        raise BadParamError(f"{fn}: invalid padding string {padding!r}, should be one of "
                            f"'valid', 'same'")
    if any(s != 1 for s in stride):
        raise BadParamError(f"{fn}: padding='same' is not supported for strided convolutions")
    w_shape = tuple(w.shape)
    if len(w_shape) != 4:
        raise BadParamError(f"w: expected 4 sizes (K, C/groups, R, S), got shape {w_shape}")
    (ph, eh), (pw, ew) = _same_padding(w_shape[2], dilation[0]), _same_padding(w_shape[3], dilation[1])
    if eh or ew:
        if isinstance(x, np.ndarray) and x.ndim == 4:
            x = np.pad(x, ((0, 0), (0, 0), (0, eh), (0, ew)))
        elif _is_torch_tensor(x) and x.dim() == 4:
            x = _torch_module().nn.functional.pad(x, (0, ew, 0, eh))
        else:
            raise NotSupportedError(f"{fn}: padding='same' with an even kernel extent pads one "
                                    f"side more; convcore does that for 4-D NumPy arrays and "
                                    f"torch tensors, not for a {type(x).__name__}")
    return x, (ph, pw)


def conv2d(input: Array, weight: Array, bias: Optional[Array] = None, stride: IntPair = 1,
           padding: Union[IntPair, str] = 0, dilation: IntPair = 1, groups: int = 1, *,
           mode: str = "cross_correlation", algo: AlgoArg = "auto",
           out: Optional[Array] = None) -> Array:
    """``torch.nn.functional.conv2d``'s arguments, in its order, on NumPy arrays or DLPack
    tensors: ``Convolution(ConvDesc(...)).forward(input, weight, algo=algo, out=out, bias=bias)``.

    ``input`` is N x C x H x W, ``weight`` K x C/groups x R x S. ``bias``: None or K values, one
    per output channel, added in convcore's fused epilogue (convcoreConvolutionBiasActivationForward).
    ``padding``: an int, an (h, w) pair, "valid" or "same" (stride 1; an odd total padding
    puts the extra row/column at the bottom/right, as PyTorch does). Keyword-only, convcore's
    own: ``mode`` ("cross_correlation", what frameworks call conv, or "convolution"), ``algo``
    (see Convolution.forward) and ``out``. The output has the type of ``input``."""
    if isinstance(padding, str):
        input, padding = _padding_string("convcore.conv2d", padding, input, weight,
                                         _pair_arg("stride", stride, 1),
                                         _pair_arg("dilation", dilation, 1))
    desc = ConvDesc(padding=padding, stride=stride, dilation=dilation, groups=groups, mode=mode)
    return Convolution(desc).forward(input, weight, algo=algo, out=out, bias=bias)
