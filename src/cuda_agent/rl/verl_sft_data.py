"""verl's multi-turn SFT dataset with the tool schemas as they were: the RFT stage's ``data.custom_cls``.

An RFT row's ``tools`` is a list of JSON-schema dicts, which is what verl's `MultiTurnSFTDataset` hands to
``apply_chat_template(tools=...)``. Parquet cannot carry that list as it is: the tools' parameter objects differ, so
the column's type is the union of every tool's properties, and each schema comes back with the other tools'
properties set to null (``read`` would offer ``command: null``, ``content: null``, ...) and integers widened to
floats. The rows therefore also carry ``tools_json`` (the same list as JSON text), and this dataset reads the
schemas from it, so the model trains on the tool list the rollouts showed it.

This module imports verl at import time; verl loads it by file path (``data.custom_cls.path``).
"""
from __future__ import annotations

import json
from typing import Any

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

TOOLS_JSON = "tools_json"


class ExactToolsSFTDataset(MultiTurnSFTDataset):
    """`MultiTurnSFTDataset` whose tools come from the ``tools_json`` column when the file has one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if TOOLS_JSON in self.dataframe.columns:
            self.tools = [json.loads(text) if text else None for text in self.dataframe[TOOLS_JSON].tolist()]
