"""The content-addressed store of build outputs, and the drop-in load_inline's resolution (no compiler needed)."""
from __future__ import annotations

import pytest

from cuda_agent.compiler.inline import PrebuiltResolver, call_to_spec, make_load_inline, sha256_file
from cuda_agent.compiler.inline.blobs import BlobCache
from cuda_agent.errors import BuildError


def test_outputs_are_named_by_content_and_checked_when_read(tmp_path):
    cache = BlobCache(tmp_path / "c", verify="always")
    src = tmp_path / "obj.o"
    src.write_bytes(b"object bytes")
    path = cache.put("key1", src, suffix=".o", meta={"kind": "sig"})
    assert path.name == sha256_file(path) + ".o" and cache.get("key1") == path
    assert cache.meta("key1")["kind"] == "sig"
    path.write_bytes(b"object bytez")
    assert cache.get("key1") is None, "a blob that no longer matches its hash is not handed out"
    assert not path.exists() and cache.meta("key1") is None, "and it is removed so that it is rebuilt"


def test_a_precompiled_header_keeps_its_header_beside_it(tmp_path):
    cache = BlobCache(tmp_path / "c")
    header, gch = tmp_path / "cak_pch.h", tmp_path / "cak_pch.h.gch"
    header.write_text("#include <vector>\n")
    gch.write_bytes(b"gch")
    placed = cache.put_pch("pch1", header, gch)
    assert placed.read_text() == "#include <vector>\n" and placed.with_name("cak_pch.h.gch").read_bytes() == b"gch"
    assert cache.get("pch1") == placed.with_name("cak_pch.h.gch")


def test_the_drop_in_resolves_prebuilt_modules_and_refuses_the_rest(tmp_path):
    spec = call_to_spec(("ext_x", "int f();"), {"functions": ["f"], "verbose": True})
    module = tmp_path / "m.so"
    module.write_bytes(b"not really a module")
    resolver = PrebuiltResolver({spec.key(): (module, sha256_file(module))})
    assert resolver(spec) == module
    other = call_to_spec(("ext_x", "int g();"), {"functions": ["g"]})
    with pytest.raises(BuildError, match="not prebuilt"):
        resolver(other)
    module.write_bytes(b"swapped after the build")
    with pytest.raises(BuildError, match="sha256"):
        resolver(spec)


def test_the_drop_in_has_torchs_parameters_and_refuses_a_second_extension_of_one_name():
    seen = []

    def resolver(spec):
        seen.append(spec)
        raise BuildError("stop here")

    load_inline = make_load_inline(resolver)
    with pytest.raises(BuildError, match="stop here"):
        load_inline("e", ["int f();"], None, None, ["f"], extra_cflags=["-O3"], verbose=True)
    assert seen[0].name == "e" and seen[0].functions == (("f", "f"),) and seen[0].extra_cflags == ("-O3",)
    with pytest.raises(BuildError, match="unexpected keyword"):
        load_inline("e", "x", not_an_argument=1)
