"""``.env`` files and secrets for tools and extensions, as a user meets them through ``gdn``.

Precedence, highest first: ``--env-file`` > ``.env.local`` > ``.env`` > the process environment. A
Tool's or Extension's ``spec.config`` entry ``{valueFrom: {env: NAME}}`` hands the value to the code
(``ctx.config`` / ``register(api, config)``) and to nothing else: the tests grep everything a run
leaves behind (state root, stdout, debug logs on stderr) for the secret.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cli_testkit import gdn

from kit import write_files

SECRET = "sk-live-7f3a9c0e5b1d42aa"

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata: {name: vault-app}
---
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: scripted
  model: m
  options:
    rules:
      - when: {role: user}
        reply: {toolCalls: [{name: vault__check, args: {}}]}
      - reply: {text: "digest {{last}}"}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: vault}
spec:
  entry: ./vault.py
  config:
    token: {valueFrom: {env: VAULT_TOKEN}}
    region: eu
  exports:
    - {name: check, description: Checks the token., parameters: {type: object}}
---
apiVersion: goondan.ai/v1
kind: Extension
metadata: {name: keeper}
spec:
  entry: ./keeper.py
  config:
    apiKey: {valueFrom: {env: VAULT_TOKEN}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec:
  modelConfig: {modelRef: Model/m}
  tools: [Tool/vault]
  extensions: [Extension/keeper]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""

FILES = {
    "goondan.yaml": BUNDLE,
    # the tool proves which value it got by its digest; it never returns or logs the value itself
    "vault.py": """\
        import hashlib


        def check(ctx, args):
            ctx.logger.info("checking the token for region %s", ctx.config["region"])
            return hashlib.sha256(ctx.config["token"].encode()).hexdigest()[:16]


        handlers = {"check": check}
        """,
    "keeper.py": """\
        CONFIG_SCHEMA = {"type": "object", "properties": {"apiKey": {"type": "string", "pattern": "^sk-"}}}


        def register(api, config):
            api.logger.info("keeper config: %r", config)  # a habit the secret must survive

            async def remember(ctx):
                await api.state.set({"keyLength": len(config["apiKey"])})
                return await ctx.next()

            api.pipeline.register("turn", remember)
        """,
}


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def everything_left_behind(root: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in root.rglob("*") if p.is_file() and p.stat().st_size < 5_000_000
    )


def test_dotenv_secret_reaches_tool_and_extension_and_nothing_else(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", {**FILES, ".env": f"VAULT_TOKEN={SECRET}\n"})
    state = tmp_path / "state"
    ran = gdn(
        tmp_path, "run", str(app), "--input", "go", "-vv", "--state-root", str(state), GOONDAN_ISOLATION="process"
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == f"digest {digest(SECRET)}"
    assert "checking the token for region eu" in ran.stderr  # debug logging was on
    assert "keeper config: {'apiKey': '***'}" in ran.stderr
    keeper_state = list(state.rglob("extensions/keeper.json"))
    assert keeper_state and f'"keyLength": {len(SECRET)}'.replace(" ", "") in keeper_state[0].read_text().replace(
        " ", ""
    )
    for where, text in (("stdout", ran.stdout), ("stderr", ran.stderr), ("state root", everything_left_behind(state))):
        assert SECRET not in text, f"the secret leaked into {where}"
    logs = gdn(tmp_path, "logs", "--json", "--state-root", str(state), "-l", "0")
    assert logs.returncode == 0 and logs.stdout and SECRET not in logs.stdout


def test_precedence_env_file_over_env_local_over_env_over_environment(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", FILES)
    extra = tmp_path / "ci.env"

    def run(*args: str) -> str:
        proc = gdn(tmp_path, "run", str(app), "--input", "go", *args, VAULT_TOKEN="sk-from-environment")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip().removeprefix("digest ")

    assert run() == digest("sk-from-environment")
    (app / ".env").write_text("VAULT_TOKEN=sk-from-dotenv\n")
    assert run() == digest("sk-from-dotenv")
    (app / ".env.local").write_text("# per machine\nexport VAULT_TOKEN='sk-from-dotenv-local'\n")
    assert run() == digest("sk-from-dotenv-local")
    extra.write_text('VAULT_TOKEN="sk-from-env-file"\n')
    assert run("--env-file", str(extra)) == digest("sk-from-env-file")


def test_unset_secret_is_a_validation_error_at_the_config_entry(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", FILES)
    proc = gdn(tmp_path, "validate", str(app), "--format", "json")
    assert proc.returncode == 4
    assert "E_CONFIG_ENV_MISSING" in proc.stdout and "VAULT_TOKEN" in proc.stdout
    assert "spec.config.token" in proc.stdout and "spec.config.apiKey" in proc.stdout
    run = gdn(tmp_path, "run", str(app), "--input", "go")
    assert run.returncode == 3 and "E_CONFIG_ENV_MISSING" in run.stderr


def test_malformed_value_source_in_config_is_a_schema_error(tmp_path: Path) -> None:
    app = write_files(
        tmp_path / "app",
        {**FILES, "goondan.yaml": BUNDLE.replace("{env: VAULT_TOKEN}}\n    region", "{file: x}}\n    region")},
    )
    proc = gdn(tmp_path, "validate", str(app))
    assert proc.returncode == 4
    assert "E_CONFIG_SCHEMA_INVALID" in proc.stdout and "valueFrom" in proc.stdout


def test_a_secret_failing_the_extensions_config_schema_is_not_echoed(tmp_path: Path) -> None:
    keeper = FILES["keeper.py"].replace('"^sk-"', '"^pk-"')
    app = write_files(tmp_path / "app", {**FILES, "keeper.py": keeper, ".env": f"VAULT_TOKEN={SECRET}\n"})
    proc = gdn(tmp_path, "validate", str(app))
    assert proc.returncode == 4
    assert "E_CONFIG_EXTENSION_CONFIG_INVALID" in proc.stdout and "'***'" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr


def test_a_missing_variable_names_the_nearly_named_one_that_is_set_and_never_its_value(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", FILES)
    (app / ".env").write_text(f"VAULT_TOKN={SECRET}\n")  # one letter off the YAML's VAULT_TOKEN
    run = gdn(tmp_path, "run", str(app), "--input", "go")
    assert run.returncode == 3 and "[E_CONFIG_ENV_MISSING]" in run.stderr, run.stderr
    assert "VAULT_TOKN is set, not VAULT_TOKEN: if it holds this value, make the two names match" in run.stderr
    assert SECRET not in run.stderr + run.stdout
    (app / ".env").write_text(f"VAULT_PASSWORD={SECRET}\n")  # a far name is not offered
    proc = gdn(tmp_path, "validate", str(app))
    assert "VAULT_TOKEN" in proc.stdout and "is set, not VAULT_TOKEN" not in proc.stdout, proc.stdout
