"""The agent: an Env API (reset/step/close), tools with JSON schemas, policies (OpenAI-compatible endpoint,
scripted), the loop, trajectories, and where builds and evaluations go (`EvalBackend`)."""
from cuda_agent.agent.backend import BuildSummary, EvalBackend, LocalBackend, PoolBackend, render_result
from cuda_agent.agent.best import BestKernel
from cuda_agent.agent.config import EVAL_MAX_TURNS, TRAIN_MAX_TURNS, AgentConfig, EnvConfig
from cuda_agent.agent.env import AgentEnv, EnvState, EpisodeOverError
from cuda_agent.agent.files import ToolError
from cuda_agent.agent.loop import Agent, AgentExit, EpisodeResult, run_episode
from cuda_agent.agent.openai_policy import OpenAIConfig, OpenAIPolicy
from cuda_agent.agent.episode_outputs import render_report, write_outputs
from cuda_agent.agent.policy import Policy, ScriptedPolicy
from cuda_agent.agent.step_info import EpisodeEnd, StepInfo
from cuda_agent.agent.tools import ToolRegistry, trim
from cuda_agent.agent.trajectory import Trajectory, TrajectoryError, export_sft
from cuda_agent.agent.types import AssistantTurn, Message, ToolCall, Usage
from cuda_agent.errors import ContextOverflowError

__all__ = [
    "Agent",
    "AgentConfig",
    "AgentEnv",
    "AgentExit",
    "AssistantTurn",
    "BestKernel",
    "BuildSummary",
    "ContextOverflowError",
    "EVAL_MAX_TURNS",
    "EnvConfig",
    "EnvState",
    "EpisodeEnd",
    "EpisodeOverError",
    "EpisodeResult",
    "EvalBackend",
    "LocalBackend",
    "Message",
    "OpenAIConfig",
    "OpenAIPolicy",
    "Policy",
    "PoolBackend",
    "ScriptedPolicy",
    "StepInfo",
    "TRAIN_MAX_TURNS",
    "ToolCall",
    "ToolError",
    "ToolRegistry",
    "Trajectory",
    "TrajectoryError",
    "Usage",
    "export_sft",
    "render_report",
    "render_result",
    "run_episode",
    "trim",
    "write_outputs",
]
