"""convert(fuse=True)'s fusion outside nn.Sequentials: in a module's own torch.fx graph, traced per
call signature and guarded (see the comment below; docs/torch.md)."""

import builtins
import collections
import copy
import functools
import inspect
import itertools
import operator
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Tuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._torch_args import _GELU_ACTIVATIONS, _module_activation
from ._torch_fuse import (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm, _ResidualSequential,
                          _ends_in_open_conv, _foldable, _global_hooks, _hooked, _residual_sequential)
from ._torch_modules import Conv2d, sharing_state
from ._torch_ops import _ACTIVATION_FUNCTIONS, _captured


# ---- fusion in a module's own graph, guarded ---------------------------------------------------
#
# Outside nn.Sequentials, convert(fuse=True) finds what follows a Conv2d in a module's forward by
# tracing it with torch.fx. A trace is one path through the forward's Python code, taken with the
# arguments it was traced with, so it stands for a call only when that call would take the same
# path. As torch.compile's guards do, a module's fused forwards are kept per call signature
# (_GraphFusion.key): which arguments are tensors, None or which constants, which tensor arguments
# are the same object, the module's training mode and its plain attributes (flags its forward may
# read). Each is traced at the first call of its signature, with the arguments that are not
# tensors as constants, and a call whose signature has no fused forward runs the module's own.
# A trace that asks what a traced value cannot answer as the tensor would (isinstance, bool, len)
# or changes the module's attributes fails, and its signature runs unfused. In the graph each
# fused chain is one call of _conv_chain (or _sequential_chain), which runs it fused only while
# its modules are still those the fusion was made from and have no hooks, and as written
# otherwise. The modules themselves are not changed: the module's own forward is always right.


_MAX_SIGNATURES = 8  # fused forwards kept per module (torch._dynamo's cache_size_limit)
_CONSTANTS = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.memory_format)
_TENSOR, _UNTRACEABLE, _NOT_TRACED = "tensor", object(), object()
_ONE_TENSOR = (_TENSOR,)


def _argument_kind(value):
    """How a call's argument enters a trace: _TENSOR (a placeholder), list or tuple (a placeholder
    of tensors), (type, value) for a constant (the trace specialises on it), or _UNTRACEABLE."""
    if isinstance(value, (Tensor, torch.fx.Proxy)):
        return _TENSOR
    kind = type(value)
    if kind in _CONSTANTS:
        return kind, value
    if kind is tuple and all(type(v) in _CONSTANTS for v in value):
        return kind, value
    if (kind is list or kind is tuple) and all(isinstance(v, Tensor) for v in value):
        return kind
    return _UNTRACEABLE


def _plain_attributes(module):
    """The names of ``module``'s own attributes that hold constants (flags its forward may read)."""
    kinds = {name: _argument_kind(value) for name, value in vars(module).items()
             if name != "training" and not name.startswith("_tensor_constant")}
    return tuple(sorted(name for name, kind in kinds.items() if kind is not _UNTRACEABLE and kind != _TENSOR))


class _GraphFusion:
    """The fused forwards of one module (see above): signature key -> the graph's forward
    function (called with the module as self and the arguments by position), or None for a
    signature that runs unfused."""

    def __init__(self, module, base):
        parameters = list(inspect.signature(base.forward).parameters.values())[1:]
        self.names = tuple(p.name for p in parameters)
        self.defaults = tuple(p.default for p in parameters)
        self.positions = {name: i for i, name in enumerate(self.names)}
        self.attributes = _plain_attributes(module)
        self.attribute_values = operator.itemgetter(*self.attributes) if self.attributes else None
        self.required = sum(d is inspect.Parameter.empty for d in self.defaults)
        self.forwards: Dict[Any, Any] = {}
        self.graphs: Dict[Any, torch.fx.Graph] = {}

    def __getstate__(self):  # pickle: the generated functions are traced again at first call
        state = dict(self.__dict__)
        state["forwards"], state["graphs"] = {}, {}
        return state

    def __deepcopy__(self, memo):  # the forwards take the module as self: a copy shares them
        new = copy.copy(self)
        new.forwards, new.graphs = dict(self.forwards), dict(self.graphs)
        return new

    def key(self, module, args, kwargs):
        """The call's signature, or None where no trace can stand for it."""
        if not kwargs and len(args) == 1 and isinstance(args[0], Tensor) and self.required <= 1:
            kinds: Tuple[Any, ...] = _ONE_TENSOR  # the common call, quickly
        else:
            kinds = self._kinds(args, kwargs)
            if kinds is None:
                return None
        try:
            if not self.attributes:
                attributes: Any = ()
            elif torch.compiler.is_compiling():  # (torch._dynamo traces no itemgetter)
                attributes = tuple(module.__dict__[name] for name in self.attributes)
                attributes = attributes[0] if len(attributes) == 1 else attributes  # as itemgetter's
            else:
                attributes = cast(Callable[[Dict[str, Any]], Any], self.attribute_values)(module.__dict__)
        except KeyError:
            return None
        return module.training, attributes, kinds

    def _kinds(self, args, kwargs):
        if not self.required <= len(args) + len(kwargs) and len(args) <= len(self.names):
            return None
        kinds = tuple(map(_argument_kind, args))
        if kwargs:
            if any(name not in self.positions or self.positions[name] < len(args) for name in kwargs):
                return None
            if any(self.names[i] not in kwargs for i in range(len(args), self.required)):
                return None
            kinds += tuple((name, _argument_kind(value)) for name, value in sorted(kwargs.items()))
        if any(k is _UNTRACEABLE for k in kinds[:len(args)]) or any(k[1] is _UNTRACEABLE for k in kinds[len(args):]):
            return None
        tensors = [a for a in itertools.chain(args, kwargs.values()) if isinstance(a, Tensor)]
        if len(tensors) > 1 and len({id(t) for t in tensors}) < len(tensors):
            return None  # one tensor passed twice: a trace has a placeholder for each
        return kinds

    def arguments(self, args, kwargs):
        """The call's arguments by position (a trace's placeholders keep the order, not the
        names, of the forward's parameters)."""
        if not kwargs:
            return args
        values = list(args) + list(self.defaults[len(args):])
        for name, value in kwargs.items():
            values[self.positions[name]] = value
        return values

    def forward_for(self, module, args, kwargs):
        """The fused forward for this call, or None."""
        key = self.key(module, args, kwargs)
        if key is None:
            return None
        forward = self.forwards.get(key, _NOT_TRACED)
        if forward is _NOT_TRACED:
            if (len(self.forwards) >= _MAX_SIGNATURES or _captured()
                    or any(isinstance(a, torch.fx.Proxy) for a in itertools.chain(args, kwargs.values()))):
                return None  # traced at a later eager call, not inside another capture
            forward, graph = _fused_forward_of(module, self.arguments(args, kwargs), self)
            self.forwards[key] = forward
            if graph is not None:
                self.graphs[key] = graph
        return forward


def _fused_forward_of(module, values, fusion):
    """(forward, graph): the forward function of ``module``'s graph traced for a call with the
    arguments ``values`` (by position; those not given take their defaults), its convolutions
    fused; (None, None) where it does not trace or fuses nothing."""
    concrete = {}
    for i, (name, default) in enumerate(zip(fusion.names, fusion.defaults)):
        value = values[i] if i < len(values) else default
        kind = _argument_kind(value)
        if kind != _TENSOR and kind not in (list, tuple):
            concrete[name] = value
    graph = _trace(module, concrete)
    if graph is None or not _fuse_in_graph(module, graph):
        return None, None
    graph.lint()
    return type(torch.fx.GraphModule(module, graph, class_name=type(module).__name__)).forward, graph


class _FusionTracer(torch.fx.Tracer):
    """Traces one module's own forward: each submodule call is one node (their own control flow,
    e.g. dropout's training flag, stays live), except the fused batch norms, which pass their
    input on."""

    def is_leaf_module(self, m, qualname):
        return type(m) not in (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm)


_builtin_isinstance = builtins.isinstance
_TORCH_FILES = os.path.dirname(torch.__file__) + os.sep  # the tracer's own isinstance calls
_trace_lock = threading.RLock()


def _isinstance_while_tracing(obj, classinfo):
    """builtins.isinstance during _trace: a forward that asks it of a traced value (a Proxy, not
    a tensor) would take another branch than the call does, so the trace stops there."""
    if (_builtin_isinstance(obj, torch.fx.Proxy)
            and not sys._getframe(1).f_code.co_filename.startswith(_TORCH_FILES)):
        raise torch.fx.proxy.TraceError(f"isinstance() of the traced value {obj}")
    return _builtin_isinstance(obj, classinfo)


_torch_is_tensor = torch.is_tensor


def _is_tensor_while_tracing(obj):
    """torch.is_tensor during _trace, as _isinstance_while_tracing."""
    if _builtin_isinstance(obj, torch.fx.Proxy):
        raise torch.fx.proxy.TraceError(f"torch.is_tensor() of the traced value {obj}")
    return _torch_is_tensor(obj)


def _in_place_operator(op):
    def method(self, other):
        return self.tracer.create_proxy("call_function", op, (self, other), {})
    return method


# ``y += r`` on a traced value: recorded as operator.iadd (torch.fx records y + r, which would
# leave alone a tensor the call changes in place, and promote the dtype where the call keeps it)
_IN_PLACE_OPERATORS = {f"__{name}__": _in_place_operator(getattr(operator, name)) for name in (
    "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "iand", "ior", "ixor",
    "ilshift", "irshift")}


def _attribute_state(module):
    return {name: (id(value), len(value) if isinstance(value, (list, dict, set)) else None)
            for name, value in vars(module).items() if not name.startswith("_tensor_constant")}


def _trace(module, concrete):
    """module's own graph (_FusionTracer) for a call with the arguments in ``concrete`` as
    constants, or None where it does not trace or the trace changed the module's attributes."""
    before = _attribute_state(module)
    with _trace_lock:
        builtins.isinstance, torch.is_tensor = _isinstance_while_tracing, cast(Any, _is_tensor_while_tracing)
        for name, method in _IN_PLACE_OPERATORS.items():
            setattr(torch.fx.Proxy, name, method)
        try:
            tracer = _FusionTracer()
            if hasattr(type(module), "_unfused_forward"):  # a guarded module: its own forward
                tracer.traced_func_name = "_unfused_forward"
            graph = tracer.trace(module, concrete_args=concrete or None)
        except Exception:  # noqa: BLE001 - whatever stops symbolic tracing: nothing fused here
            return None
        finally:
            builtins.isinstance, torch.is_tensor = _builtin_isinstance, _torch_is_tensor
            for name in _IN_PLACE_OPERATORS:
                delattr(torch.fx.Proxy, name)
    return graph if _attribute_state(module) == before else None


_ADDS = {operator.add: "add", operator.iadd: "iadd", torch.add: "add"}
_ACTIVATION_CALLS = {F.relu: "relu", torch.relu: "relu", torch.relu_: "relu", F.relu6: "relu6", F.silu: "silu"}


def _only_user(node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _activation_node(node, modules):
    """The epilogue activation ``node`` computes of its one input, or None."""
    if node is None:
        return None
    if node.op == "call_module":
        m = modules.get(node.target)
        return None if m is None or _hooked(m) or node.kwargs or len(node.args) != 1 else _module_activation(m)
    if node.op == "call_function" and node.target in _ACTIVATION_CALLS and len(node.args) == 1:
        return _ACTIVATION_CALLS[node.target] if set(node.kwargs) <= {"inplace"} else None
    if node.op == "call_function" and node.target is F.gelu and len(node.args) == 1:
        kwargs = dict(node.kwargs)
        approximate = kwargs.pop("approximate", "none")
        return None if kwargs else _GELU_ACTIVATIONS.get(approximate)
    if node.op == "call_method" and node.target in ("relu", "relu_") and len(node.args) == 1 and not node.kwargs:
        return "relu"
    return None


def _residual_of(node, previous):
    """The other operand when ``node`` is ``previous + other``, ``other + previous`` or
    ``previous += other`` of two values, else None."""
    if (node is None or node.op != "call_function" or node.target not in _ADDS
            or len(node.args) != 2 or node.kwargs):
        return None
    a, b = node.args
    other = b if a is previous else a if b is previous and node.target is not operator.iadd else None
    return other if isinstance(other, torch.fx.Node) and other is not previous else None


def _activation_ok(act, activation):
    return act is None or (not _hooked(act) and _module_activation(act) == activation)


def _run_unfused(y, act, residual, activation, add):
    """The rest of a chain as the module wrote it: ``y + residual`` (or ``y += residual``),
    then the activation (its module, or PyTorch's function)."""
    if add == "iadd":
        y += residual
    elif add == "add":
        y = y + residual
    if activation != "identity":
        y = act(y) if act is not None else _ACTIVATION_FUNCTIONS[activation](y)
    return y


def _conv_chain(conv, bn, act, x, residual, activation, add):
    """``act(bn(conv(x)) + residual)`` where a fused module's graph had ``conv``, its batch norm
    ``bn`` (or None), the add (``add``: "add" or "iadd", None without a residual) and the
    activation (``act``: its module, or None for PyTorch's function): one fused call
    (Conv2d._fused_forward) while they are what the fusion was made from (a convcore Conv2d
    with no activation of its own, a batch norm it may fold, the same activation) and nothing
    hooks them; otherwise the chain as written."""
    if (isinstance(conv, Conv2d) and conv.activation == "identity" and not conv._has_fused_batch_norm
            and not _hooked(conv) and (bn is None or _foldable(bn, conv)) and _activation_ok(act, activation)
            and (residual is None or isinstance(residual, (Tensor, torch.fx.Proxy))) and not _global_hooks()):
        return conv._fused_forward(x, residual, activation, bn)
    y = conv(x)
    return _run_unfused(y if bn is None else bn(y), act, residual, activation, add)


def _sequential_chain(seq, act, x, residual, activation, add):
    """``act(seq(x) + residual)`` where ``seq`` ends in a Conv2d with no activation: the residual
    and activation passed on to that layer (_ResidualSequential) while nothing hooks them,
    otherwise as written."""
    if (type(seq) is _ResidualSequential and _ends_in_open_conv(seq) and _activation_ok(act, activation)
            and isinstance(residual, (Tensor, torch.fx.Proxy)) and not _global_hooks()):
        return seq(x, residual, None if activation == "identity" else activation)
    return _run_unfused(seq(x), act, residual, activation, add)


def _fuse_in_graph(module, graph):
    """Rewrites ``graph`` (module's own, _trace's) so that each convcore Conv2d called once with
    one argument and followed by a batch norm, a residual add and an activation (any of them),
    and each nn.Sequential that ends in such a layer and is followed by a residual add, is one
    _conv_chain / _sequential_chain call. Returns whether it rewrote anything."""
    modules = dict(module.named_modules())
    calls = collections.Counter(n.target for n in graph.nodes if n.op == "call_module")
    fused_any = False
    for node in list(graph.nodes):
        target = modules.get(node.target) if node.op == "call_module" else None
        if target is None or calls[node.target] != 1 or len(node.args) != 1 or node.kwargs:
            continue
        if isinstance(target, nn.Sequential):
            if _ends_in_open_conv(target):
                fused_any |= _fuse_sequential_call(graph, node, module, modules)
            continue
        if (not isinstance(target, Conv2d) or target.activation != "identity"
                or target._has_fused_batch_norm):
            continue
        chain, bn = [node], None
        following = _only_user(node)
        if (following is not None and following.op == "call_module" and calls[following.target] == 1
                and len(following.args) == 1 and not following.kwargs
                and _foldable(modules.get(following.target), target)):
            bn = following
            chain.append(following)
            following = _only_user(following)
        residual = _residual_of(following, chain[-1])
        if residual is node.args[0]:
            residual = None  # conv(x) + x: the library reads no input twice; PyTorch adds it
        add = None
        if residual is not None:
            add = _ADDS[following.target]
            chain.append(following)
            following = _only_user(following)
        activation = _activation_node(following, modules)
        if activation is not None:
            chain.append(following)
        if len(chain) == 1:
            continue
        with graph.inserting_before(chain[-1]):  # where every operand exists
            refs = [None if n is None else graph.get_attr(n.target) for n in
                    (node, bn, following if activation is not None and following.op == "call_module" else None)]
            fused = graph.call_function(_conv_chain, (*refs, node.args[0], residual, activation or "identity", add))
        chain[-1].replace_all_uses_with(fused)
        for n in reversed(chain):
            graph.erase_node(n)
        fused_any = True
    return fused_any


def _fuse_sequential_call(graph, node, module, modules):
    """``seq(x) + residual`` (then an activation) where node calls an nn.Sequential that ends in
    an open Conv2d: one _sequential_chain call, the Sequential a _ResidualSequential (which,
    called with one input, is the nn.Sequential it was). Returns whether it fused."""
    add = _only_user(node)
    residual = _residual_of(add, node)
    if residual is None:
        return False
    chain = [node, add]
    following = _only_user(add)
    activation = _activation_node(following, modules)
    if activation is not None:
        chain.append(following)
    parent, _, name = node.target.rpartition(".")
    parent = modules[parent] if parent else module
    if type(parent._modules[name]) is not _ResidualSequential:
        parent._modules[name] = _residual_sequential(parent._modules[name])
    with graph.inserting_before(chain[-1]):
        act = graph.get_attr(following.target) if activation is not None and following.op == "call_module" else None
        fused = graph.call_function(_sequential_chain, (graph.get_attr(node.target), act, node.args[0], residual,
                                                        activation or "identity", _ADDS[add.target]))
    chain[-1].replace_all_uses_with(fused)
    for n in reversed(chain):
        graph.erase_node(n)
    return True


def _guarded_forward(self, *args, **kwargs):
    """The forward of a module with fused graphs: the one traced for this call's signature,
    else the module's own."""
    fusion = self.__dict__.get("_convcore_fusion")
    forward = None if fusion is None else fusion.forward_for(self, args, kwargs)
    if forward is not None:
        return forward(self, *fusion.arguments(args, kwargs))
    return type(self)._unfused_forward(self, *args, **kwargs)


@functools.lru_cache(maxsize=None)
def _guarded_class(base):
    """``base`` with _guarded_forward: the class a module with fused graphs takes (its own
    methods, isinstance, name and state_dict stay)."""

    def __reduce_ex__(self, protocol):  # pickle finds `base` by name: rebuild the guarded class
        return _rebuild_guarded, (base,), self.__getstate__()

    def __prepare_scriptable__(self):  # TorchScript compiles the module's own forward
        return sharing_state(base, self)

    @functools.wraps(base.forward)  # its signature: what torch.fx, jit.trace and export read
    def forward(self, *args, **kwargs):
        return _guarded_forward(self, *args, **kwargs)

    return type(base.__name__, (base,), {
        "__module__": base.__module__, "__qualname__": base.__qualname__, "forward": forward,
        "_unfused_forward": base.forward, "__reduce_ex__": __reduce_ex__,
        "__prepare_scriptable__": __prepare_scriptable__})


def _rebuild_guarded(base):
    cls = _guarded_class(base)
    return cls.__new__(cls)


def _fused_graphs(module: nn.Module) -> Dict[str, List[torch.fx.Graph]]:
    """The graphs of each module that convert(fuse=True) fused outside nn.Sequentials (by its
    qualified name; one graph per call signature traced so far), for inspection and tests."""
    found = {}
    for name, m in module.named_modules():
        fusion = m.__dict__.get("_convcore_fusion")
        if fusion is not None:
            found[name] = list(fusion.graphs.values())
    return found


def _traceable_forward(base):
    """Whether ``base.forward`` takes its arguments by position or name only (no *args,
    **kwargs or keyword-only parameters): what _GraphFusion maps a call's arguments to."""
    try:
        parameters = list(inspect.signature(base.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    return bool(parameters) and all(p.kind == p.POSITIONAL_OR_KEYWORD for p in parameters)


def _fuse_graph(module):
    """convert(fuse=True)'s fusion outside nn.Sequentials, from the innermost modules out: a
    module whose call with its required arguments (tensors, the others left to their defaults)
    in its current mode fuses something in its graph (_fuse_in_graph) gets the fused forwards,
    guarded (_GraphFusion, _guarded_class); other calls are traced at their first call."""
    for child in module.children():
        _fuse_graph(child)
    if isinstance(module, torch.fx.GraphModule):  # its graph is its forward: fused as it is
        if _fuse_in_graph(module, module.graph):
            module.graph.lint()
            module.recompile()
        return module
    if (isinstance(module, (nn.Sequential, Conv2d)) or "_convcore_fusion" in module.__dict__
            or not _traceable_forward(type(module)) or not any(
                isinstance(c, Conv2d) or (isinstance(c, nn.Sequential) and _ends_in_open_conv(c))
                for c in module.children())):
        return module
    base = type(module)
    fusion = _GraphFusion(module, base)
    required = tuple(torch.empty(0) for _ in range(fusion.required))
    key = fusion.key(module, required, {})
    forward, graph = (None, None) if key is None else _fused_forward_of(module, required, fusion)
    if forward is None:
        return module
    fusion.forwards[key], fusion.graphs[key] = forward, cast(torch.fx.Graph, graph)
    module.__dict__["_convcore_fusion"] = fusion
    module.__class__ = _guarded_class(cast(Any, base))
    return module
