"""Is this interpreter verl's training environment? verl 0.9.1 declares its dependencies' ranges (transformers
< 5.11, tensordict <= 0.10, ...), and its v1 trainer imports TransferQueue, which verl lists only in an extra. A
verl installed with ``--no-deps`` beside newer packages imports, then fails at launch (the SFT trainer at import,
``main_ppo`` in its task runner). `problems` reads verl's own declared requirements from its installed metadata and
checks each installed version against them, so a wrong environment is named before anything is launched.

The environment that passes is made by ``bash scripts/setup.sh --rl`` (``.venv-rl``, requirements/rl.lock).
"""
from __future__ import annotations

from importlib import metadata

from cuda_agent.errors import ConfigError

SETUP_HINT = "make it with `bash scripts/setup.sh --rl` and run .venv-rl/bin/cuda-agent"
TRANSFER_QUEUE = "transferqueue"


def problems() -> list[str]:
    """What keeps verl from running here, one line each (empty: verl's declared requirements all hold, and
    TransferQueue, which verl's default v1 trainer imports, is installed)."""
    from packaging.requirements import Requirement

    try:
        declared = metadata.requires("verl") or []
    except metadata.PackageNotFoundError:
        return ["verl is not installed"]
    found: list[str] = []
    for text in declared:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement (vllm, sglang, test, ...): not part of verl's core
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            found.append(f"{requirement.name} is missing (verl requires {requirement})")
            continue
        if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
            found.append(f"{requirement.name} {version} is outside verl's declared range {requirement.specifier}")
    try:
        metadata.version(TRANSFER_QUEUE)
    except metadata.PackageNotFoundError:
        found.append("transferqueue is missing (verl's v1 trainer, trainer.use_v1, imports transfer_queue)")
    return found


def require() -> None:
    """Raise `ConfigError` (one line naming each problem) unless verl can run in this interpreter."""
    found = problems()
    if found:
        raise ConfigError(f"this Python is not verl's training environment: {'; '.join(found)}; {SETUP_HINT}")
