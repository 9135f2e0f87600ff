import sys, time, json
from pathlib import Path
sys.path.insert(0, "tests/evaluator")
from evalcases import Case
from test_eval_gpu_cases import materialise
from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate
import tempfile
with tempfile.TemporaryDirectory() as tmp, WarmWorker() as w:
    for name, spec in [("L1_36_RMSNorm_", "L1/36_RMSNorm_"), ("L1_19_ReLU", "L1/19_ReLU")]:
        case = Case(name, Path("benchmarks/solutions") / name, spec, "strict", "correct")
        root = materialise(case, Path(tmp))
        for trip in range(2):
            t0 = time.perf_counter()
            r = evaluate(case.load_task(), root, EvalConfig(mode="strict", timeout_s=200), worker=w)
            print(name, trip, f"{time.perf_counter()-t0:.2f}s", r.stage, r.reason[:300], r.checks_run[-4:], r.notes,
                  json.dumps({k: round(v, 3) for k, v in (r.extra.get("phase_seconds") or {}).items()}), flush=True)
