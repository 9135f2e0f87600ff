"""What introspection cannot infer: argument values by parameter name, and per-operator corrections.

`ARG_RULES` maps a required (or worth-setting) parameter name to how it is bound. `CURATED` corrects single
operators (a softer default, a dropout switched off, a channel count that must divide). `SKIP` names operators that
are never probed: containers, lazy modules, in-place and creation functions whose probing means nothing.
"""
from __future__ import annotations

from cuda_agent.synth.spec import ArgSpec

_SIZES = (16, 32, 64, 128)
_FEATURES = (64, 128, 256, 512, 1024)

ARG_RULES: dict[str, ArgSpec] = {
    "in_channels": ArgSpec("in_channels", "dim", 1),
    "out_channels": ArgSpec("out_channels", "free", 16, _SIZES),
    "kernel_size": ArgSpec("kernel_size", "const", 3),
    "in_features": ArgSpec("in_features", "dim", -1),
    "out_features": ArgSpec("out_features", "free", 16, _FEATURES),
    "num_features": ArgSpec("num_features", "dim", 1),
    "num_channels": ArgSpec("num_channels", "dim", 1),
    "normalized_shape": ArgSpec("normalized_shape", "shape_tail", 1),
    "num_groups": ArgSpec("num_groups", "const", 4),
    "dim": ArgSpec("dim", "dim_index", 1),
    "upscale_factor": ArgSpec("upscale_factor", "const", 2),
    "downscale_factor": ArgSpec("downscale_factor", "const", 2),
    "output_size": ArgSpec("output_size", "const", 4),
    "size": ArgSpec("size", "const", 5),
    "padding": ArgSpec("padding", "const", 1),
    "pad": ArgSpec("pad", "const", (1, 1)),
    "threshold": ArgSpec("threshold", "const", 0.5),
    "value": ArgSpec("value", "const", 0.0),
    "lambd": ArgSpec("lambd", "const", 0.5),
    "groups": ArgSpec("groups", "const", 2),
    "exponent": ArgSpec("exponent", "const", 2.0),
    "p": ArgSpec("p", "const", 2.0),
    "maxnorm": ArgSpec("maxnorm", "const", 1.0),
    "norm_type": ArgSpec("norm_type", "const", 2.0),
    "other": ArgSpec("other", "param"),
    "d_model": ArgSpec("d_model", "dim", -1),
    "nhead": ArgSpec("nhead", "const", 4),
    "embed_dim": ArgSpec("embed_dim", "dim", -1),
    "num_heads": ArgSpec("num_heads", "const", 4),
    "input_size": ArgSpec("input_size", "dim", -1),
    "hidden_size": ArgSpec("hidden_size", "dim", -1),
}
"""How a parameter is bound when the signature alone says nothing (it has no default, or its default is useless)."""

CURATED: dict[str, dict[str, object]] = {
    "torch.clamp": {"call_args": (ArgSpec("min", "const", -0.5), ArgSpec("max", "const", 0.5)),
                    "note": "clamp needs a bound; curated to [-0.5, 0.5]"},
    "torch.clip": {"call_args": (ArgSpec("min", "const", -0.5), ArgSpec("max", "const", 0.5)),
                   "note": "clip needs a bound; curated to [-0.5, 0.5]"},
    "F.interpolate": {"call_args": (ArgSpec("scale_factor", "const", 2.0),),
                      "note": "interpolate needs a size or scale; curated to scale 2"},
    "F.upsample": {"call_args": (ArgSpec("scale_factor", "const", 2.0),), "note": "curated to scale 2"},
    "F.upsample_nearest": {"call_args": (ArgSpec("scale_factor", "const", 2.0),), "note": "curated to scale 2"},
    "F.upsample_bilinear": {"call_args": (ArgSpec("scale_factor", "const", 2.0),), "note": "curated to scale 2"},
    "nn.Upsample": {"init_args": (ArgSpec("scale_factor", "const", 2.0),), "note": "curated to scale 2"},
    "nn.TransformerEncoderLayer": {
        "init_args": (ArgSpec("d_model", "dim", -1), ArgSpec("nhead", "const", 4), ArgSpec("dropout", "const", 0.0),
                      ArgSpec("dim_feedforward", "free", 256, (128, 256, 512)), ArgSpec("batch_first", "const", True)),
        "note": "dropout off (deterministic); a feed-forward width the composer picks",
    },
    "nn.TransformerDecoderLayer": {"skip": "needs a memory input"},
    "nn.GroupNorm": {"init_args": (ArgSpec("num_groups", "const", 4), ArgSpec("num_channels", "dim", 1)),
                     "channel_multiple": 4, "note": "channels must be a multiple of num_groups"},
    "F.group_norm": {"call_args": (ArgSpec("num_groups", "const", 4),), "channel_multiple": 4,
                     "note": "channels must be a multiple of num_groups"},
    "nn.PixelShuffle": {"channel_multiple": 4, "note": "channels must be a multiple of upscale_factor**2"},
    "F.pixel_shuffle": {"channel_multiple": 4, "note": "channels must be a multiple of upscale_factor**2"},
    "nn.ChannelShuffle": {"channel_multiple": 2, "note": "channels must be a multiple of groups"},
    "F.channel_shuffle": {"channel_multiple": 2, "note": "channels must be a multiple of groups"},
    "nn.Softmax2d": {"note": "softmax over channels of a 3-d or 4-d input"},
    "nn.Conv1d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, _SIZES),
                                ArgSpec("kernel_size", "free", 3, (1, 3, 5))), "min_size": 5},
    "nn.Conv2d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, _SIZES),
                                ArgSpec("kernel_size", "free", 3, (1, 3, 5))), "min_size": 5},
    "nn.Conv3d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, (8, 16, 32)),
                                ArgSpec("kernel_size", "const", 3)), "min_size": 5},
    "nn.ConvTranspose1d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, _SIZES),
                                         ArgSpec("kernel_size", "const", 3), ArgSpec("stride", "free", 1, (1, 2)))},
    "nn.ConvTranspose2d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, _SIZES),
                                         ArgSpec("kernel_size", "const", 3), ArgSpec("stride", "free", 1, (1, 2)))},
    "nn.ConvTranspose3d": {"init_args": (ArgSpec("in_channels", "dim", 1), ArgSpec("out_channels", "free", 16, (8, 16)),
                                         ArgSpec("kernel_size", "const", 3))},
    "nn.MaxPool1d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.MaxPool2d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.MaxPool3d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.AvgPool1d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.AvgPool2d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.AvgPool3d": {"init_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.LPPool1d": {"init_args": (ArgSpec("norm_type", "const", 2.0), ArgSpec("kernel_size", "const", 2)), "min_size": 2},
    "nn.LPPool2d": {"init_args": (ArgSpec("norm_type", "const", 2.0), ArgSpec("kernel_size", "const", 2)), "min_size": 2},
    "nn.LPPool3d": {"init_args": (ArgSpec("norm_type", "const", 2.0), ArgSpec("kernel_size", "const", 2)), "min_size": 2},
    "F.avg_pool1d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "F.avg_pool2d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "F.avg_pool3d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "F.max_pool1d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "F.max_pool2d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "F.max_pool3d": {"call_args": (ArgSpec("kernel_size", "const", 2),), "min_size": 2},
    "nn.Linear": {"init_args": (ArgSpec("in_features", "dim", -1), ArgSpec("out_features", "free", 16, _FEATURES))},
    "nn.RNN": {"skip": "recurrent: a sequential loop, not a kernel-fusion task"},
    "nn.LSTM": {"skip": "recurrent: a sequential loop, not a kernel-fusion task"},
    "nn.GRU": {"skip": "recurrent: a sequential loop, not a kernel-fusion task"},
    "nn.RNNCell": {"skip": "recurrent cell"},
    "nn.LSTMCell": {"skip": "recurrent cell"},
    "nn.GRUCell": {"skip": "recurrent cell"},
}
"""Per-operator corrections: ``init_args`` / ``call_args`` replace introspected ones; ``skip`` drops it (with the
reason); ``channel_multiple`` and ``min_size`` constrain inputs; ``note`` says why."""

SKIP_MODULES = frozenset({
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Container", "Identity",
    "Transformer", "TransformerEncoder", "TransformerDecoder", "MultiheadAttention", "Embedding", "EmbeddingBag",
    "Bilinear", "Fold", "Unfold", "Unflatten", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "CrossMapLRN2d",
    "RNNBase", "RNNCellBase", "SyncBatchNorm", "Buffer", "Parameter", "UninitializedParameter", "UninitializedBuffer",
})
"""torch.nn classes that are not single operators on one tensor (containers, index inputs, several inputs)."""

SKIP_FUNCTION_PREFIXES = ("_", "set_", "get_", "is_", "use_", "manual_seed", "seed", "initial_seed", "save", "load",
                          "empty", "zeros", "ones", "full", "rand", "normal", "poisson", "bernoulli", "multinomial",
                          "arange", "linspace", "logspace", "eye", "tensor", "as_", "from", "quantize", "fake_",
                          "native_", "sparse_", "q_", "fbgemm", "mkldnn", "cudnn", "miopen", "embedding",
                          "ctc_", "nll_", "binary_cross", "cross_entropy", "multi_head", "scaled_dot",
                          "batch_norm", "feature_", "alpha_dropout", "grid_sample", "affine_grid")
"""torch function names never probed: creation, randomness sources, state, quantised/sparse internals, losses."""
