"""KernelBench single-file solutions (``torch.utils.cpp_extension.load_inline``) built fast and cached.

Trusted side::

    specs = extract_inline_specs(source)             # or read_recording(...) from the sandboxed recorder
    result = build_inline(spec, cache_dir=..., arch="90", runner=sandboxed_runner(work, extra_ro=[cache]),
                          work_dir=work)
    manifest = {spec.key(): (result.module_path, sha256_file(result.module_path))}

Candidate process::

    install(PrebuiltResolver(manifest))              # then import the solution: its load_inline is answered

`load_inline` here is a drop-in with torch's parameters; by default it builds with `build_inline` in this process
(for trusted tools and tests); `configure` points it at another resolver.
"""
from __future__ import annotations

from typing import Any

from cuda_agent.compiler.inline.blobs import BlobCache, sha256_file
from cuda_agent.compiler.inline.builder import (
    STRATEGIES, InlineBuildResult, build_inline, default_inline_cache, warm_up,
)
from cuda_agent.compiler.inline.flags import InlineFlagError
from cuda_agent.compiler.inline.loader import (
    InlineResolver, LocalBuildResolver, PrebuiltResolver, call_to_spec, import_inline_module, install,
    make_load_inline,
)
from cuda_agent.compiler.inline.record import RecordingStopped, read_recording
from cuda_agent.compiler.inline.spec import InlineExtractionError, InlineSpec, InlineSpecError, extract_inline_specs

_resolver: InlineResolver = LocalBuildResolver()


def configure(resolver: InlineResolver) -> None:
    """Make the module-level `load_inline` answer from ``resolver`` (and forget what it loaded before)."""
    global _resolver, load_inline
    _resolver = resolver
    load_inline = make_load_inline(resolver)


load_inline: Any = make_load_inline(lambda spec: _resolver(spec))

__all__ = [
    "STRATEGIES", "BlobCache", "InlineBuildResult", "InlineExtractionError", "InlineFlagError", "InlineResolver",
    "InlineSpec", "InlineSpecError", "LocalBuildResolver", "PrebuiltResolver", "RecordingStopped", "build_inline",
    "call_to_spec", "configure", "default_inline_cache", "extract_inline_specs", "import_inline_module", "install",
    "load_inline", "make_load_inline", "read_recording", "sha256_file", "warm_up",
]
