"""Play GitHub: start the reviewer, deliver a signed pull_request webhook, print the comment it posts.

A stand-in for api.github.com listens on 127.0.0.1 (the Connection's apiBase comes from
GITHUB_API_BASE), so the whole round trip runs offline.
"""

import hashlib
import hmac
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

SECRET = "webhook-s3cret"
comments: "queue.Queue[tuple[str, str]]" = queue.Queue()


class FakeGitHub(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        comments.put((self.path, body["body"]))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"id": 1}')

    def log_message(self, *args: object) -> None:  # quiet
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deliver(port: int, event: str, payload: dict[str, object], delivery: str) -> int:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def main() -> None:
    bundle, titles = sys.argv[1], sys.argv[2:]
    api = HTTPServer(("127.0.0.1", 0), FakeGitHub)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "GITHUB_API_BASE": f"http://127.0.0.1:{api.server_port}",
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_TOKEN": "test-token",
    }
    gdn = Path(sys.executable).with_name("gdn")
    server = subprocess.Popen([str(gdn), "run", bundle], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the reviewer did not start")
            time.sleep(0.1)
        for number, title in enumerate(titles, start=1):
            payload = {
                "action": "opened",
                "pull_request": {"number": number, "title": title},
                "repository": {"full_name": "acme/widgets"},
                "sender": {"login": "octocat"},
            }
            status = deliver(port, "pull_request", payload, delivery=f"delivery-{number}")
            path, text = comments.get(timeout=30)  # the connector answers 202 at once, comments later
            print(f"{status} {path}")
            print(f"  {text}")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
        api.shutdown()


if __name__ == "__main__":
    main()
