import json

import pytest

from cuda_agent.errors import ConfigError
from cuda_agent.pool import EvalJob
from cuda_agent.rl.envfactory import make_backend, shared_pool
from cuda_agent.rl.reward import compute_score, extract_solution, score_solution
from cuda_agent.rl.standin import StandInPool

SOLUTION = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"
KERNEL = '__global__ void k(float* y) { y[0] = 0.0f; }\nCA_EXPORT(k);\n'


def test_extracts_the_last_block_defining_modelnew():
    text = f"first try\n```python\nx = 1\n```\nfinal:\n```python\n{SOLUTION}```\n"
    assert extract_solution(text) == SOLUTION
    assert extract_solution("no code at all") is None


def test_compute_score_has_verls_signature_and_scores_missing_solutions_minus_one(task):
    extra = {"task_json": json.dumps(task.to_dict())}
    assert compute_score("cuda_agent", "sorry", None, extra, backend={"kind": "stand_in"}) == -1.0
    assert compute_score("cuda_agent", f"```python\n{SOLUTION}```", None, extra, backend={"kind": "stand_in"}) == 1.0


def test_the_reward_and_the_episodes_share_one_stand_in_pool_per_process(task):
    backend = make_backend({"kind": "stand_in", "timeout_s": 5})
    assert backend.pool is make_backend({"kind": "stand_in"}).pool is shared_pool("stand_in", {})
    assert isinstance(backend.pool, StandInPool) and backend.timeout_s == 5


def test_the_stand_in_verdict_is_the_pool_stand_ins_and_its_faults_score_minus_one(task):
    """The warm-up's single file is scored by its features: ModelNew 1, a CA_EXPORT kernel 2, with float4 loads 3."""
    with_kernel = f'{SOLUTION}SRC = r"""\n{KERNEL}"""\n'
    assert [score_solution(task, code, {"kind": "stand_in"}) for code in
            ("class Model:\n    pass\n", SOLUTION, with_kernel, with_kernel.replace("float*", "float4*"))] == [
        -1.0, 1.0, 2.0, 3.0]
    assert score_solution(task, SOLUTION, {"kind": "stand_in", "fault": "broken"}) == -1.0
    extra = {"task_json": json.dumps(task.to_dict())}
    reply = f"```python\n{SOLUTION}```"
    assert compute_score("cuda_agent", reply, None, extra, backend={"kind": "stand_in", "fault": "error"}) == -1.0
    with pytest.raises(ConfigError, match="crash and hang need a pool worker"):
        StandInPool(fault="crash")


def test_a_solution_cannot_ask_the_in_process_stand_in_for_a_fault(task):
    """The policy writes the workspace: a standin.json there must not reach the evaluator in the trainer's process
    (a pool worker obeys it; here "error" would raise and "crash" would end the trainer)."""
    files = {"model_new.py": SOLUTION, "kernels/standin.json": json.dumps({"fault": "error"})}
    result = StandInPool().submit(EvalJob.create(task, files, kind="profile")).result(timeout=5)
    assert (result.correct, result.reward, result.stage) == (True, 1, "correct")


def test_an_unknown_backend_kind_is_refused_by_the_one_factory(task):
    with pytest.raises(ConfigError, match="backend kind 'gpu' is not one of local, http, ray, stand_in"):
        make_backend({"kind": "gpu"})
    with pytest.raises(ConfigError, match="backend kind 'gpu' is not one of local, http, ray, stand_in"):
        score_solution(task, SOLUTION, {"kind": "gpu"})
    with pytest.raises(ConfigError, match="backend kind stand_in: .*'seed'"):
        make_backend({"kind": "stand_in", "seed": 0})
