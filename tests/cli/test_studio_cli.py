"""``gdn studio`` on the command line (goondan.cli._studio): registered without heavy imports, its
options documented, and a clear error when the ``studio`` extra is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_testkit import env_for, gdn


def test_studio_help_lists_its_options_and_the_host_rule(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "studio", "--help")
    assert proc.returncode == 0
    for option in ("PATH", "--state-root", "--host", "--port", "--open", "--token", "--store"):
        assert option in proc.stdout, option
    assert "127.0.0.1" in proc.stdout and "GOONDAN_STUDIO_TOKEN" in proc.stdout


def test_registering_studio_imports_neither_starlette_nor_uvicorn(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from goondan.cli._parser import build_parser\n"
        "build_parser().parse_args(['studio', '--port', '0'])\n"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'goondan.studio') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env_for(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_without_the_studio_extra_the_error_says_what_to_install(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "sys.modules['starlette'] = None  # as if the extra were not installed\n"
        "from goondan.cli import main\n"
        f"sys.exit(main(['studio', '--port', '0', '--state-root', {str(tmp_path)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env_for(tmp_path))
    assert proc.returncode == 2
    assert "E_STUDIO_EXTRA_MISSING" in proc.stderr and "pip install 'goondan-runtime[studio]'" in proc.stderr
    assert "Traceback" not in proc.stderr
