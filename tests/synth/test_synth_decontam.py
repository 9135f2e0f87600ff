"""Decontamination against KernelBench and near-duplicates within a set."""
from __future__ import annotations

import re

import pytest

from cuda_agent.synth.compose import RuleComposer
from cuda_agent.synth.decontam import SimilarityIndex, kernelbench_index, model_signature, similarity
from cuda_agent.locations import kernelbench_root


@pytest.fixture(scope="module")
def kb_index() -> SimilarityIndex:
    root = kernelbench_root()
    if root is None:
        pytest.skip("KernelBench tasks not found (set CUDA_AGENT_KERNELBENCH)")
    return kernelbench_index(root)


def _renamed(code: str) -> str:
    """A disguised copy: other attribute, argument and variable names, other sizes, no docstrings or comments."""
    code = re.sub(r'"""[\s\S]*?"""', "", code)
    code = re.sub(r"#.*", "", code)
    code = code.replace("super(Model, self).__init__()", "super().__init__()")
    names = {"conv_transpose": "up", "conv": "c1", "gemm": "fc", "x": "t", "in_channels": "cin",
             "out_channels": "cout", "kernel_size": "k", "in_features": "fin", "out_features": "fout",
             "bias_shape": "bshape", "scaling_factor": "alpha", "self.bias": "self.offset"}
    for old, new in names.items():
        code = re.sub(rf"\b{re.escape(old)}\b", new, code)
    return re.sub(r"\b(\d+)\b", lambda m: str(int(m.group(1)) + 3), code)


def test_a_renamed_copy_of_a_kernelbench_task_is_caught(kb_index: SimilarityIndex) -> None:
    root = kernelbench_root()
    for rel in ("level2/12_Gemm_Multiply_LeakyReLU.py", "level2/1_Conv2D_ReLU_BiasAdd.py", "level1/19_ReLU.py"):
        original = (root / rel).read_text()
        disguised = _renamed(original)
        assert disguised != original
        match = kb_index.nearest(disguised, 0.9)
        assert match is not None and match.key == rel.removesuffix(".py") and match.score >= 0.9, (rel, match)


def test_unrelated_tasks_are_kept(kb_index: SimilarityIndex, small_catalog) -> None:
    composer = RuleComposer(small_catalog, seed=11)
    scores = []
    for index in range(8):
        made = composer.compose(index)
        if made is not None and len(made.ops) >= 3:
            match = kb_index.nearest(made.code, 0.0)
            scores.append(match.score if match else 0.0)
    assert scores and min(scores) < 0.9


def test_similarity_sees_operators_not_names() -> None:
    a = "class Model:\n    def forward(self, x):\n        x = torch.relu(x)\n        x = torch.tanh(x)\n        return x\n"
    b = a.replace("x", "y").replace("forward(self, y)", "forward(self, y)")
    c = a.replace("torch.tanh", "torch.sigmoid")
    assert similarity(model_signature(a), model_signature(b)) == 1.0
    assert similarity(model_signature(a), model_signature(c)) < 0.9
    assert model_signature("def f(): pass") is None


def test_index_finds_near_duplicates() -> None:
    index = SimilarityIndex()
    a = "class Model:\n    def forward(self, x):\n        return torch.relu(x) * 2.0\n"
    assert index.add("a", a)
    assert index.nearest(a.replace("2.0", "5.0"), 0.9).key == "a"
    assert index.nearest("class Model:\n    def forward(self, q):\n        return torch.exp(q).sum(1)\n", 0.9) is None
