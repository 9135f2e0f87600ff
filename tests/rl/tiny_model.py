"""A tiny model and a tokenizer built locally (no downloads), for the RL tests and the CPU benchmarks
(benchmarks/rl_tiny.py, benchmarks/verl_launch.py, which put this folder on their import path). Not in the library:
no command needs a randomly initialised model.

The tokenizer is a byte-level BPE trained with the ``tokenizers`` package on texts we give it (the agent's prompts,
tasks, scripted solutions), wrapped as a transformers fast tokenizer with the ChatML/Hermes special tokens and a
ChatML chat template. The model is a randomly initialised Qwen2 causal LM of a few hundred thousand parameters.
Needs ``tokenizers`` and ``transformers`` (imported here, lazily by callers).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from cuda_agent.rl.chat import ENDOFTEXT, IM_END, SPECIAL_TOKENS

CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """Train a byte-level BPE on ``texts`` and return a ``PreTrainedTokenizerFast`` (pad ``<|endoftext|>``,
    eos ``<|im_end|>``; each special token is one id)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=IM_END, pad_token=ENDOFTEXT,
                                        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in (IM_END, ENDOFTEXT)])
    tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def build_model(tokenizer: Any, *, hidden: int = 64, layers: int = 2, heads: int = 4, max_positions: int = 4096,
                seed: int = 0) -> Any:
    """A randomly initialised tiny Qwen2 causal LM sized to ``tokenizer``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=max_positions, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None)
    return Qwen2ForCausalLM(config)


def save_pair(model: Any, tokenizer: Any, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
