"""convert(fuse=True)'s fusion inside nn.Sequentials: each convcore Conv2d takes over the batch norm
and activation that follow it (Conv1d its activation, Conv1d and Conv3d a group norm and its
activation, Conv3d its batch norm), leaving in their places modules that pass their input on
(the state_dict is unchanged); and the Sequentials that pass a residual add and an activation on
to their last layer or run 1x1 -> depthwise pairs as one (convcore/_torch_pair.py)."""

from torch import Tensor, nn

from ._torch_args import _module_activation
from ._torch_modules import Conv1d, Conv2d, Conv3d, sharing_state


class _FusedBatchNorm2d(nn.BatchNorm2d):
    """A BatchNorm2d that convert(fuse=True) fused into the convcore Conv2d before it: that layer
    applies it (folded into its weights in eval mode), so here it passes its input on. It keeps
    its place, parameters and buffers: the state_dict, train()/eval(), .to() and optimizers see
    the model as it was."""

    def forward(self, input: Tensor) -> Tensor:
        return input


class _FusedBatchNorm3d(nn.BatchNorm3d):
    """A BatchNorm3d that convert(fuse=True) fused into the convcore Conv3d before it, as
    _FusedBatchNorm2d."""

    def forward(self, input: Tensor) -> Tensor:
        return input


class _FusedGroupNorm(nn.GroupNorm):
    """A GroupNorm that convert(fuse=True) fused into the convcore Conv1d or Conv3d before it
    (that layer applies it to its output, see _group_norm_forward), as _FusedBatchNorm2d."""

    def forward(self, input: Tensor) -> Tensor:
        return input


def _hooked(module):
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or getattr(module, "_backward_pre_hooks", None))


def _global_hooks():
    from torch.nn.modules import module as m
    return bool(m._global_forward_hooks or m._global_forward_pre_hooks)


def _foldable(bn, conv):
    """Whether ``bn`` (what follows ``conv``) is a batch norm the convolution may take over."""
    kind = nn.BatchNorm3d if isinstance(conv, Conv3d) else nn.BatchNorm2d
    return (type(bn) is kind and not _hooked(bn) and bn.num_features == conv.out_channels
            and bn.track_running_stats and bn.running_mean is not None)


def _fuse_sequential(seq):
    """Fuses into each convcore Conv2d of ``seq`` (with nothing fused yet) the BatchNorm2d that
    follows it, then the ReLU / ReLU6 / SiLU / GELU that follows that; into each Conv1d the
    activation that follows it; into each Conv3d the BatchNorm3d that follows it."""
    names = list(seq._modules)
    for i, name in enumerate(names):
        conv = seq._modules[name]
        if isinstance(conv, (Conv1d, Conv3d)) and _fuse_group_norm(seq, names, i):
            continue
        if isinstance(conv, Conv1d) and conv.activation == "identity" and i + 1 < len(names):
            act = seq._modules[names[i + 1]]
            activation = _module_activation(act)
            if activation is not None and not _hooked(act):
                conv.activation = activation
                seq._modules[names[i + 1]] = nn.Identity()
            continue
        if (isinstance(conv, Conv3d) and "_fused_batch_norm" not in conv.__dict__
                and i + 1 < len(names) and _foldable(seq._modules[names[i + 1]], conv)):
            # a 3-D layer takes its batch norm only (no fused epilogue in 3-D)
            seq._modules[names[i + 1]] = _fused_batch_norm(conv, seq._modules[names[i + 1]])
        if not isinstance(conv, Conv2d) or conv.activation != "identity" or conv._has_fused_batch_norm:
            continue
        j = i + 1
        if j < len(names) and _foldable(seq._modules[names[j]], conv):
            seq._modules[names[j]] = _fused_batch_norm(conv, seq._modules[names[j]])
            j += 1
        if j < len(names):
            act = seq._modules[names[j]]
            activation = _module_activation(act)
            if activation is not None and not _hooked(act):
                conv.activation = activation
                seq._modules[names[j]] = nn.Identity()


def _fused_group_norm(conv, gn):
    """Makes ``conv`` (a convcore Conv1d or Conv3d) apply ``gn`` to its output; returns the
    _FusedGroupNorm that takes gn's place (its parameters, hooks and state_dict entries)."""
    placeholder = sharing_state(_FusedGroupNorm, gn)
    conv.__dict__["_fused_group_norm"] = placeholder
    return placeholder


def _fuse_group_norm(seq, names, i):
    """Fuses into the convcore Conv1d or Conv3d ``seq[names[i]]`` the nn.GroupNorm over its
    channels that follows it, then the activation after that; whether it did."""
    conv = seq._modules[names[i]]
    if i + 1 >= len(names) or "_fused_group_norm" in conv.__dict__ or "_fused_batch_norm" in conv.__dict__:
        return False
    gn = seq._modules[names[i + 1]]
    if type(gn) is not nn.GroupNorm or _hooked(gn) or gn.num_channels != conv.out_channels:
        return False
    if isinstance(conv, Conv1d) and conv.activation != "identity":
        return False
    seq._modules[names[i + 1]] = _fused_group_norm(conv, gn)
    if i + 2 < len(names):
        act = seq._modules[names[i + 2]]
        activation = _module_activation(act)
        if activation is not None and not _hooked(act):
            conv.__dict__["_group_norm_activation"] = activation
            seq._modules[names[i + 2]] = nn.Identity()
    return True


def _fused_batch_norm(conv, bn):
    """Makes ``conv`` apply ``bn``; returns the _FusedBatchNorm2d (3-D: _FusedBatchNorm3d) that
    takes bn's place."""
    kind = _FusedBatchNorm3d if isinstance(bn, nn.BatchNorm3d) else _FusedBatchNorm2d
    placeholder = sharing_state(kind, bn)
    conv.__dict__["_fused_batch_norm"] = placeholder
    conv.__dict__["_has_fused_batch_norm"] = True
    return placeholder


def _last_layer(seq):
    """The last module of ``seq`` that computes something (not a _FusedBatchNorm2d or an
    nn.Identity), and its name."""
    for name in reversed(list(seq._modules)):
        m = seq._modules[name]
        if type(m) not in _PASSING_ON:
            return name, m
    return None, None


def _ends_in_open_conv(seq):
    """Whether ``seq`` (an nn.Sequential without hooks) ends in a convcore Conv2d with no
    activation, directly or in a last nn.Sequential (torchvision's Conv2dNormActivation
    without activation): a residual add after it can run in that layer's epilogue."""
    if _hooked(seq) or type(seq) not in _SEQUENTIALS:
        return False
    _, last = _last_layer(seq)
    if isinstance(last, Conv2d):
        return last.activation == "identity" and not _hooked(last)
    return isinstance(last, nn.Sequential) and _ends_in_open_conv(last)


def _run_sequential(seq, input, residual=None, activation=None):
    """An nn.Sequential's items in order, with what convert(fuse=True) fused across them:
    ``residual`` and ``activation`` passed on to the last layer, and each 1x1 -> depthwise pair
    (_PointwiseDepthwise) run as one where the call allows it."""
    pairs = seq.__dict__.get("_pointwise_depthwise")
    last = None if residual is None and activation is None else _last_layer(seq)[0]
    skip_to = None  # the last item of a pair that ran
    for name, m in seq._modules.items():
        if skip_to is not None:
            skip_to = None if name == skip_to else skip_to
            continue
        pair = pairs.get(name) if pairs else None
        if pair is not None and last not in pair.names:
            y = pair.run(input)
            if y is not None:
                input, skip_to = y, pair.names[-1]
                continue
        input = m(input, residual, activation) if name == last else m(input)
    return input


class _ResidualSequential(nn.Sequential):
    """An nn.Sequential that passes ``residual`` and ``activation`` on to its last layer (a
    convcore Conv2d, or another _ResidualSequential): convert(fuse=True) makes one where a
    residual add follows it (MobileNetV2's ``x + self.conv(x)``). Its 1x1 -> depthwise pairs run
    as _PairSequential's. Called with one input it is the nn.Sequential it was."""

    def forward(self, input, residual=None, activation=None):
        if residual is None and activation is None and "_pointwise_depthwise" not in self.__dict__:
            return super().forward(input)
        return _run_sequential(self, input, residual, activation)


class _PairSequential(nn.Sequential):
    """An nn.Sequential whose 1x1 -> depthwise pairs run as one where the call allows it
    (convert(fuse=True) makes one where it finds a pair): the nn.Sequential it was, faster."""

    def forward(self, input):
        return _run_sequential(self, input)


def _residual_sequential(seq):
    """``seq`` as a _ResidualSequential (its last Sequential too), sharing its modules."""
    new = sharing_state(_ResidualSequential, seq)
    name, last = _last_layer(new)
    if isinstance(last, nn.Sequential):
        new._modules[name] = _residual_sequential(last)
    return new


_PASSING_ON = (_FusedBatchNorm2d, _FusedBatchNorm3d, _FusedGroupNorm, nn.Identity)  # what a fused layer leaves in its Sequential
_SEQUENTIALS = (nn.Sequential, _ResidualSequential, _PairSequential)  # what fusion may change
_SEQUENTIAL_FORWARDS = (nn.Sequential.forward, _ResidualSequential.forward, _PairSequential.forward)


def _plain_sequential(module):
    """An nn.Sequential (or a subclass such as Conv2dNormActivation) that runs its items in
    order: its forward is nn.Sequential's, _ResidualSequential's or _PairSequential's."""
    return isinstance(module, nn.Sequential) and type(module).forward in _SEQUENTIAL_FORWARDS
