"""``pytester`` runs the goondan plugin in a pytest of its own (tests/testing/test_pytest_plugin.py)."""

pytest_plugins = ["pytester"]
