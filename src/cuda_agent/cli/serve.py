"""`cuda-agent serve`: the evaluation pool behind an HTTP API (docs/http_api.md), for rollout workers elsewhere."""
from __future__ import annotations

import signal
import threading
from typing import Any, Optional

import typer
from rich.console import Console

from cuda_agent.errors import CudaAgentError

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _make_pool(backend: str, gpus: Optional[str], standin: Optional[float], store: Any, ray_address: Optional[str],
               build_workers: Optional[int], build_cache: Optional[str]) -> Any:
    from cuda_agent.pool import BuildPool, RealEvaluator, StandInEvaluator

    evaluator = StandInEvaluator(seconds=standin) if standin is not None else RealEvaluator()
    builds = BuildPool(build_workers, cache_dir=build_cache)
    gpu_list = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else None
    if backend == "local":
        from cuda_agent.pool import LocalPool

        return LocalPool(gpu_list, evaluator=evaluator, store=store, builds=builds)
    if backend == "ray":
        from cuda_agent.pool.ray_pool import RayPool

        return RayPool(address=ray_address, num_gpus=len(gpu_list) if gpu_list else None, evaluator=evaluator,
                       store=store, build_cache_dir=build_cache)
    raise typer.BadParameter(f"--backend must be local or ray, got {backend!r}")


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 for every interface)."),
        port: int = typer.Option(8000, help="Port (0 picks a free one)."),
        backend: str = typer.Option("local", help="local (this machine's GPUs) or ray (a Ray cluster)."),
        store: str = typer.Option("default", help="Store URL (sqlite:///path.db, postgresql://...), 'default' for "
                                                  "~/.cache/cuda-agent/store.db, or 'none' for no cache."),
        gpus: Optional[str] = typer.Option(None, help="Comma-separated GPU ids (local: default all; ray: count)."),
        standin: Optional[float] = typer.Option(None, help="Run the stand-in evaluator (sleeps this many seconds per "
                                                           "job) instead of real evaluations: for tests and planning."),
        token: Optional[str] = typer.Option(None, envvar="CUDA_AGENT_SERVE_TOKEN",
                                            help="Require 'Authorization: Bearer TOKEN' on every request."),
        ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (ray backend; default: start one "
                                                             "locally or join RAY_ADDRESS)."),
        build_workers: Optional[int] = typer.Option(None, help="Concurrent builds (default: CPU count / 2)."),
        build_cache: Optional[str] = typer.Option(None, help="Shared compile cache folder."),
    ) -> None:
        """Serve evaluations over HTTP: POST /v1/evaluations, GET /v1/evaluations/{id}, GET /v1/health."""
        from cuda_agent.pool.http import make_server
        from cuda_agent.store import Store, default_store_url

        console = Console()
        if host not in _LOOPBACK and not token:
            console.print("[yellow]warning:[/yellow] listening beyond this machine without --token: anyone who "
                          "can reach the port can run code on these GPUs")
        opened = None
        try:
            if store != "none":
                opened = Store.open(default_store_url() if store == "default" else store)
            pool = _make_pool(backend, gpus, standin, opened, ray_address, build_workers, build_cache)
            server = make_server(pool, host, port, token=token)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
        where = opened.url.redacted() if opened else "no store"
        console.print(f"listening on {server.url} (backend {backend}, {where})", highlight=False, soft_wrap=True)

        def stop(*_: Any) -> None:
            threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            server.serve_forever(poll_interval=0.2)
        finally:
            server.server_close()
            console.print("stopping: finishing queued evaluations")
            server.service.close()
            if opened is not None:
                opened.close()
