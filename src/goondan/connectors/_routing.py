"""Ingress routing of connector events (docs/architecture.md#connectors): a pure function of the rules and the event.

Kept free of I/O and of the bundle types so that the routing table can be tested exhaustively; the
bundle's ``IngressRule`` models are converted once per connection with :func:`rules_from_ingress`.

Rules are tried in order and the first match wins. A rule without ``match`` matches everything;
``match.event`` compares the event name; ``match.properties`` requires every listed property to be
present and equal as a string. When no rule matches, the event goes to the swarm's entry agent under
the event's own instance key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rule:
    """One ingress rule with its agent already resolved to a name (None: the entry agent)."""

    event: str | None = None
    properties: Mapping[str, str] | None = None
    agent: str | None = None
    instance_key: str | None = None
    instance_key_property: str | None = None
    instance_key_prefix: str | None = None


@dataclass(frozen=True, slots=True)
class RouteDecision:
    agent: str
    instance_key: str
    rule_index: int | None  # None: no rule matched, the entry-agent fallback was used


def stringify(value: Any) -> str:
    """How event properties are compared and forwarded: booleans as ``true``/``false``, numbers via str."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def stringify_properties(properties: Mapping[str, Any] | None) -> dict[str, str]:
    """Primitive properties as strings; nested values (lists, dicts) are dropped, as the spec allows none."""
    out: dict[str, str] = {}
    for key, value in (properties or {}).items():
        if isinstance(value, str | int | float | bool) or value is None:
            out[str(key)] = stringify(value)
    return out


def rule_matches(rule: Rule, event_name: str, properties: Mapping[str, str]) -> bool:
    if rule.event is not None and rule.event != event_name:
        return False
    for key, expected in (rule.properties or {}).items():
        if key not in properties or properties[key] != expected:
            return False
    return True


def _instance_key(rule: Rule, properties: Mapping[str, str], event_key: str) -> str:
    if rule.instance_key is not None and rule.instance_key.strip():
        return rule.instance_key.strip()
    if rule.instance_key_property is not None:
        value = properties.get(rule.instance_key_property, "")
        if value:
            return (rule.instance_key_prefix or "") + value
    return event_key


def route_event(
    rules: Sequence[Rule],
    *,
    event_name: str,
    properties: Mapping[str, str],
    event_instance_key: str,
    entry_agent: str,
) -> RouteDecision:
    """Where one event goes: the first matching rule's agent and key, else the entry agent."""
    for index, rule in enumerate(rules):
        if rule_matches(rule, event_name, properties):
            return RouteDecision(rule.agent or entry_agent, _instance_key(rule, properties, event_instance_key), index)
    return RouteDecision(entry_agent, event_instance_key, None)


def rules_from_ingress(ingress: Any, resolve_agent: Callable[[Any], str]) -> list[Rule]:
    """Convert ``Connection.spec.ingress`` (pydantic) into :class:`Rule` objects.

    ``resolve_agent`` maps a route's ``agentRef`` to the agent name (the bundle resolves package scope).
    """
    out: list[Rule] = []
    raw_rules: Iterable[Any] = getattr(ingress, "rules", None) or []
    for raw in raw_rules:
        match = raw.match
        route = raw.route
        out.append(
            Rule(
                event=match.event if match is not None else None,
                properties=dict(match.properties) if match is not None and match.properties else None,
                agent=resolve_agent(route.agent_ref) if route.agent_ref is not None else None,
                instance_key=route.instance_key,
                instance_key_property=route.instance_key_property,
                instance_key_prefix=route.instance_key_prefix,
            )
        )
    return out


__all__ = ["RouteDecision", "Rule", "route_event", "rule_matches", "rules_from_ingress", "stringify_properties"]
