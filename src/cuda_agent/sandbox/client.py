"""cuda-agent inside the sandbox: forwards `cuda-agent <command> [args...]` to the host broker and prints the reply.

Standard library only and tiny, so that it starts in milliseconds (no torch import just to forward a request).
Installed inside as /opt/cuda-agent/bin/cuda-agent; the socket path comes from $CUDA_AGENT_BROKER.
"""
import json
import os
import socket
import sys

USAGE = """usage: cuda-agent <command> [args...]

commands (run from /workspace):
  build     compile kernels/*.cu into the extension and show compiler errors
  verify    check model_new.py against model.py on the GPU (correctness, anti-cheat checks)
  profile   time model_new.py against eager PyTorch and torch.compile
            (--breakdown: also the time of each of your kernels)
  submit    submit the current solution and end the episode
"""


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 2
    path = os.environ.get("CUDA_AGENT_BROKER", "/run/cuda-agent/broker.sock")
    request = {"command": argv[0], "args": list(argv[1:]), "cwd": os.getcwd()}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            conn.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        sys.stderr.write("cuda-agent: cannot reach the host service at %s: %s\n" % (path, exc))
        return 69
    try:
        reply = json.loads(data.decode())
        text, code = reply["text"], int(reply["exit_code"])
    except (ValueError, KeyError, TypeError) as exc:
        sys.stderr.write("cuda-agent: malformed reply from the host service: %s\n" % exc)
        return 70
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
