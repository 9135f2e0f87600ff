"""Seed operators from transformers: activations, normalisations, rotary embeddings and MLP blocks.

Only classes that can be built from arguments or a default config (no download) are taken. They become standalone
tasks (never stacked with other operators), because each is already a small fused block of its model. transformers
is optional (extra ``synth``): without it this yields nothing and logs why.
"""
from __future__ import annotations

import importlib
import inspect
import logging
import re
from typing import Iterable

from cuda_agent.synth.spec import ArgSpec, InputSpec, OperatorSpec

log = logging.getLogger(__name__)

MODEL_MODULES = (
    "transformers.models.llama.modeling_llama",
    "transformers.models.mistral.modeling_mistral",
    "transformers.models.gemma.modeling_gemma",
    "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.t5.modeling_t5",
    "transformers.models.phi3.modeling_phi3",
    "transformers.models.gpt_neox.modeling_gpt_neox",
)
"""Model families whose small building blocks are crawled (a curated list: importing all models takes minutes)."""

_KEEP = re.compile(r"(RMSNorm|LayerNorm|RotaryEmbedding|MLP|DenseActDense|GatedActDense)$")
_MLP_CONFIG = {"hidden_size": "dim:-1", "intermediate_size": 256, "d_model": "dim:-1", "d_ff": 256,
               "num_attention_heads": 2, "num_key_value_heads": 2, "dropout_rate": 0.0}
"""Small configs: the defaults (hidden size 4096) would make every probe and task huge; no dropout."""
_HF_ARGS: dict[str, ArgSpec] = {
    "hidden_size": ArgSpec("hidden_size", "dim", -1),
    "dim": ArgSpec("dim", "dim", -1),
    "normalized_shape": ArgSpec("normalized_shape", "dim", -1),
    "min": ArgSpec("min", "const", -1.0),
    "max": ArgSpec("max", "const", 1.0),
}
"""transformers names ``dim`` the hidden size (unlike torch, where it is an axis)."""


def _config_class(module: object) -> str | None:
    name = module.__name__.replace(".modeling_", ".configuration_")  # type: ignore[attr-defined]
    try:
        config_module = importlib.import_module(name)
    except ImportError:
        return None
    for attr, value in vars(config_module).items():
        if attr.endswith("Config") and inspect.isclass(value) and value.__module__ == name:
            return f"{name}.{attr}"
    return None


def _spec(cls: type, module_name: str, config: str | None) -> OperatorSpec | tuple[str, str]:
    name = f"{module_name}.{cls.__name__}"
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return (name, "constructor signature not introspectable")
    args: list[ArgSpec] = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not inspect.Parameter.empty:
            continue
        if p.name == "config" and config is not None:
            kwargs = {k: v for k, v in _MLP_CONFIG.items()}
            args.append(ArgSpec("config", "config", {"class": config, "kwargs": kwargs}, keyword=False))
        elif p.name in _HF_ARGS:
            args.append(_HF_ARGS[p.name])
        else:
            return (name, f"cannot infer required argument {p.name!r}")
    call_args: tuple[ArgSpec, ...] = ()
    forward = list(inspect.signature(cls.forward).parameters.values())[1:]
    required = [p.name for p in forward if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required[1:] == ["position_ids"]:
        call_args = (ArgSpec("position_ids", "positions", keyword=False),)
    elif len(required) != 1:
        return (name, f"forward needs {required}, not one tensor")
    category = "activation" if "activations" in module_name else (
        "norm" if "Norm" in cls.__name__ else "attention" if "Rotary" in cls.__name__ else "linear")
    return OperatorSpec(
        name=name,
        kind="module",
        source="transformers",
        category=category,
        init_args=tuple(args),
        call_args=call_args,
        inputs=(InputSpec(ranks=(3,)),),
        standalone=True,
        import_line=f"from {module_name} import {cls.__name__}",
    )


def transformers_candidates(model_modules: Iterable[str] = MODEL_MODULES) -> Iterable[OperatorSpec | tuple[str, str]]:
    """Specs for transformers' standalone modules, not yet verified (the crawl probes them)."""
    try:
        import torch.nn as nn
        import transformers.activations as activations
    except ImportError:
        log.warning("transformers is not installed: skipping its operators (pip install 'cuda-agent[synth]')")
        return
    modules: list[tuple[object, str | None]] = [(activations, None)]
    seen: set[str] = set()
    for module_name in model_modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            yield (module_name, f"cannot import: {exc}")
            continue
        modules.append((module, _config_class(module)))
    for module, config in modules:
        module_name = module.__name__  # type: ignore[attr-defined]
        for attr, cls in sorted(vars(module).items()):
            if not (inspect.isclass(cls) and issubclass(cls, nn.Module) and cls.__module__ == module_name):
                continue
            if (module is not activations and not _KEEP.search(attr)) or f"{module_name}.{cls.__name__}" in seen:
                continue
            seen.add(f"{module_name}.{cls.__name__}")
            yield _spec(cls, module_name, config)
