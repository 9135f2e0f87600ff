"""Turn compiler output into what an agent can act on: the first error first, with file and line, trimmed."""
from __future__ import annotations

import re
from dataclasses import dataclass

# nvcc front end: "kernels/a.cu(12): error: identifier "x" is undefined"
_NVCC = re.compile(r"^(?P<file>[^\s:()][^():]*)\((?P<line>\d+)\): (?P<sev>error|catastrophic error|warning)[^:]*: (?P<msg>.*)$")
# gcc / clang: "kernels/a.cpp:12:5: error: expected ';'"
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning): (?P<msg>.*)$")
_OTHER_ERROR = re.compile(r"(ptxas (fatal|error)|nvlink error|undefined reference to|collect2: error|ld: |error:)", re.I)


@dataclass(frozen=True)
class Diagnostic:
    file: str
    line: int
    severity: str
    message: str
    context: tuple[str, ...] = ()

    def render(self) -> str:
        head = f"{self.file}:{self.line}: {self.severity}: {self.message}"
        return "\n".join([head, *self.context])


def parse(output: str) -> list[Diagnostic]:
    """Errors in the order the compiler printed them, each with the source/caret lines that follow it."""
    found: list[Diagnostic] = []
    lines = output.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        match = _NVCC.match(line) or _GCC.match(line)
        if match and "error" in match.group("sev"):
            context: list[str] = []
            j = i + 1
            while j < len(lines) and len(context) < 4 and not (_NVCC.match(lines[j]) or _GCC.match(lines[j])):
                if lines[j].strip() and not lines[j].startswith(("In file included", "Error limit", "compilation terminated")):
                    if re.search(r"errors? detected in the compilation", lines[j]):
                        break
                    context.append(lines[j].rstrip())
                j += 1
            found.append(Diagnostic(match.group("file"), int(match.group("line")), "error", match.group("msg").strip(),
                                    tuple(context)))
            i = j
            continue
        if _OTHER_ERROR.search(line) and not _NVCC.match(line) and not _GCC.match(line):
            if "errors detected in the compilation" not in line:
                found.append(Diagnostic("<link>" if "undefined reference" in line or "ld" in line else "<ptxas>",
                                        0, "error", line.strip()))
        i += 1
    return found


def summarize(output: str, limit_chars: int = 2500) -> str:
    """The readable form: the first error with its context, then the next few, then a count of the rest."""
    diagnostics = parse(output)
    if not diagnostics:
        tail = output.strip()
        return tail[-limit_chars:] if tail else "build failed with no compiler output"
    parts: list[str] = []
    used = 0
    shown = 0
    for diag in diagnostics:
        text = diag.render()
        if parts and used + len(text) > limit_chars:
            break
        parts.append(text)
        used += len(text) + 1
        shown += 1
    rest = len(diagnostics) - shown
    if rest:
        parts.append(f"... and {rest} more error(s); fix the first one first")
    return "\n".join(parts)


def summarize_link(output: str, object_names: dict[str, str], limit_chars: int = 2500) -> str:
    """Linker errors with cached object paths replaced by the source files they came from."""
    for path, label in object_names.items():
        output = output.replace(path, label)
    keep = []
    for line in output.splitlines():
        line = re.sub(r"^(/usr/bin/)?ld(\.\w+)?: ", "", line.strip())
        line = re.sub(r"\(\.text[^)]*\)", "", line)
        if re.search(r"multiple definition|undefined reference|first defined here|cannot find|error", line):
            keep.append(line)
    text = "\n".join(keep) or output.strip() or "link failed with no linker output"
    return "link failed:\n" + text[:limit_chars]
