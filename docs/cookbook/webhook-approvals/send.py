"""Drive the webhook bot the way a chat service would: start it, POST signed messages, print replies.

Usage: python send.py BUNDLE MESSAGE... Each MESSAGE is one POST; in a message, ``{approval}`` is
replaced by the id of the approval the previous reply asked for.
"""

import hashlib
import hmac
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SECRET = "s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, payload: dict[str, object]) -> dict[str, object]:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/",
        data=body,
        headers={"Content-Type": "application/json", "X-Signature-256": signature},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as refused:  # the bot's error reply, e.g. an approval already decided
        return {"ok": False, "text": f"HTTP {refused.code}: {refused.read().decode(errors='replace')}"}


def main() -> None:
    bundle, messages = sys.argv[1], sys.argv[2:]
    port = free_port()
    env = {**os.environ, "PORT": str(port), "WEBHOOK_SECRET": SECRET}
    gdn = Path(sys.executable).with_name("gdn")
    server = subprocess.Popen([str(gdn), "run", bundle], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the bot did not start")
            time.sleep(0.1)
        approval = ""
        for text in messages:
            text = text.replace("{approval}", approval)
            print(">", text)
            # a chat service sends its message id: two equal messages are two bodies, not a replay
            answer = post(port, {"text": text, "instanceKey": "ops-room", "properties": {"id": str(time.time_ns())}})
            print(answer["text"])
            found = re.search(r"approve (appr_\w+)", str(answer["text"]))
            approval = found.group(1) if found else approval
    finally:
        server.send_signal(signal.SIGINT)  # what Ctrl+C does: finish, then exit
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
