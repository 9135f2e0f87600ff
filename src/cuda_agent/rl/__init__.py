"""The RL recipe: verl agent loop and reward, TRL adapter, stage configs, RFT filter, critic targets.

Importing this package imports neither verl nor TRL nor transformers; `cuda_agent.rl.verl_agent_loop` imports verl
and is loaded by verl itself, `small` and `trl_adapter` import TRL inside their functions.
"""
from cuda_agent.rl.chat import ByteTokenizer, ChatFormat
from cuda_agent.rl.config import (PAPER, STAGES, CollectConfig, CriticConfig, PaperDefaults, PpoConfig, RftConfig,
                                  StageConfig, WarmupConfig, load_stage_config)
from cuda_agent.rl.critic import gae_targets, outcome_rewards, value_loss
from cuda_agent.rl.filters import FilterConfig, judge, select
from cuda_agent.rl.rollout import RolloutLimits, TokenEpisode, run_token_episode, tokenize_conversation
from cuda_agent.rl.scripted import ScriptedGenerationServer
from cuda_agent.rl.stages import StageResult, run_stage
from cuda_agent.rl.toolparse import ParsedTurn, format_tool_call, parse_tool_calls

__all__ = [
    "ByteTokenizer", "ChatFormat", "CollectConfig", "CriticConfig", "FilterConfig", "PAPER", "PaperDefaults", "ParsedTurn", "PpoConfig", "RftConfig",
    "RolloutLimits", "STAGES",
    "ScriptedGenerationServer", "StageConfig", "StageResult", "TokenEpisode", "format_tool_call", "gae_targets",
    "judge", "load_stage_config", "outcome_rewards", "parse_tool_calls", "run_stage", "run_token_episode", "select",
    "tokenize_conversation", "value_loss", "WarmupConfig",
]
