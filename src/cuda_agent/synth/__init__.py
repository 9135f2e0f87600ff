"""Training-task synthesis (the CUDA-Agent-Ops-6K recipe): crawl seed operators, compose fused tasks (rule-based or
by an LLM), keep those that pass the execution filters and decontamination, write parquet.

Importing this package imports neither torch nor transformers; the functions do, when called.
"""
from cuda_agent.synth.catalog_io import load_or_crawl
from cuda_agent.synth.compose import Composed, RuleComposer, RuleComposerConfig
from cuda_agent.synth.crawl import crawl_operators
from cuda_agent.synth.decontam import SimilarityIndex, kernelbench_index, model_signature, similarity
from cuda_agent.synth.filters import REASONS, FilterConfig, FilterResult, run_filters, static_check
from cuda_agent.synth.llm import ChatClient, LLMComposer, ScriptedChatClient, OpenAIChatClient
from cuda_agent.synth.pipeline import Progress, Record, SynthConfig, SynthRun, SynthSummary, write_parquet
from cuda_agent.synth.spec import ArgSpec, Catalog, InputSpec, OperatorSpec

__all__ = [
    "REASONS", "ArgSpec", "Catalog", "ChatClient", "Composed", "FilterConfig", "FilterResult", "InputSpec",
    "LLMComposer", "OperatorSpec", "Progress", "Record", "RuleComposer", "RuleComposerConfig", "ScriptedChatClient",
    "SimilarityIndex", "SynthConfig", "SynthRun", "SynthSummary", "OpenAIChatClient", "crawl_operators", "kernelbench_index",
    "load_or_crawl", "model_signature", "run_filters", "similarity", "static_check", "write_parquet",
]
