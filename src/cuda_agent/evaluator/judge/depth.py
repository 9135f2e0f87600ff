"""How many rounded terms an fp32 task accumulates into each output: the accumulation depth that scales the
precision contract's floor (`judge.precision.PrecisionContract.floor_for`).

Why. The contract's floor (512 fp32 units) exists for honest long sums: one fp32 accumulator over n terms errs by
about ``0.2 * sqrt(n)`` units on positive data and ``0.5 * sqrt(n)`` on zero-mean data (measured), 121 units at
n = 65,536. An elementwise task has no such sum: every honest fp32 formula for it (another order, ``expf`` or
``__expf``, ``erff``, fused epilogues) stays within a few units, so a 512-unit floor there admits results rounded to
12 mantissa bits, as the hardware's ``tanh.approx.f32`` (what ``-use_fast_math`` makes of ``tanhf``) gives: 335
units on L1/88's ``torch.rand`` inputs, measured below the floor on the H200 (reward 2). The depth lets the floor
follow the task: ``2 * sqrt(depth)`` units, never under 64 nor over 512.

How. The reference runs once, in float32, under a dispatch mode that sees every ATen operator (below autograd,
after composite operators decompose) and keeps one number per storage: the most terms any element of it was summed
from. Inputs, parameters, buffers and tensor attributes of the module start at 1. An operator's outputs get the
largest depth among its tensor arguments times its own count: 1 for pointwise operators, views, copies, gathers
and selections (max, sort: exact); the reduced element count for sums, means, norms, variances and losses; the
reduced dimension for softmax, log-softmax and scans; the normalised count for layer, group and batch norms; the
window for average pooling; the contraction length for matrix products, convolutions and attention, which also mark
the task as a contraction (their floor stays at 512: Winograd, FFT and split-K algorithms are honest fp32 and err
more than a direct sum). Constants made in ``forward`` (``torch.tensor``, ``torch.from_numpy``: lifted by an operator the
trace sees) start at 1 too. An operator this module does not know (``linalg.inv``, ``scatter_add``, an
``index_put`` that accumulates), or a tensor that no traced operator made and that is not an input, parameter or
buffer, makes the depth unknown: the floor stays at 512, as before. Writes into a view (``out[:, i] = ...``) raise
the depth of the storage they write.

Known limit: a sum written as a Python loop of pointwise additions (``acc = acc + x[:, i]``) counts 1, as any
pointwise operator does, not the number of iterations. Such a reference is a sequential fp32 sum, whose own error
is then of the order of any honest candidate's (the contract's 16 times the reference's own error covers it); a
candidate more exact than the reference is never refused for it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from cuda_agent.evaluator.judge import compare


@dataclass(frozen=True)
class Depth:
    """``terms``: the most rounded terms any output element accumulates (None: unknown). ``contraction``: a matrix
    product, convolution or attention is on the way. ``unknown``: the operators that made it unknown."""

    terms: int | None
    contraction: bool = False
    unknown: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.terms is None:
            why = ", ".join(self.unknown[:4]) or "an untraced tensor"
            return f"accumulation depth unknown ({why})"
        kind = "with a contraction" if self.contraction else "no contraction"
        return f"accumulation depth {self.terms} ({kind})"


UNKNOWN = Depth(None)
TERMS_CAP = 1 << 53               # depths multiply along a network; past this they mean "very deep" and stay there

# -- operator rules -----------------------------------------------------------------------------------------------------
_MOVES = {
    # copies, layout, gathers, fills and factories: every output element is one input element (or a constant)
    "clone", "copy", "copy_", "_to_copy", "to", "contiguous", "cat", "stack", "index", "index_select", "gather",
    "embedding", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "flip", "roll", "repeat", "repeat_interleave", "tile",
    "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter", "index_put", "index_put_",
    "scatter", "scatter_", "masked_scatter", "masked_fill", "masked_fill_", "fill", "fill_", "zero_", "zeros_like",
    "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "empty", "empty_strided", "zeros", "ones",
    "full", "arange", "linspace", "scalar_tensor", "lift_fresh", "lift_fresh_copy", "detach", "detach_", "alias",
    "tril", "triu", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "bernoulli", "bernoulli_", "native_dropout",
    "rand", "randn", "randint", "normal", "normal_", "uniform_", "randperm", "eye", "one_hot", "im2col",
    "unfold", "_unsafe_view", "split_with_sizes_copy", "unbind_copy", "resize_", "set_", "_local_scalar_dense",
    "item", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk", "split", "split_with_sizes", "chunk",
    "unbind", "_assert_async", "_assert_tensor_metadata", "sym_size", "sym_stride", "sym_numel", "nonzero",
    "masked_select", "unique", "_unique2", "bucketize", "searchsorted",
    # exact selections: the result is one of the inputs, unrounded
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "sort", "topk", "kthvalue", "median",
    "nanmedian", "mode", "cummax", "cummin", "max_unpool2d", "max_unpool3d", "argsort", "max", "min", "amax",
    "amin", "aminmax", "argmax", "argmin", "all", "any", "count_nonzero",
}
_SMALL_STENCILS = {
    # interpolation: a handful of weighted terms per output
    "upsample_linear1d": 2, "upsample_bilinear2d": 4, "upsample_trilinear3d": 8, "upsample_bicubic2d": 16,
    "_upsample_bilinear2d_aa": 16, "_upsample_bicubic2d_aa": 64, "grid_sampler_2d": 16, "grid_sampler_3d": 64,
}
_ALONG_DIM = {"_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax", "cumsum", "cumsum_", "cumprod",
              "cumprod_", "logcumsumexp"}
_NUMEL_RATIO = {
    # the reduced element count: input elements per output element
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div", "nll_loss_forward", "nll_loss2d_forward", "nll_loss",
    "multi_margin_loss", "multilabel_margin_loss_forward", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "trace", "histc", "dist",
}
# Not here, so unknown (the largest floor): col2im (fold sums overlapping patches), renorm and weight norm (a norm
# over a slice, their outputs as large as their inputs), scatter with a reduce argument (sums into its target).
_AVG_POOL = {"avg_pool1d", "avg_pool2d", "avg_pool3d"}
_DISTANCES = {"_cdist_forward", "cdist", "_pdist_forward", "pdist", "_euclidean_dist"}  # a sum over the features
_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "_addmm_activation",
           "matmul", "inner", "outer", "addr", "_scaled_mm", "linear", "tensordot"}
_CONV = {"convolution", "_convolution", "convolution_overrideable", "cudnn_convolution",
         "cudnn_convolution_transpose", "mkldnn_convolution", "_slow_conv2d_forward", "slow_conv3d_forward",
         "slow_conv_transpose2d", "slow_conv_transpose3d", "_conv_depthwise2d", "conv_depthwise3d",
         "miopen_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d", "slow_conv_dilated2d", "slow_conv_dilated3d", "_nnpack_spatial_convolution"}
_ATTENTION = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
              "_scaled_dot_product_fused_attention_overrideable", "_efficient_attention_forward",
              "_flash_attention_forward", "scaled_dot_product_attention"}
_NORMS = {"native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
          "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional", "cudnn_batch_norm",
          "miopen_batch_norm", "_batch_norm_with_update", "_batch_norm_no_update", "batch_norm", "layer_norm",
          "group_norm", "instance_norm", "rms_norm", "_fused_rms_norm"}


def _numel(x: Any) -> int:
    return int(x.numel()) if isinstance(x, torch.Tensor) else 1


def _ratio(args: Sequence[Any], out: Any) -> int:
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    leaves = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    if first is None or not leaves:
        return 1
    return max(1, math.ceil(_numel(first) / max(1, _numel(leaves[0]))))


def _dim_size(args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 and isinstance(args[1], int) else -1)
    return int(x.shape[dim]) if isinstance(x, torch.Tensor) and x.dim() else 1


def _matmul_terms(args: Sequence[Any]) -> int:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if len(tensors) >= 3 and tensors[-2].dim() >= 1:       # addmm(bias, a, b), baddbmm, addmv, addr: bias + a @ b
        return int(tensors[-2].shape[-1]) + 1
    if len(tensors) >= 2 and tensors[0].dim() >= 1:
        return int(tensors[0].shape[-1])
    return 1


def _conv_terms(args: Sequence[Any], kwargs: dict[str, Any]) -> int:
    weight = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else kwargs.get("weight")
    if not isinstance(weight, torch.Tensor) or weight.dim() < 2:
        return 1
    # aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups): regular
    # weights are (Cout, Cin/g, k...), each output sums Cin/g * prod(k); transposed ones (Cin, Cout/g, k...), each
    # output sums at most Cin/g * prod(k). Where the flag is not there, the larger of the two readings. Plus the bias.
    transposed = args[6] if len(args) > 8 and isinstance(args[6], bool) else None
    groups = args[8] if len(args) > 8 and isinstance(args[8], int) and args[8] > 0 else 1
    regular, reverse = weight.numel() // weight.shape[0], weight.numel() // weight.shape[1] // groups
    return (regular if transposed is False else reverse if transposed else max(regular, reverse)) + 1


def _norm_terms(name: str, args: Sequence[Any]) -> int:
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if x is None:
        return 1
    if name in ("native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm") and len(args) > 1:
        return max(1, math.prod(int(s) for s in args[1]))
    if name in ("native_group_norm", "group_norm"):
        groups = next((a for a in reversed(args) if isinstance(a, int)), 1) if name == "native_group_norm" else \
            (args[1] if len(args) > 1 and isinstance(args[1], int) else 1)
        return max(1, x.numel() // max(1, x.shape[0] * groups))
    channels = int(x.shape[1]) if x.dim() > 1 else 1      # batch and instance norms: every element of a channel
    return max(1, x.numel() // channels)


def own_terms(func: Any, args: Sequence[Any], kwargs: dict[str, Any], out: Any) -> tuple[int | None, bool]:
    """The terms one operator sums into each output element (None: an operator this module does not know), and
    whether it is a contraction."""
    name = func._overloadpacket.__name__
    base = name[:-1] if name.endswith("_") and not name.startswith("_") else name
    tags = getattr(func, "tags", ())
    if base == "index_put" and (kwargs.get("accumulate") or (len(args) > 3 and args[3] is True)):
        return None, False                                  # index_put(..., accumulate=True) sums into its target
    if base == "scatter" and ("reduce" in kwargs or any(isinstance(a, str) for a in args)):
        return None, False                                  # scatter(..., reduce="add") likewise
    if getattr(func, "is_view", False) or name in _MOVES or base in _MOVES:
        return 1, False
    if name in _MATMUL:
        return _matmul_terms(args), True
    if name in _DISTANCES:                                  # like a product: fast forms expand |x - y|^2
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        return (int(x.shape[-1]) if x is not None and x.dim() else 1), True
    if name in _CONV:
        return _conv_terms(args, kwargs), True
    if name in _ATTENTION:
        q, k = args[0], args[1]
        return int(q.shape[-1]) * int(k.shape[-2]) + 1, True
    if name in _NORMS:
        return _norm_terms(name, args), False
    if name in _ALONG_DIM or base in _ALONG_DIM:
        return _dim_size(args, kwargs), False
    if name in _AVG_POOL:
        return max(1, math.prod(int(s) for s in args[1])) if len(args) > 1 else None, False
    if name in _SMALL_STENCILS:
        return _SMALL_STENCILS[name], False
    if torch.Tag.reduction in tags or name in _NUMEL_RATIO:
        return _ratio(args, out), False
    if torch.Tag.pointwise in tags or base in ("where", "clamp", "clamp_min", "clamp_max", "lerp", "addcmul",
                                               "addcdiv", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu",
                                               "gelu", "silu", "mish", "elu", "celu", "selu", "softplus",
                                               "threshold", "relu", "relu6", "glu", "prelu", "_prelu_kernel",
                                               "rrelu_with_noise", "logit", "softshrink", "hardshrink"):
        return 1, False
    return None, False


# -- the trace ------------------------------------------------------------------------------------------------------------
def _key(t: torch.Tensor) -> int | None:
    """The tensor's storage (views and in-place writes share it); None for an empty one or a tensor with none."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return storage._cdata if storage.nbytes() else None


class _DepthMode(TorchDispatchMode):
    def __init__(self, seeds: Sequence[torch.Tensor]) -> None:
        super().__init__()
        self.depth: dict[int, int] = {}
        self.contraction = False
        self.unknown: list[str] = []
        for t in seeds:
            key = _key(t)
            if key is not None:
                self.depth[key] = 1

    def lookup(self, t: torch.Tensor) -> int | None:
        key = _key(t)
        if key is None:                                    # an empty tensor holds nothing to round
            return 1
        return self.depth.get(key)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        own, contraction = own_terms(func, args, kwargs, out)
        name = func._overloadpacket.__name__
        if own is None:
            self.unknown.append(name)
            own = 1
        self.contraction |= contraction
        arg_tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        inputs = []
        factory = name in ("lift_fresh", "lift_fresh_copy", "scalar_tensor", "empty", "zeros", "ones", "full",
                           "arange", "linspace", "rand", "randn", "randint", "eye", "randperm")
        for t in arg_tensors:
            d = self.lookup(t)
            # an untraced 0-dim tensor is a wrapped Python number or a scalar constant; any other makes it unknown
            if d is None and not factory and t.dim() != 0:
                self.unknown.append(f"{name} on an untraced tensor")
            inputs.append(d or 1)
        depth = min(max(inputs, default=1) * own, TERMS_CAP)
        arg_keys = {_key(t) for t in arg_tensors}
        for t in (t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)):
            key = _key(t)
            if key is None:
                continue
            # a write into an argument's storage (in place, out=, a view) can only raise what that storage holds
            self.depth[key] = max(self.depth.get(key, 1), depth) if key in arg_keys else depth
        return out


def _module_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    found = [*model.parameters(), *model.buffers()]
    for m in model.modules():
        found.extend(v for v in vars(m).values() if isinstance(v, torch.Tensor))
        for v in vars(m).values():
            if isinstance(v, (list, tuple)):
                found.extend(x for x in v if isinstance(x, torch.Tensor))
    return found


def accumulation_depth(model: torch.nn.Module | Callable[..., Any], inputs: Sequence[Any]) -> Depth:
    """The accumulation depth of ``model`` on ``inputs`` (see the module docstring): one float32 forward under a
    dispatch mode, no gradients. Raises nothing: a reference that fails under the trace gives `UNKNOWN`."""
    seeds = [x for x in inputs if isinstance(x, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        seeds += _module_tensors(model)
    mode = _DepthMode(seeds)
    try:
        with torch.no_grad(), mode:
            out = model(*inputs)
    except Exception as exc:  # noqa: BLE001 - the floor then stays where it was before the trace
        return Depth(None, unknown=(f"the trace failed: {type(exc).__name__}",))
    leaves = [v for _, v in compare.flatten(out) if isinstance(v, torch.Tensor)]
    depths = [mode.lookup(v) for v in leaves]
    if mode.unknown or any(d is None for d in depths):
        return Depth(None, mode.contraction, tuple(dict.fromkeys(mode.unknown)) or ("an untraced output",))
    return Depth(max(depths, default=1), mode.contraction)
