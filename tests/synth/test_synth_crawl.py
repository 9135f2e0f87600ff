"""The operator crawl: introspection, probing on small CPU shapes, and the JSON catalog."""
from __future__ import annotations

import json

import pytest

from cuda_agent.synth.crawl import crawl_operators
from cuda_agent.synth.spec import Catalog


def test_modules_get_shape_bound_arguments_and_batched_ranks(small_catalog: Catalog) -> None:
    conv = small_catalog.get("nn.Conv2d")
    args = {a.name: a for a in conv.init_args}
    assert args["in_channels"].bind == "dim" and args["in_channels"].value == 1
    assert args["out_channels"].bind == "free" and args["out_channels"].choices
    assert conv.inputs[0].ranks == (4,)
    assert conv.example is not None and conv.example[1][0] == conv.example[0][0][0]
    linear = small_catalog.get("nn.Linear")
    assert {a.name: a.bind for a in linear.init_args}["in_features"] == "dim"
    assert small_catalog.get("nn.LayerNorm").init_args[0].bind == "shape_tail"


def test_probing_finds_domains_stochastic_and_identity_operators(small_catalog: Catalog) -> None:
    assert small_catalog.get("torch.log").inputs[0].domain == "positive"
    assert small_catalog.get("torch.tanh").inputs[0].domain == "real"
    assert small_catalog.get("torch.sigmoid").output_domain in {"prob", "nonneg"}
    assert small_catalog.get("nn.ReLU").output_domain == "nonneg"
    assert small_catalog.get("nn.Dropout").stochastic
    assert not small_catalog.get("nn.Dropout").composable
    assert not small_catalog.get("nn.Conv2d").stochastic
    dropped = dict(small_catalog.dropped)
    assert "unchanged" in dropped["torch.positive"]
    assert small_catalog.get("torch.sum").category == "reduction"
    assert small_catalog.get("torch.mul").category == "binary"
    assert all(s.meta_ok for s in small_catalog.composable())


def test_catalog_json_round_trip(small_catalog: Catalog, tmp_path) -> None:
    path = small_catalog.save(tmp_path / "c.json")
    json.loads(path.read_text())
    again = Catalog.load(path)
    assert again.specs == small_catalog.specs
    assert again.dropped == small_catalog.dropped


def test_bad_catalog_file_is_a_clear_error(tmp_path) -> None:
    from cuda_agent.errors import ConfigError

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable operator catalog"):
        Catalog.load(bad)


def test_transformers_modules_are_standalone_and_verified() -> None:
    pytest.importorskip("transformers")
    names = {
        "transformers.activations.NewGELUActivation",
        "transformers.models.llama.modeling_llama.LlamaRMSNorm",
        "transformers.models.gemma.modeling_gemma.GemmaRotaryEmbedding",
    }
    catalog = crawl_operators(include_torch=False, only=names)
    got = {s.name: s for s in catalog}
    assert set(got) == names, catalog.dropped
    assert all(s.standalone and not s.composable for s in got.values())
    assert got["transformers.models.gemma.modeling_gemma.GemmaRotaryEmbedding"].input_independent
    norm = got["transformers.models.llama.modeling_llama.LlamaRMSNorm"]
    assert norm.import_line.startswith("from transformers.models.llama")
    assert catalog.standalone() and all(not s.input_independent for s in catalog.standalone())
