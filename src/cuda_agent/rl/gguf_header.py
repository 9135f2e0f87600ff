"""Read a GGUF file's header (our own small reader): magic, version, counts, metadata and tensor descriptions.

Why our own: the model for the one-GPU RL run arrives as index packages of unknown provenance that are joined into
one file; before transformers (through the ``gguf`` package) loads it, we check that it is the model we expect
without importing anything heavy. The reader never reads tensor data, only the header in front of it.

Layout (GGUF v2/v3, little-endian): ``b"GGUF"``, uint32 version, uint64 tensor count, uint64 metadata count; each
metadata entry is a string key, a uint32 value type and the value (arrays: uint32 element type, uint64 length,
the elements); then per tensor a string name, uint32 dimension count, uint64 dimensions, uint32 ggml type and a
uint64 offset. Strings are a uint64 length and UTF-8 bytes. Version 1 used uint32 counts and lengths.
"""
from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from cuda_agent.errors import CudaAgentError

MAGIC = b"GGUF"
ARRAY_HEAD = 8
"""Array elements kept per metadata array (a tokenizer's 150k tokens are counted, not kept)."""

# metadata value types
_SCALARS: dict[int, str] = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
                            12: "d"}
STRING, ARRAY = 8, 9
TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32", 7: "bool",
              8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}
# ggml tensor types (the ones a GGUF of a small model uses, and their bits per weight including scales)
GGML_TYPES: dict[int, tuple[str, float]] = {
    0: ("F32", 32.0), 1: ("F16", 16.0), 2: ("Q4_0", 4.5), 3: ("Q4_1", 5.0), 6: ("Q5_0", 5.5), 7: ("Q5_1", 6.0),
    8: ("Q8_0", 8.5), 9: ("Q8_1", 9.0), 10: ("Q2_K", 2.625), 11: ("Q3_K", 3.4375), 12: ("Q4_K", 4.5),
    13: ("Q5_K", 5.5), 14: ("Q6_K", 6.5625), 15: ("Q8_K", 9.125), 30: ("BF16", 16.0)}
# general.file_type (llama.cpp's LLAMA_FTYPE_*)
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
              18: "Q6_K", 32: "BF16"}
MAX_STRING = 1 << 24
MAX_COUNT = 1 << 32


class GGUFError(CudaAgentError):
    """A file is not a readable GGUF header (wrong magic, unknown version or type, truncated)."""


@dataclass(frozen=True)
class ArrayValue:
    """A metadata array: its element type, its length and its first `ARRAY_HEAD` elements."""

    element_type: str
    length: int
    head: tuple[Any, ...]


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    ggml_type: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, (f"type{self.ggml_type}", 0.0))[0]


@dataclass(frozen=True)
class GGUFHeader:
    """What the header of a GGUF file says. ``metadata`` maps each key to a Python value (arrays as
    `ArrayValue`); ``value_types`` maps each key to its GGUF type name."""

    path: str
    version: int
    tensor_count: int
    metadata: Mapping[str, Any]
    value_types: Mapping[str, str]
    tensors: tuple[TensorInfo, ...] = field(default=())
    file_size: int = 0

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name", ""))

    def arch_key(self, suffix: str) -> Any:
        """``<architecture>.<suffix>`` (e.g. ``block_count``, ``embedding_length``), or None."""
        return self.metadata.get(f"{self.architecture}.{suffix}")

    @property
    def parameters(self) -> int:
        """Weights in the tensors the header lists (the exact parameter count of the file)."""
        return sum(t.elements for t in self.tensors)

    @property
    def tensor_types(self) -> dict[str, int]:
        """Tensor count per ggml type, most common first."""
        return dict(Counter(t.type_name for t in self.tensors).most_common())

    @property
    def quantisation(self) -> str:
        """The file type the header declares (``general.file_type``), else the most common tensor type."""
        ftype = self.metadata.get("general.file_type")
        if isinstance(ftype, int) and ftype in FILE_TYPES:
            return FILE_TYPES[ftype]
        types = self.tensor_types
        return next(iter(types)) if types else "unknown"

    def summary(self) -> dict[str, Any]:
        """The facts a person checks before loading the model (a JSON-able dict)."""
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        return {"path": self.path, "gguf_version": self.version, "tensors": self.tensor_count,
                "metadata_keys": len(self.metadata), "architecture": self.architecture, "name": self.name,
                "size_label": self.metadata.get("general.size_label"), "quantisation": self.quantisation,
                "tensor_types": self.tensor_types, "parameters": self.parameters,
                "block_count": self.arch_key("block_count"), "embedding_length": self.arch_key("embedding_length"),
                "context_length": self.arch_key("context_length"),
                "tokenizer_model": self.metadata.get("tokenizer.ggml.model"),
                "vocab_size": tokens.length if isinstance(tokens, ArrayValue) else None,
                "chat_template": "tokenizer.chat_template" in self.metadata, "file_bytes": self.file_size}


REQUIRED_KEYS = ("general.architecture", "general.name", "tokenizer.ggml.model", "tokenizer.ggml.tokens")
REQUIRED_ARCH_KEYS = ("block_count", "embedding_length")


def check_header(header: GGUFHeader) -> None:
    """Raise `GGUFError` naming the file and the missing keys unless the header describes a loadable language model
    (architecture, name, a tokenizer, block count and embedding length, at least one tensor)."""
    missing = [k for k in REQUIRED_KEYS if k not in header.metadata]
    missing += [f"{header.architecture or '<arch>'}.{k}" for k in REQUIRED_ARCH_KEYS if header.arch_key(k) is None]
    if missing:
        raise GGUFError(f"{header.path}: GGUF header lacks {', '.join(missing)}")
    if header.tensor_count < 1:
        raise GGUFError(f"{header.path}: GGUF header lists no tensors")


class _Reader:
    def __init__(self, stream: BinaryIO, path: str, version: int = 3) -> None:
        self.stream, self.path, self.version = stream, path, version

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        data = self.stream.read(size)
        if len(data) != size:
            raise GGUFError(f"{self.path}: GGUF header ends early (truncated file?)")
        return struct.unpack("<" + fmt, data)[0]

    def count(self) -> int:
        value = self.take("I" if self.version == 1 else "Q")
        if value > MAX_COUNT:
            raise GGUFError(f"{self.path}: implausible count {value} in the GGUF header")
        return int(value)

    def string(self) -> str:
        n = self.count()
        if n > MAX_STRING:
            raise GGUFError(f"{self.path}: string of {n} bytes in the GGUF header")
        data = self.stream.read(n)
        if len(data) != n:
            raise GGUFError(f"{self.path}: GGUF header ends early (truncated file?)")
        return data.decode("utf-8", "replace")

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            element = self.take("I")
            if element not in TYPE_NAMES:
                raise GGUFError(f"{self.path}: unknown array element type {element}")
            length = self.count()
            head = []
            for i in range(length):
                item = self.value(element)
                if i < ARRAY_HEAD:
                    head.append(item)
            return ArrayValue(TYPE_NAMES[element], length, tuple(head))
        raise GGUFError(f"{self.path}: unknown metadata value type {kind}")


def read_header(path: str | Path, *, tensors: bool = True) -> GGUFHeader:
    """Parse the header of the GGUF file at ``path`` (with the tensor descriptions unless ``tensors`` is False).
    Raises `GGUFError` for a file that is not GGUF, of an unknown version, or truncated; `OSError` if unreadable."""
    path = Path(path)
    with path.open("rb") as stream:
        magic = stream.read(4)
        if magic != MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (magic {magic!r}, expected {MAGIC!r})")
        reader = _Reader(stream, str(path))
        version = reader.take("I")
        if version not in (1, 2, 3):
            raise GGUFError(f"{path}: GGUF version {version} is not 1, 2 or 3")
        reader.version = version
        n_tensors, n_kv = reader.count(), reader.count()
        metadata: dict[str, Any] = {}
        types: dict[str, str] = {}
        for _ in range(n_kv):
            key = reader.string()
            kind = reader.take("I")
            metadata[key] = reader.value(kind)
            types[key] = TYPE_NAMES.get(kind, str(kind))
        infos: list[TensorInfo] = []
        if tensors:
            for _ in range(n_tensors):
                name = reader.string()
                dims = reader.take("I")
                shape = tuple(reader.count() for _ in range(dims))
                ggml_type = reader.take("I")
                reader.take("Q")  # offset into the data section
                infos.append(TensorInfo(name, shape, ggml_type))
    return GGUFHeader(str(path), version, n_tensors, metadata, types, tuple(infos), path.stat().st_size)


def write_header(path: str | Path, metadata: Mapping[str, tuple[int, Any]],
                 tensors: tuple[tuple[str, tuple[int, ...], int], ...] = (), version: int = 3) -> None:
    """Write a GGUF header (no tensor data) with ``metadata`` as ``key -> (value_type, value)`` (arrays as
    ``(ARRAY, (element_type, [items]))``) and ``tensors`` as ``(name, shape, ggml_type)``. For tests and tools
    that need a small GGUF file; raises `GGUFError` for an unknown value type."""
    count = "<I" if version == 1 else "<Q"

    def s(text: str) -> bytes:
        data = text.encode()
        return struct.pack(count, len(data)) + data

    def v(kind: int, value: Any) -> bytes:
        if kind in _SCALARS:
            return struct.pack("<" + _SCALARS[kind], value)
        if kind == STRING:
            return s(value)
        if kind == ARRAY:
            element, items = value
            return struct.pack("<I", element) + struct.pack(count, len(items)) + b"".join(v(element, i) for i in items)
        raise GGUFError(f"cannot write GGUF value type {kind}")

    out = [MAGIC, struct.pack("<I", version), struct.pack(count, len(tensors)), struct.pack(count, len(metadata))]
    for key, (kind, value) in metadata.items():
        out += [s(key), struct.pack("<I", kind), v(kind, value)]
    for name, shape, ggml_type in tensors:
        out += [s(name), struct.pack("<I", len(shape))] + [struct.pack(count, d) for d in shape]
        out += [struct.pack("<I", ggml_type), struct.pack("<Q", 0)]
    Path(path).write_bytes(b"".join(out))
