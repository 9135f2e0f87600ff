"""Hermes/Qwen tool-call parsing for token-level RL: the parser lives in `cuda_agent.agent.toolparse` (the
OpenAI-compatible policy uses it too, for servers that return tool calls as text); this module keeps the RL names."""
from cuda_agent.agent.toolparse import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ParsedTurn, format_tool_call, parse_tool_calls

__all__ = ["TOOL_CALL_CLOSE", "TOOL_CALL_OPEN", "ParsedTurn", "format_tool_call", "parse_tool_calls"]
