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
