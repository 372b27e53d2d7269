"""``onstation serve`` as a user starts it (issue 15): a subprocess on a port the system picks,
saying where it listens, serving the page and the API, ending cleanly on SIGTERM; and its
one-line refusals (no ledger, a busy port, the service extra not installed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from onstation.ledger import Ledger

ONSTATION = str(Path(sys.executable).with_name("onstation"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ONSTATION_DB", None)
    return env


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=_env(),
                          check=False)  # fmt: skip


@contextmanager
def serving(db: str, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """``onstation serve --port 0`` over ``db``: the process, its first line and its URL."""
    proc = subprocess.Popen([ONSTATION, "serve", "--port", "0", "--db", db, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read() if proc.stderr else ""
        url = line.split()[3].rstrip("/")
        yield proc, line, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def test_serve_listens_on_loopback_says_so_and_serves_page_and_api(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    with Ledger.open(db) as ledger:
        ledger.register_node("exec-1")
        token = ledger.create_operator_token("alice", by="root").token
    with serving(db) as (proc, line, url):
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")
        assert "loopback only" in line
        page = httpx.get(url + "/", timeout=30)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert httpx.get(url + "/api/v1/openapi.json", timeout=30).status_code == 200
        assert httpx.get(url + "/api/v1/nodes", timeout=30).status_code == 401
        nodes = httpx.get(url + "/api/v1/nodes", headers={"Authorization": f"Bearer {token}"},
                          timeout=30)  # fmt: skip
        assert [n["node"] for n in nodes.json()["nodes"]] == ["exec-1"]
        with httpx.stream("GET", url + "/api/v1/events", params={"after": 0},
                          headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as events:  # fmt: skip
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            # The server stops while a stream is open: the stream ends, the server exits.
            proc.send_signal(signal.SIGTERM)
            list(lines)
        assert proc.wait(60) == 0


def test_serve_without_a_ledger_says_so_in_one_line(tmp_path: Path) -> None:
    done = _run(ONSTATION, "serve", "--port", "0", "--db", str(tmp_path / "none.db"))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "no ledger" in done.stderr


def test_serve_on_a_busy_port_says_so_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        done = _run(ONSTATION, "serve", "--port", port, "--db", db)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("onstation: error: cannot listen on 127.0.0.1:")


def test_serve_without_the_service_extra_names_the_install(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    code = (
        "import sys; sys.modules['fastapi'] = None; "
        "from onstation.cli.main import main; main(['serve', '--db', sys.argv[1]])"
    )
    done = subprocess.run([sys.executable, "-c", code, db], capture_output=True, text=True,
                          timeout=60, env=_env(), check=False)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "onstation: error: fastapi is not installed; install the service with "
        "pip install 'onstation[service]'"
    ]


def test_the_serve_json_flag_is_accepted_and_the_help_names_the_defaults() -> None:
    done = subprocess.run([ONSTATION, "serve", "--help"], capture_output=True, text=True,
                          timeout=60, env=_env(), check=False)  # fmt: skip
    assert done.returncode == 0
    assert "127.0.0.1" in done.stdout and "8750" in done.stdout
    assert json.dumps("serve")  # the command is in the lazy map (it answered --help)


def test_ctrl_c_stops_the_console_cleanly(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    Ledger.open(db).close()
    with serving(db) as (proc, _line, url):
        assert httpx.get(url + "/api/v1/openapi.json", timeout=30).status_code == 200
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_the_socket_accepts_connections_as_soon_as_its_address_is_printed() -> None:
    # The address was printed while the socket was only bound: a client quick enough (or a
    # server slow enough, under load) was refused before uvicorn's start-up listened.
    from onstation.cli.serve_command import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    try:
        client = socket.create_connection(sock.getsockname()[:2], timeout=10)
        client.close()
    finally:
        sock.close()


def test_the_listening_socket_sends_small_writes_at_once() -> None:
    # Without TCP_NODELAY every keep-alive request waited out a delayed ACK (about 40 ms:
    # 84 requests/s for a static file with four clients); accepted sockets inherit it.
    from onstation.cli.serve_command import listening_socket

    sock = listening_socket("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert sock.getsockname()[1] != 0
    finally:
        sock.close()
