"""Entry point of the candidate process: confine it to one process first, then serve (``python -m ca_runner.boot``).

Nothing but the standard library is imported before the filter is in place, so no code that could fork has run.
"""
from __future__ import annotations

import sys

from .confine import confine_to_one_process


FILE_LIMIT = 8 << 30  # bytes: the largest file the candidate may write (its scratch folder and its log are the host's)


def main() -> int:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    if "--no-confine" not in sys.argv:
        confine_to_one_process()
    from .serve import main as serve_main

    return serve_main([a for a in sys.argv[1:] if a != "--no-confine"])


if __name__ == "__main__":
    sys.exit(main())
