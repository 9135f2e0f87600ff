from cuda_agent.rl.toolparse import format_tool_call, parse_tool_calls
from cuda_agent.agent.types import ToolCall


def test_parses_content_and_several_calls_in_order():
    text = ('Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "model.py"}}\n</tool_call>\n'
            '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>')
    parsed = parse_tool_calls(text)
    assert parsed.content == "Let me look."
    assert [c.name for c in parsed.calls] == ["read", "bash"]
    assert parsed.calls[0].parsed_arguments() == {"path": "model.py"}
    assert parsed.calls[1].id == "call_1"
    assert parsed.n_malformed == 0


def test_bad_json_is_kept_as_a_malformed_call_with_its_name():
    parsed = parse_tool_calls('<tool_call>{"name": "write", "arguments": {"path": "a.cu"</tool_call>')
    assert parsed.malformed == (0,)
    assert parsed.calls[0].name == "write"
    assert '"path": "a.cu"' in str(parsed.calls[0].arguments)


def test_unclosed_block_and_missing_name_are_malformed():
    assert parse_tool_calls('<tool_call>{"name": "read", "arguments": {}}').malformed == (0,)
    parsed = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert parsed.malformed == (0,) and parsed.calls[0].name == ""


def test_no_tool_call():
    parsed = parse_tool_calls("just thinking")
    assert parsed.calls == () and parsed.content == "just thinking"


def test_format_round_trips():
    call = ToolCall("edit", {"path": "k.cu", "old_string": "a", "new_string": "b"})
    parsed = parse_tool_calls(format_tool_call(call))
    assert parsed.calls[0].name == "edit"
    assert parsed.calls[0].parsed_arguments() == call.parsed_arguments()


def test_json_fenced_calls_and_what_is_left_alone() -> None:
    from cuda_agent.agent.toolparse import parse_json_tool_calls

    two = parse_json_tool_calls('First\n```json\n{"name": "read", "arguments": {"path": "a"}}\n```\nthen\n'
                                '```\n{"name": "bash", "parameters": {"command": "ls"}}\n```')
    assert [c.name for c in two.calls] == ["read", "bash"] and two.malformed == ()
    assert two.calls[1].parsed_arguments() == {"command": "ls"} and two.content == "First\n\nthen"
    bare = parse_json_tool_calls('{"name": "submit", "arguments": {}}')
    assert [c.name for c in bare.calls] == ["submit"]
    broken = parse_json_tool_calls('```json\n{"name": "edit", "arguments": {"path": "k.cu",}}\n```')
    assert broken.malformed == (0,) and broken.calls[0].name == "edit"
    assert parse_json_tool_calls('```json\n{"shape": [1, 2]}\n```').calls == ()
    assert parse_json_tool_calls('```python\nx = {"name": 1, "arguments": 2}\n```').calls == ()


def test_json_calls_without_arguments_and_other_objects() -> None:
    from cuda_agent.agent.toolparse import parse_json_tool_calls

    # what Qwen2.5-Coder-1.5B wrote in its first agent turn here
    reply = '```json\n{\n  "name": "build"\n}\n```\n\n```json\n{\n  "name": "submit"\n}\n```'
    parsed = parse_json_tool_calls(reply)
    assert [c.name for c in parsed.calls] == ["build", "submit"] and parsed.content == ""
    assert parsed.calls[0].parsed_arguments() == {}
    assert parse_json_tool_calls('```json\n{"name": "torch", "version": "2.5"}\n```').calls == ()
    # what it wrote for L1/22_Tanh: the arguments beside the name; a call when the name is one of the tools
    flat = '```json\n{"name": "profile", "breakdown": true}\n```'
    assert parse_json_tool_calls(flat).calls == ()
    (call,) = parse_json_tool_calls(flat, tool_names=("build", "profile")).calls
    assert call.name == "profile" and call.parsed_arguments() == {"breakdown": True}
    assert parse_json_tool_calls('```json\n{"name": "torch", "version": "2.5"}\n```', ("profile",)).calls == ()


def test_several_json_calls_in_one_block() -> None:
    from cuda_agent.agent.toolparse import parse_json_tool_calls

    # what the model wrote for L1/22_Tanh: a write and a build in one fence, one object a line
    block = ('```json\n{"name": "write", "arguments": {"path": "kernels/t.cu", "content": "CA_EXPORT(t);"}}\n'
             '{"name": "build", "arguments": "{}"}\n```')
    parsed = parse_json_tool_calls(block)
    assert [c.name for c in parsed.calls] == ["write", "build"] and parsed.malformed == ()
    assert parsed.calls[0].parsed_arguments()["path"] == "kernels/t.cu" and parsed.calls[1].parsed_arguments() == {}
    assert len({c.id for c in parsed.calls}) == 2
    # a second object that is not a call is left out; a broken one makes the block one malformed call
    assert [c.name for c in parse_json_tool_calls('```json\n{"name": "build"}\n{"x": 1}\n```').calls] == ["build"]
    broken = parse_json_tool_calls('```json\n{"name": "build", "arguments": {}}\n{"name": "verify", "arguments": {]}\n```')
    assert broken.malformed == (0,) and len(broken.calls) == 1
