"""The sealed report channel: the trusted side believes one report from the evaluation's own process and nothing
else; sealing stops every way Python code could run while the channel is open. Real sockets and processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from cuda_agent.evaluator.report import ReportInbox, wait_for_report

_SEND = textwrap.dedent(
    """
    import sys
    from cuda_agent.evaluator.report import make_sender
    send = make_sender()
    for _ in range(int(sys.argv[2])):
        send("\\0" + sys.argv[1], {"result": {"stage": "timed", "who": "child"}}, None)
    """
)


def _report_from_child(inbox: ReportInbox, times: int = 1) -> int:
    """Start a process that reports ``times`` times; wait for it; return its pid."""
    proc = subprocess.Popen([sys.executable, "-c", _SEND, inbox.address[1:], str(times)])  # argv holds no NUL
    finished, code = wait_for_report(inbox, proc.pid, proc.poll, time.monotonic() + 60)
    assert finished and code == 0
    return proc.pid


def test_one_report_from_the_evaluation_is_believed() -> None:
    with ReportInbox() as inbox:
        pid = _report_from_child(inbox)
        payload, why = inbox.verdict(pid)
    assert why == "" and payload == {"result": {"stage": "timed", "who": "child"}}


def test_a_report_from_another_process_is_tampering() -> None:
    with ReportInbox() as inbox:
        forger = _report_from_child(inbox)
        payload, why = inbox.verdict(forger + 1_000_000)  # the evaluation is some other process
    assert payload is None and f"process {forger}" in why


def test_a_second_report_is_tampering() -> None:
    with ReportInbox() as inbox:
        pid = _report_from_child(inbox, times=2)
        payload, why = inbox.verdict(pid)
    assert payload is None and "reported 2 times" in why


def test_no_report_and_a_cut_short_report_are_not_results() -> None:
    with ReportInbox() as inbox:
        assert inbox.verdict(os.getpid()) == (None, "")
    with ReportInbox() as inbox:
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(inbox.address)
        sock.sendall(b'{"result": {"stage": "tim')  # the process died while reporting
        sock.close()
        assert inbox.verdict(os.getpid()) == (None, "")


def test_the_report_address_is_fresh_and_not_a_file() -> None:
    with ReportInbox() as one, ReportInbox() as two:
        assert one.address != two.address and one.address.startswith("\0")


_SEAL = textwrap.dedent(
    """
    import gc, json, os, signal, sys, threading
    from cuda_agent.evaluator.report import make_sender, seal_interpreter
    ran = []
    signal.signal(signal.SIGALRM, lambda *a: ran.append("signal"))
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    sys.setprofile(lambda *a: None)
    gc.callbacks.append(lambda *a: ran.append("gc"))
    seal_interpreter()
    os.kill(os.getpid(), signal.SIGALRM)  # blocked here, ignored on any other thread: the handler never runs
    [object() for _ in range(100000)]
    print(json.dumps({"ran": ran, "profile": sys.getprofile() is None, "gc_enabled": gc.isenabled(),
                      "timer": signal.getitimer(signal.ITIMER_REAL)[0], "callbacks": len(gc.callbacks),
                      "handler_ignored": signal.getsignal(signal.SIGALRM) == signal.SIG_IGN}))
    t = threading.Thread(target=threading.Event().wait, daemon=True)
    t.start()
    print(make_sender()("\\0nobody-listens", {"result": {}}, frozenset({threading.get_ident()})))
    """
)


def test_sealing_stops_signals_timers_hooks_and_the_collector() -> None:
    out = subprocess.run([sys.executable, "-c", _SEAL], capture_output=True, text=True, timeout=60, check=True)
    state_line, sent_line = out.stdout.strip().splitlines()
    state = json.loads(state_line)
    assert state == {"ran": [], "profile": True, "gc_enabled": False, "timer": 0.0, "callbacks": 0,
                     "handler_ignored": True}
    assert sent_line == "False"  # a Python thread that was not there before: the report is withheld


_REBIND = textwrap.dedent(
    """
    import sys
    import cuda_agent.evaluator.result as result
    from cuda_agent.evaluator.report import make_sender
    send = make_sender()
    result.failure = lambda *a, **k: None  # what a candidate would do through sys.modules
    send("\\0" + sys.argv[1], {"result": {"stage": "timed"}}, None)
    """
)


def test_a_replaced_evaluator_function_turns_the_report_into_tampering() -> None:
    with ReportInbox() as inbox:
        proc = subprocess.Popen([sys.executable, "-c", _REBIND, inbox.address[1:]])
        finished, code = wait_for_report(inbox, proc.pid, proc.poll, time.monotonic() + 60)
        payload, why = inbox.verdict(proc.pid)
    assert finished and code == 0 and why == ""
    assert payload is not None and "cuda_agent.evaluator.result.failure" in payload["tampered"]
