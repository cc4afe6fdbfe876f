"""The built-in MCP bridge, declared under this bundle's own name (its tools become inventory__*)."""

from goondan.base.extensions.mcp import CONFIG_SCHEMA, register

__all__ = ["CONFIG_SCHEMA", "register"]
