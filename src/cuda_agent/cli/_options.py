"""Flags that several commands take, declared once so that they read the same in every command's help."""
from __future__ import annotations

import typer

MODEL = typer.Option(None, help="Model name (env CUDA_AGENT_MODEL).")
API_KEY = typer.Option(None, help="API key (env OPENAI_API_KEY).")
# `bench run` and `bench single-turn`; `optimize` shows an example address in its own help.
BASE_URL = typer.Option(None, help="Endpoint root (env OPENAI_BASE_URL).")
LIMIT = typer.Option(None, help="Only the first N selected tasks.")
