"""`cuda-agent serve`: the evaluation pool behind an HTTP API (docs/http_api.md), for rollout workers elsewhere."""
from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from cuda_agent.cli._checks import finite
from cuda_agent.errors import CudaAgentError

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
STANDIN_DEFAULT_WORKERS = 2
INSECURE_FLAG = "--insecure-no-token"
DRAIN_GRACE_S = 1.0


def _gpu_labels(gpus: Optional[str], standin: Optional[float], backend: str, console: Console) -> list[str] | None:
    """The GPUs to serve: --gpus, else those found (stand-in workers where none is found, with --standin). A
    local backend with no GPU found and no --standin exits 2 naming the flags that help."""
    if gpus:
        labels = [g.strip() for g in gpus.split(",") if g.strip()]
        if not labels:
            raise typer.BadParameter("name at least one GPU id, e.g. 0,1", param_hint="--gpus")
        return labels
    if standin is None and backend != "local":
        return None
    from cuda_agent.pool import detect_gpus

    found = detect_gpus()
    if standin is not None:
        return found or [str(i) for i in range(STANDIN_DEFAULT_WORKERS)]
    if not found:
        console.print("[red]error:[/red] no GPU found here (nvidia-smi lists none and CUDA_VISIBLE_DEVICES is "
                      "empty); pass --gpus IDS (e.g. --gpus 0,1) to name them, or --standin SECONDS to serve the "
                      "stand-in evaluator on this CPU", soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    return found


def _make_pool(backend: str, gpu_list: list[str] | None, standin: Optional[float], store: Any,
               ray_address: Optional[str], build_workers: Optional[int], build_cache: Optional[str]) -> Any:
    from cuda_agent.pool import BuildPool, RealEvaluator, StandInEvaluator

    evaluator = StandInEvaluator(seconds=standin) if standin is not None else RealEvaluator()
    builds = BuildPool(build_workers, cache_dir=build_cache)
    if backend == "local":
        from cuda_agent.pool import LocalPool

        return LocalPool(gpu_list, evaluator=evaluator, store=store, builds=builds)
    if backend == "ray":
        from cuda_agent.pool.ray_pool import RayPool

        return RayPool(address=ray_address, num_gpus=len(gpu_list) if gpu_list else None, evaluator=evaluator,
                       store=store, build_cache_dir=build_cache)
    raise typer.BadParameter(f"must be local or ray, got {backend!r}", param_hint="--backend")


def _token(token: Optional[str], insecure: bool, host: str, token_file: Optional[Path], console: Console) -> str | None:
    """The bearer token the server requires: the given one, or a fresh one printed (and written to
    ``token_file``); None only with the insecure flag, which is refused off loopback."""
    if insecure:
        if token:
            raise typer.BadParameter("give either --token or the insecure flag, not both", param_hint=INSECURE_FLAG)
        if host not in _LOOPBACK:
            raise typer.BadParameter(f"serving without a token is allowed on loopback only, not {host}",
                                     param_hint=INSECURE_FLAG)
        console.print(f"[bold red]INSECURE:[/bold red] {INSECURE_FLAG}: no token is required; every local user "
                      "and every process on this machine can submit code that runs on these GPUs")
        return None
    if token is not None and not token.strip():
        raise typer.BadParameter("must not be empty", param_hint="--token")
    chosen = token or secrets.token_urlsafe(32)
    if token_file is not None:
        token_file.parent.mkdir(parents=True, exist_ok=True)
        token_file.touch(mode=0o600)
        token_file.chmod(0o600)
        token_file.write_text(chosen + "\n")
    if not token:
        console.print(f"token: {chosen}", highlight=False, soft_wrap=True)
        console.print("clients send 'Authorization: Bearer <token>' (PoolClient(url, token=...) or "
                      "CUDA_AGENT_SERVE_TOKEN)", highlight=False, soft_wrap=True)
    return chosen


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_command(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 for every interface)."),
        port: int = typer.Option(8000, min=0, max=65535, help="Port (0 picks a free one)."),
        backend: str = typer.Option("local", help="local (this machine's GPUs) or ray (a Ray cluster)."),
        store: str = typer.Option("default", help="Store URL (sqlite:///path.db, postgresql://...), 'default' for "
                                                  "~/.cache/cuda-agent/store.db, or 'none' for no cache."),
        gpus: Optional[str] = typer.Option(None, help="Comma-separated GPU ids (local: default all; ray: count; "
                                                      "with --standin: default the GPUs found, else 2 stand-in "
                                                      "workers)."),
        standin: Optional[float] = typer.Option(None, help="Run the stand-in evaluator (sleeps this many seconds per "
                                                           "job) instead of real evaluations: for tests and planning."),
        token: Optional[str] = typer.Option(None, envvar="CUDA_AGENT_SERVE_TOKEN",
                                            help="The bearer token clients must send (default: a fresh one, "
                                                 "printed at start)."),
        token_file: Optional[Path] = typer.Option(None, help="Also write the token to this file (mode 0600)."),
        insecure_no_token: bool = typer.Option(False, INSECURE_FLAG,
                                               help="Serve WITHOUT authentication (loopback only): any local user "
                                                    "can then run code on these GPUs."),
        ray_address: Optional[str] = typer.Option(None, help="Ray cluster address (ray backend; default: start one "
                                                             "locally or join RAY_ADDRESS)."),
        build_workers: Optional[int] = typer.Option(None, min=1, max=1024,
                                                    help="Concurrent builds (default: CPU count / 2)."),
        build_cache: Optional[str] = typer.Option(None, help="Shared compile cache folder."),
        max_connections: int = typer.Option(128, min=1, max=10_000, help="Connections served at once (more get "
                                                                         "a 503)."),
        read_timeout: float = typer.Option(30.0, help="Seconds a request's line, headers and body may take to "
                                                      "arrive (and an idle connection may stay open)."),
        drain_timeout: float = typer.Option(60.0, help="On SIGTERM, SIGINT or SIGHUP: seconds to let queued and "
                                                       "running evaluations finish before they are failed and "
                                                       "their workers killed (a second signal kills at once)."),
    ) -> None:
        """Serve evaluations over HTTP: POST /v1/evaluations, GET /v1/evaluations/{id}, GET /v1/health."""
        from cuda_agent import procs
        from cuda_agent.pool.http import ServerLimits, make_server
        from cuda_agent.store import Store, default_store_url

        console = Console()
        finite(standin, "--standin", 0.0, 3600.0)
        finite(read_timeout, "--read-timeout", 0.0, 3600.0, low_excluded=True)
        finite(drain_timeout, "--drain-timeout", 0.0, 86_400.0)
        gpu_list = _gpu_labels(gpus, standin, backend, console)
        chosen = _token(token, insecure_no_token, host, token_file, console)
        opened = None
        with procs.guard():
            try:
                if store != "none":
                    opened = Store.open(default_store_url() if store == "default" else store)
                pool = _make_pool(backend, gpu_list, standin, opened, ray_address, build_workers, build_cache)
                limits = ServerLimits(read_timeout_s=read_timeout, max_connections=max_connections)
                server = make_server(pool, host, port, token=chosen, limits=limits)
            except (CudaAgentError, OSError) as exc:
                console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
                if opened is not None:
                    opened.close()
                raise typer.Exit(2) from exc
            where = opened.url.redacted() if opened else "no store"
            console.print(f"listening on {server.url} (backend {backend}, {where})", highlight=False, soft_wrap=True)

            def drain_then_stop() -> None:
                server.service.drain(drain_timeout)
                time.sleep(DRAIN_GRACE_S)  # clients waiting on the last results get their answers
                server.shutdown()

            def stop(signum: int) -> None:
                console.print(f"stopping: no new jobs; letting queued ones finish (at most {drain_timeout:g} s; "
                              "a second signal ends them now)", highlight=False, soft_wrap=True)
                threading.Thread(target=drain_then_stop, name="cuda-agent-drain", daemon=True).start()

            procs.set_graceful(stop)
            try:
                server.serve_forever(poll_interval=0.2)
            finally:
                server.server_close()
                server.service.close(drain_s=drain_timeout)
                if opened is not None:
                    opened.close()
