"""`cuda-agent serve-model`: a local model (a GGUF file) behind an OpenAI-compatible API on 127.0.0.1, for trying
the agent without a hosted endpoint. The server is llama.cpp through llama-cpp-python (`cuda_agent.agent.local_server`);
it stops, with its whole process group, when this command ends (Ctrl-C, SIGTERM, SIGHUP)."""
from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from cuda_agent.errors import CudaAgentError

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    @app.command("serve-model")
    def serve_model(
        model: Optional[Path] = typer.Option(None, help="GGUF file (default: $CUDA_AGENT_TEST_MODEL or the file "
                                             "scripts/fetch_test_model.sh writes)."),
        port: int = typer.Option(8012, help="Port on 127.0.0.1 (0 picks a free one)."),
        ctx: int = typer.Option(16384, help="Context window in tokens (pass the same --context-tokens to optimize)."),
        threads: Optional[int] = typer.Option(None, help="CPU threads (llama.cpp's default when not given)."),
        python: Optional[str] = typer.Option(None, help="Python with llama-cpp-python[server] (env "
                                             "CUDA_AGENT_LLAMA_PYTHON; default: this one, if it has llama_cpp)."),
        name: str = typer.Option("local", help="Model name the server answers to (optimize --model)."),
        log: Optional[Path] = typer.Option(None, help="Server log file (default: in the temp folder)."),
    ) -> None:
        """Serve a GGUF model on 127.0.0.1 with an OpenAI-compatible API until interrupted."""
        from cuda_agent.agent.local_server import LocalModelServer, LocalServerConfig, default_model_path

        config = LocalServerConfig(model=model or default_model_path(), port=port or None, ctx=ctx, threads=threads,
                                   python=python, model_name=name, log_path=log)
        server = LocalModelServer(config)
        stop = threading.Event()
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
        try:
            console.print(f"loading {config.model} (log: {server.log_path}) ...")
            server.start()
            console.print(f"serving [bold]{name}[/bold] at {server.base_url}; Ctrl-C stops it. Point the agent at it:\n"
                          f"  cuda-agent optimize L1/19_ReLU --base-url {server.base_url} --model {name} "
                          f"--context-tokens {ctx} --max-completion-tokens 2048")
            while not stop.wait(1.0):
                if server.proc is not None and server.proc.poll() is not None:
                    console.print(f"[red]the model server exited[/red] ({server.proc.returncode}):\n{server.log_tail()}")
                    raise typer.Exit(1)
        except CudaAgentError as exc:
            console.print(f"[red]cannot serve:[/red] {exc}")
            raise typer.Exit(2)
        finally:
            server.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        console.print("model server stopped")
