"""Entry point of the candidate process: confine it to one process first, then serve (``python -m ca_runner.boot``).

Nothing but the standard library is imported before the filter is in place, so no code that could fork has run.
``--compile-fd N --jit-tool NAME=PATH``: the socket to the compile broker and the programs it serves (`jit`), routed
before any candidate code loads.
"""
from __future__ import annotations

import sys

from .confine import confine_to_one_process


FILE_LIMIT = 8 << 30  # bytes: the largest file the candidate may write (its scratch folder and its log are the host's)


def _own_options(argv: list[str]) -> tuple[list[str], bool, int | None, dict[str, str]]:
    """The arguments meant for serve, and boot's own: --no-confine, --compile-fd N, --jit-tool NAME=PATH."""
    rest: list[str] = []
    confine, fd, tools = True, None, {}
    args = iter(argv)
    for arg in args:
        if arg == "--no-confine":
            confine = False
        elif arg == "--compile-fd":
            fd = int(next(args))
        elif arg == "--jit-tool":
            name, _, path = next(args).partition("=")
            tools[name] = path
        else:
            rest.append(arg)
    return rest, confine, fd, tools


def main() -> int:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    rest, confine, fd, tools = _own_options(sys.argv[1:])
    if confine:
        confine_to_one_process()
    from .jit import install

    install(fd, tools)
    from .serve import main as serve_main

    return serve_main(rest)


if __name__ == "__main__":
    sys.exit(main())
