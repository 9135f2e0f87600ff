import json

from cuda_agent.rl.reward import compute_score, extract_solution
from cuda_agent.rl.standin import stand_in_score

SOLUTION = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"


def test_extracts_the_last_block_defining_modelnew():
    text = f"first try\n```python\nx = 1\n```\nfinal:\n```python\n{SOLUTION}```\n"
    assert extract_solution(text) == SOLUTION
    assert extract_solution("no code at all") is None


def test_compute_score_has_verls_signature_and_scores_missing_solutions_minus_one(task):
    extra = {"task_json": json.dumps(task.to_dict())}
    assert compute_score("cuda_agent", "sorry", None, extra, backend={"kind": "stand_in"}) == -1.0
    text = f"```python\n{SOLUTION}# __global__ void k() CA_EXPORT(k) __shared__\n```"
    assert compute_score("cuda_agent", text, None, extra, backend={"kind": "stand_in"}) == 3.0


def test_stand_in_score_levels():
    kernel = "__global__ void k(){}\nCA_EXPORT(k);\n"
    assert stand_in_score({}) == -1.0
    assert stand_in_score({"model_new.py": SOLUTION}) == 1.0
    assert stand_in_score({"model_new.py": SOLUTION, "kernels/k.cu": kernel}) == 2.0
    assert stand_in_score({"model_new.py": SOLUTION, "kernels/k.cu": kernel + "__shared__ float t[32];"}) == 3.0
