"""Lazy command entry points: each imports its implementation only when that command runs."""

from __future__ import annotations

import argparse


def cmd_init(args: argparse.Namespace) -> int:
    from ._init import cmd_init as run

    return run(args)


def cmd_validate(args: argparse.Namespace) -> int:
    from ._validate import cmd_validate as run

    return run(args)


def cmd_run(args: argparse.Namespace) -> int:
    from ._run import cmd_run as run

    return run(args)


def cmd_restart(args: argparse.Namespace) -> int:
    from ._manage import cmd_restart as run

    return run(args)


def cmd_instance_list(args: argparse.Namespace) -> int:
    from ._manage import cmd_instance_list as run

    return run(args)


def cmd_instance_delete(args: argparse.Namespace) -> int:
    from ._manage import cmd_instance_delete as run

    return run(args)


def cmd_instance_restart(args: argparse.Namespace) -> int:
    from ._manage import cmd_instance_restart as run

    return run(args)


def cmd_logs(args: argparse.Namespace) -> int:
    from ._logs import cmd_logs as run

    return run(args)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ._doctor import cmd_doctor as run

    return run(args)


def cmd_schema(args: argparse.Namespace) -> int:
    from ._schema import cmd_schema as run

    return run(args)


def cmd_approvals_list(args: argparse.Namespace) -> int:
    from ._approvals import cmd_approvals_list as run

    return run(args)


def cmd_approvals_approve(args: argparse.Namespace) -> int:
    from ._approvals import cmd_approvals_approve as run

    return run(args)


def cmd_approvals_deny(args: argparse.Namespace) -> int:
    from ._approvals import cmd_approvals_deny as run

    return run(args)


def cmd_studio(args: argparse.Namespace) -> int:
    from ._studio import cmd_studio as run

    return run(args)


def cmd_help(args: argparse.Namespace) -> int:
    from ._help import cmd_help as run

    return run(args)


def cmd_completion(args: argparse.Namespace) -> int:
    from ._completion import cmd_completion as run

    return run(args)


def cmd_package_add(args: argparse.Namespace) -> int:
    from ._package import cmd_package_add as run

    return run(args)


def cmd_package_install(args: argparse.Namespace) -> int:
    from ._package import cmd_package_install as run

    return run(args)


def cmd_package_lock(args: argparse.Namespace) -> int:
    from ._package import cmd_package_lock as run

    return run(args)


def cmd_package_build(args: argparse.Namespace) -> int:
    from ._package import cmd_package_build as run

    return run(args)
