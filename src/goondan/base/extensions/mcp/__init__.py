"""mcp: bridges one MCP server into an agent through the official ``mcp`` SDK (2.x, ``mcp.Client``).

Config::

    transport: {type: stdio, command: ["npx", "-y", "server"] | "cmd line", env: {K: V}, cwd: dir}
             | {type: http, endpoint: "http://127.0.0.1:8080/mcp", headers: {Authorization: "..."}}
    attach:    {mode: stateful | stateless, scope: instance | agent}      # default stateful, instance
    expose:    {tools: true, resources: false, prompts: false}
    timeouts:  {connectMs: 30000, callMs: 120000}

- **Tools**: every server tool becomes ``<extension-name>__<tool>`` with the server's input schema
  (names made catalog-safe: ``[A-Za-z0-9_-]``, one ``__``, at most 64 characters). Text results come
  back as text, other content as JSON blocks (binary data elided); ``isError`` results are tool errors
  (``E_MCP_TOOL_ERROR``). A stdio server's stderr is logged at INFO (``gdn run -v``): where the SDK's
  server logs the traceback of a tool that raised. An answer that breaks the MCP schema (say, a tool
  whose input schema is not an object) is ``E_MCP_BAD_RESPONSE`` naming the offending field.
- **Resources / prompts** (when exposed): a step middleware keeps one system message listing them
  (deduplicated by hash, replaced in place when the listing changes), and the tools
  ``<name>__read-resource {uri}`` and ``<name>__get-prompt {name, arguments}`` fetch them.
- **Changes while connected**: a server that says its tool (resource, prompt) list changed —
  ``notifications/tools/list_changed`` on a handshake-era connection, an event on the
  ``subscriptions/listen`` stream the extension opens on a 2026-07-28 connection when the server
  advertises ``listChanged`` — is listed again before the agent's next step sees its catalog: at
  the start of a turn and after a step whose tool calls have all finished, never under a running
  call. New tools are registered, withdrawn ones unregistered (calling one then is
  ``E_TOOL_NOT_IN_CATALOG``), changed descriptions and schemas replaced; the resources/prompts
  message follows. A burst of notifications costs one listing, one arriving during a listing one
  more; a listing that fails is a warning and the previous tools stay (tried again next turn). A
  new session (after a restart) is listed again in full.
- **stdio**: ``command`` (list, or a string split like a shell would) runs with ``env`` merged over
  the SDK's safe default environment (HOME, PATH, ...). ``{python}`` in the command is the
  interpreter running goondan. ``cwd`` (and a missing ``cwd``) resolves against the **bundle root**.
  Because ``register()`` cannot see the bundle root, such a server is started by the extension's
  outermost turn middleware at the agent instance's first turn; an http server or a stdio server with
  an absolute ``cwd`` is started inside ``register()``. Either way a server that cannot be started is
  ``ExtensionError('E_EXT_INIT')`` naming the command line (or URL) and the server's stderr: the agent
  fails to start, or that turn fails and the next turn tries again.
- **Dead servers**: see :mod:`goondan.base.extensions.mcp._bridge` — a server found dead before a
  call is restarted transparently; one that dies during a call fails that call with
  ``E_MCP_CONNECTION_LOST`` and is restarted on the next call.
- **Several servers**: the extension's name is the tool prefix and every name appears once per agent,
  so declare one Extension resource per server. Built-in: reference ``mcp`` of ``@goondan/base``
  with per-agent config. More: a one-line entry file in your bundle
  (``from goondan.base.extensions.mcp import CONFIG_SCHEMA, register``) per Extension resource.
- **Shutdown**: stateful sessions end when the event loop ends (the SDK closes stdin, then
  terminates the server's process group) or on the ``extension.cleanup`` event.
"""

from goondan.base.extensions.mcp._extension import CONFIG_SCHEMA, register

__all__ = ["CONFIG_SCHEMA", "register"]
