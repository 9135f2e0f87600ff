"""Agent runs over a task set: many episodes at once (a thread pool) sharing one evaluation pool, resumable after a
kill, the best kernel of each task kept with its trajectory.

Layout of a run folder::

    results.json                 the task list and one outcome per finished task (rewritten atomically)
    kernels/<task key>/          the best kernel of the task (model_new.py, kernels/...)
    trajectories/<task key>.json the episode's trajectory (saved by the agent after every step)

A task counts as finished once its outcome is in ``results.json``; running the same folder again skips finished
tasks and resumes unfinished episodes from their trajectories.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from cuda_agent.bench.offline import task_key
from cuda_agent.bench.outcome import TaskOutcome, failed
from cuda_agent.bench.results import BenchResults, load_results, save_results
from cuda_agent.errors import ConfigError, CudaAgentError
from cuda_agent.tasks import Task, TaskSet

if TYPE_CHECKING:
    from cuda_agent.agent import AgentConfig, EnvConfig, EpisodeResult, Policy
    from cuda_agent.evaluator.config import EvalConfig
    from cuda_agent.pool.base import Pool

log = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
Progress = Callable[[int, int, TaskOutcome], None]


@dataclass(frozen=True)
class RunConfig:
    """How a benchmark run is carried out."""

    concurrency: int = 4
    """Episodes in flight at once (they share the evaluation pool, which runs one job per GPU at a time)."""
    name: str = "agent"
    """What is benchmarked (shown in reports)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")


Episode = Callable[[Task, Path, bool], "EpisodeResult"]


def outcome_from_episode(task: Task, episode: "EpisodeResult", run_dir: Path) -> TaskOutcome:
    """The outcome of an episode: its best kernel's verdict (`TaskOutcome.from_result`; the files written under
    ``kernels/``) or a failure naming why."""
    key = task_key(task.id)
    trajectory = f"trajectories/{key}.json"
    best = episode.best
    if best is None:
        reason = f"no correct kernel ({episode.reason}: {episode.message})"
        return failed(task.id, task.level, reason[:500], "no_correct_kernel", trajectory=trajectory)
    best.write(run_dir / "kernels" / key)
    return TaskOutcome.from_result(best.result, task.level, task_id=task.id, solution=f"kernels/{key}",
                                   trajectory=trajectory, extra={"turns": episode.turns, "best_turn": best.turn})


class BenchRun:
    """A resumable benchmark run in ``run_dir``.

    Args:
        tasks: the task set (all of it is the denominator of the metrics).
        run_dir: the run folder (created; an existing run there is resumed).
        episode: runs one episode: ``episode(task, trajectory_path, resume) -> EpisodeResult``. `agent_episode`
            makes one from a policy factory and a pool.
        config: concurrency and name.
    """

    def __init__(self, tasks: TaskSet, run_dir: str | Path, episode: Episode,
                 config: RunConfig | None = None) -> None:
        self.tasks = tasks
        self.run_dir = Path(run_dir)
        self.episode = episode
        self.config = config or RunConfig()
        self._lock = threading.Lock()
        self._outcomes: dict[str, TaskOutcome] = {}
        path = self.run_dir / RESULTS_FILE
        if path.exists():
            previous = load_results(path)
            known = {t.id for t in tasks}
            self._outcomes = {o.task_id: o for o in previous.outcomes if o.task_id in known}

    @property
    def finished(self) -> set[str]:
        return set(self._outcomes)

    def results(self) -> BenchResults:
        with self._lock:
            return BenchResults.build(self.config.name, {t.id: t.level for t in self.tasks}, self._outcomes.values(),
                                      {"mode": "agent", "run_dir": str(self.run_dir)})

    def _record(self, outcome: TaskOutcome) -> None:
        with self._lock:
            self._outcomes[outcome.task_id] = outcome
            results = BenchResults.build(self.config.name, {t.id: t.level for t in self.tasks},
                                         self._outcomes.values(), {"mode": "agent", "run_dir": str(self.run_dir)})
            save_results(results, self.run_dir / RESULTS_FILE)

    def _one(self, task: Task) -> TaskOutcome:
        trajectory = self.run_dir / "trajectories" / f"{task_key(task.id)}.json"
        trajectory.parent.mkdir(parents=True, exist_ok=True)
        try:
            episode = self.episode(task, trajectory, trajectory.exists())
            outcome = outcome_from_episode(task, episode, self.run_dir)
        except CudaAgentError as exc:
            log.warning("task %s: episode failed: %s", task.id, exc)
            outcome = failed(task.id, task.level, f"episode failed: {exc}")
        self._record(outcome)
        return outcome

    def run(self, progress: Progress | None = None) -> BenchResults:
        """Run every unfinished task, ``config.concurrency`` episodes at a time; each outcome is saved as it arrives.

        An unexpected error in one episode is recorded as that task's failure (the run goes on); a kill loses only
        the episodes in flight, which resume from their trajectories next time.
        """
        self.run_dir.mkdir(parents=True, exist_ok=True)
        todo = [t for t in self.tasks if t.id not in self._outcomes]
        total, done = len(self.tasks), len(self.tasks) - len(todo)
        log.info("bench run %s: %d of %d tasks finished, %d to run", self.run_dir, done, total, len(todo))
        with ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="bench-episode") as ex:
            futures = {ex.submit(self._one, task): task for task in todo}
            for future in as_completed(futures):
                task = futures[future]
                try:
                    outcome = future.result()
                except Exception as exc:  # a bug in one episode must not end the other 249
                    log.exception("task %s: unexpected error", task.id)
                    outcome = failed(task.id, task.level, f"unexpected error: {type(exc).__name__}: {exc}")
                    self._record(outcome)
                done += 1
                if progress is not None:
                    progress(done, total, outcome)
        return self.results()


def agent_episode(policy_factory: Callable[[Task], "Policy"], *, pool: "Pool | None" = None,
                  env_config: "EnvConfig | None" = None, agent_config: "AgentConfig | None" = None,
                  eval_config: "EvalConfig | None" = None) -> Episode:
    """An ``episode`` callable for `BenchRun`: a fresh policy and `AgentEnv` per task; builds and evaluations go to
    ``pool`` (shared by all episodes) when given, else to the local backend."""
    from cuda_agent.agent import AgentEnv, PoolBackend, run_episode

    def episode(task: Task, trajectory: Path, resume: bool) -> "EpisodeResult":
        backend = PoolBackend(pool, eval_config=eval_config) if pool is not None else None
        env = AgentEnv(env_config, backend) if backend is not None or env_config is not None else None
        return run_episode(task, policy_factory(task), env, config=agent_config, trajectory=trajectory, resume=resume)

    return episode
