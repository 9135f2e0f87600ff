"""Every evaluator case, honest and adversarial, as one list (imported by the benchmark and the tests; not a test
module).

Layouts (the first line of a case is its header, ``key: value`` pairs: task, mode, expect, and optionally style and
native): tests/evaluator/cases/honest/<name>/ (CASE + a workspace or solution.py), cases/adversarial/cpu/*.py,
cases/adversarial/gpu/<name>/ (CASE + a workspace or solution.py), cases/styles/<name>/ (CASE + solution.py: the
parameter styles of degenerate tasks), and the older cases/cpu/*.py and cases/gpu/<name>/.
A case is honest when it expects ``correct``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evalcases import materialise_folder, resolve_task

CASES = Path(__file__).parent / "cases"
_PAIR = re.compile(r"(\w+): (\S+)")
FAILURE_STAGES = ("crashed", "timeout", "out_of_memory", "runtime_error", "build_failed")
TIMING_RULES = ("below_speed_of_light",)


@dataclass(frozen=True)
class Entry:
    label: str
    path: Path            # a .py single file, or a folder (workspace files, or solution.py)
    task: str
    mode: str
    expect: str
    gpu: bool
    native: bool
    styles: tuple[str, ...] = ()

    @property
    def honest(self) -> bool:
        return self.expect == "correct"

    @property
    def single_file(self) -> bool:
        return self.path.suffix == ".py" or (self.path / "solution.py").is_file()

    @property
    def needs_timing(self) -> bool:
        return self.expect in TIMING_RULES or "timing" in self.styles or "precision" in self.styles

    def load_task(self):
        return resolve_task(self.task)

    def materialise(self, root: Path) -> Path:
        """What the evaluator takes: the single file, or a real workspace for the task with the case's files."""
        if self.path.suffix == ".py":
            return self.path
        if (self.path / "solution.py").is_file():
            return self.path / "solution.py"
        folder = root / self.label.replace("/", "__")
        n = 0
        while (folder.parent / f"{folder.name}_{n}").exists():
            n += 1
        return materialise_folder(self.load_task(), self.path, folder.parent / f"{folder.name}_{n}")


def header(text: str) -> dict[str, str]:
    return dict(_PAIR.findall(text.splitlines()[0])) if text.strip() else {}


def _entry(label: str, path: Path, head: dict[str, str], gpu: bool) -> Entry | None:
    if not {"task", "mode", "expect"} <= set(head):
        return None
    native = head.get("native", "no") == "yes" or any(path.rglob("*.cu")) or any(path.rglob("*.cpp")) \
        if path.is_dir() else head.get("native", "no") == "yes"
    styles = tuple(s for s in head.get("style", head.get("route", "")).split(",") if s)
    return Entry(label, path, head["task"], head["mode"], head["expect"], gpu, native, styles)


def _folders(root: Path, prefix: str, gpu: bool) -> list[Entry]:
    out = []
    if root.is_dir():
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / "CASE").is_file()):
            entry = _entry(f"{prefix}/{folder.name}", folder, header((folder / "CASE").read_text()), gpu)
            if entry is not None:
                out.append(entry)
    return out


def _files(root: Path, prefix: str) -> list[Entry]:
    out = []
    if root.is_dir():
        for path in sorted(root.glob("*.py")):
            entry = _entry(f"{prefix}/{path.stem}", path, header(path.read_text()), False)
            if entry is not None:
                out.append(entry)
    return out


def _adversarial() -> list[Entry]:
    """The adversarial corpus as `adversarial_corpus` reads it (its header has a route line and holes; some CPU
    cases are workspace folders)."""
    from adversarial_corpus import adversarial_cases

    return [Entry(f"adversarial/{c.device}/{c.name}", c.path, c.task, c.mode, c.expect, c.device == "gpu", c.native,
                  (c.route,)) for c in adversarial_cases()]


def all_entries() -> list[Entry]:
    return [*_folders(CASES / "honest", "honest", True), *_folders(CASES / "gpu", "gpu", True),
            *_folders(CASES / "styles", "styles", True), *_files(CASES / "cpu", "cpu"), *_adversarial()]


def honest_entries() -> list[Entry]:
    return [e for e in all_entries() if e.honest]


def adversarial_entries() -> list[Entry]:
    """The cheats: every case under cases/adversarial, and the older cases that expect a rule (the older ones that
    expect a failure stage, such as a hang or a crash, test isolation, not cheating)."""
    return [e for e in all_entries() if not e.honest and
            (e.label.startswith("adversarial/") or e.expect not in FAILURE_STAGES)]
