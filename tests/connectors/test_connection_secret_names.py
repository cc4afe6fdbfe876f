"""A Connection secret under a name the connector never reads fails `gdn run` at start: the webhook's
`signingSecrt` left it without a signing secret, and on 127.0.0.1 (no warning) it accepted unsigned
requests. A connector that does not declare ``SECRETS`` (a user's own) takes any names, as before."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from cn_testkit import connector_bundle, free_port, gdn_run, gdn_run_to_end


def connection(port: int, secret_key: str) -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: hook\n"
        "spec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        "  config:\n"
        f'    port: {{ value: "{port}" }}\n'
        "  secrets:\n"
        f"    {secret_key}: {{ valueFrom: {{ env: HOOK_SECRET }} }}\n"
    )


def test_a_misspelt_webhook_secret_fails_the_start_naming_the_one_meant(tmp_path: Path) -> None:
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, "signingSecrt"))
    run = gdn_run_to_end(tmp_path, bundle, HOOK_SECRET="s3cret-value")
    assert run.returncode == 3, run.stdout + run.stderr
    assert "[E_CONNECTOR_CONFIG]" in run.stderr
    assert "spec.secrets.signingSecrt is not a secret Connector/webhook reads" in run.stderr
    assert "did you mean 'signingSecret'?" in run.stderr and "Traceback" not in run.stderr


def test_the_secret_spelt_right_still_guards_the_webhook(tmp_path: Path) -> None:
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, "signingSecret"))
    with gdn_run(tmp_path, bundle, HOOK_SECRET="s3cret-value") as run:
        run.wait_ready()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=b'{"text": "unsigned"}', method="POST")
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=15)
            status = 200
        except urllib.error.HTTPError as refused:
            status = refused.code
        assert status == 401
        run.stop()
