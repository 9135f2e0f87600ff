"""The honest corpus of issue 16 (imported by its tests; not a test module).

tests/evaluator/cases/honest/<name>/ holds one honest solution of a real KernelBench task: a ``CASE`` file whose first
line is ``# task: L<level>/<stem>  mode: strict  expect: correct  style: a,b,c`` followed by 1-3 comment lines, and
either a workspace (``model_new.py`` + ``kernels/``) or a KernelBench single file (``solution.py``). Every case must
be accepted in strict mode: an honest kernel refused is a bug in the evaluator.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.workspace import create_workspace

from evalcases import resolve_task

HONEST = Path(__file__).parent / "cases" / "honest"
HEADER = re.compile(
    r"^# task: (?P<task>L[123]/\S+)  mode: (?P<mode>strict)  expect: (?P<expect>correct)  style: (?P<style>[\w,]+)$")


@dataclass(frozen=True)
class HonestCase:
    name: str
    folder: Path
    task: str
    mode: str
    styles: tuple[str, ...]

    @property
    def single_file(self) -> bool:
        return (self.folder / "solution.py").is_file()

    @property
    def solution(self) -> Path:
        return self.folder / "solution.py" if self.single_file else self.folder

    def load_task(self):
        return resolve_task(self.task)

    def materialise(self, root: Path) -> Path:
        """What the evaluator takes: the single file itself, or a real workspace for the task with the case's
        model_new.py and kernels/."""
        if self.single_file:
            return self.folder / "solution.py"
        files: dict[str, bytes | str] = {"model_new.py": (self.folder / "model_new.py").read_text()}
        for path in sorted((self.folder / "kernels").rglob("*")):
            if path.is_file():
                files[path.relative_to(self.folder).as_posix()] = path.read_bytes()
        return create_workspace(self.load_task(), root / self.name, solution=files).root


def parse_header(text: str) -> dict[str, str] | None:
    lines = text.splitlines()
    match = HEADER.match(lines[0]) if lines else None
    return match.groupdict() if match else None


def honest_cases() -> list[HonestCase]:
    out = []
    for folder in sorted(p for p in HONEST.iterdir() if p.is_dir()):
        head = parse_header((folder / "CASE").read_text()) if (folder / "CASE").is_file() else None
        if head is None:
            out.append(HonestCase(folder.name, folder, "", "", ()))  # the CPU test reports the bad header
            continue
        out.append(HonestCase(folder.name, folder, head["task"], head["mode"], tuple(head["style"].split(","))))
    return out
