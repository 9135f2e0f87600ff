"""Load a saved operator catalog, or crawl one and save it (a crawl takes about a minute on a small CPU)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from cuda_agent.synth.spec import Catalog

log = logging.getLogger(__name__)


def load_or_crawl(
    path: str | Path | None,
    *,
    include_transformers: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Catalog:
    """The catalog at ``path`` if it exists and was made with this torch version; else crawl and save it there.

    Raises `ConfigError` if an existing file is not a catalog.
    """
    import torch

    from cuda_agent.synth.crawl import crawl_operators

    if path is not None and Path(path).exists():
        catalog = Catalog.load(path)
        if catalog.torch_version == str(torch.__version__):
            return catalog
        log.info("%s was crawled with torch %s, not %s: crawling again", path, catalog.torch_version, torch.__version__)
    catalog = crawl_operators(include_transformers=include_transformers, progress=progress)
    if path is not None:
        catalog.save(path)
    return catalog
