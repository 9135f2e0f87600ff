"""Several processes writing one SQLite store at once: every write lands, none fails on the lock."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_agent.store import Store

_WRITER = """
import sys
from cuda_agent.store import Store
url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Store.open(url) as store:
    for i in range(count):
        store.put(f"{name}-{i}", {"writer": name, "i": i}, job_id=f"{name}-{i}")
        store.put_trajectory(f"{name}-ep", {"last": i})
"""


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    Store.open(url).close()
    env_path = str(Path(__file__).resolve().parents[2] / "src")
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, url, f"w{n}", "40"], env={"PYTHONPATH": env_path},
                         stderr=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with Store.open(url) as store:
        assert store.count() == 160
        for n in range(4):
            assert store.get_record(f"w{n}-39").result == {"writer": f"w{n}", "i": 39}
            assert store.get_trajectory(f"w{n}-ep") == {"last": 39}
