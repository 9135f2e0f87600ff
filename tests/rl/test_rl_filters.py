import json

from cuda_agent.rl.filters import FilterConfig, find_loop, judge, load_summary, select, summarize_records


def turn(calls, outputs):
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                  for i, (n, a) in enumerate(calls)]
    return {"type": "turn", "messages": [{"role": "assistant", "content": "", "tool_calls": tool_calls}],
            "results": [{"tool_call_id": f"c{i}", "observation": o, "info": {"ok": not o.startswith("error")}}
                        for i, o in enumerate(outputs)]}


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


HEADER = {"type": "header", "task": {"id": "t"}, "messages": []}


def test_keeps_a_clean_rewarded_episode_and_drops_the_rest(tmp_path):
    good = write(tmp_path / "good.jsonl", [HEADER, turn([("read", {"path": "model.py"})], ["..."]),
                                             turn([("write", {"path": "k.cu", "content": "x"})], ["ok"]),
                                             turn([("submit", {})], ["submitted"]), {"type": "end", "reward": 2}])
    bad_reward = write(tmp_path / "neg.jsonl", [HEADER, turn([("submit", {})], ["submitted"]), {"type": "end", "reward": -1}])
    zero = write(tmp_path / "zero.jsonl", [HEADER, turn([("submit", {})], ["submitted"]), {"type": "end", "reward": 0}])
    loop = write(tmp_path / "loop.jsonl", [HEADER] + [turn([("read", {"path": "model.py"})], ["same"])] * 3
                 + [{"type": "end", "reward": 3}])
    malformed = write(tmp_path / "bad.jsonl", [HEADER, turn([("write", {"path": "k.cu"})],
                      ["error: write: missing required argument(s) content"]), {"type": "end", "reward": 1}])
    unfinished = write(tmp_path / "open.jsonl", [HEADER, turn([("read", {"path": "model.py"})], ["..."])])
    kept, reasons = select(sorted(tmp_path.glob("*.jsonl")))
    assert kept == [good]
    assert reasons["kept"] == 1 and sum(reasons.values()) == 6
    assert judge(load_summary(loop)).reason.startswith("redundant loop")
    assert "malformed" in judge(load_summary(malformed)).reason
    assert judge(load_summary(unfinished)).reason.startswith("unfinished")
    assert not judge(load_summary(zero)).keep and not judge(load_summary(bad_reward)).keep


def test_loops_consecutive_and_scattered_identical_pairs():
    a, b = ("read", '{"path": "x"}'), ("bash", '{"command": "ls"}')
    assert find_loop([a, a, a], ["1", "2", "3"], 3) is not None  # same call three times in a row
    assert find_loop([a, b, a, b, a], ["o", "p", "o", "p", "o"], 3) is not None  # same call and output, scattered
    assert find_loop([a, b, a, b, a], ["1", "p", "2", "q", "3"], 3) is None  # same call, new outputs: progress
    assert find_loop([a, a], ["o", "o"], 3) is None


def test_argument_order_does_not_hide_a_loop():
    records = [HEADER] + [turn([("edit", {"path": "k", "old_string": "a", "new_string": "b"})], ["e"]),
                          turn([("edit", {"new_string": "b", "old_string": "a", "path": "k"})], ["e"]),
                          turn([("edit", {"path": "k", "new_string": "b", "old_string": "a"})], ["e"])]
    summary = summarize_records(records + [{"type": "end", "reward": 1}])
    assert not judge(summary, FilterConfig(max_repeats=3)).keep


def test_malformed_counter_from_the_rl_loop_counts():
    records = [HEADER, dict(turn([("read", {"path": "m"})], ["fine"]), malformed_calls=1), {"type": "end", "reward": 1}]
    assert summarize_records(records).malformed == 1
