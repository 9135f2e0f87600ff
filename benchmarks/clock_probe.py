"""Where a request's time goes (GPU host): honest cases evaluated with the kernel tap on and off, printing the
judge's clock fields (request and null spans, the candidate process's own host bracket and event times)."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "evaluator"))

from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate  # noqa: E402

from corpus import honest_entries  # noqa: E402


def main() -> int:
    names = sys.argv[1:]
    entries = [e for e in honest_entries() if e.label.split("/")[-1] in names]
    with tempfile.TemporaryDirectory() as tmp, WarmWorker() as worker:
        for entry in entries:
            for audit in (True,):
                r = evaluate(entry.load_task(), entry.materialise(Path(tmp)),
                             EvalConfig(mode=entry.mode, runtime_audit=audit), worker=worker)
                print(entry.label, "tap" if audit else "no tap", r.stage, r.reward,
                      r.candidate.median_ms if r.candidate else None, json.dumps(r.extra.get("judge_clock")),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
