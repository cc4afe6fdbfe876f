"""Ingress routing (digest §7): first match wins, match semantics, instance-key precedence, fallback."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goondan.connectors import Rule, route_event, rule_matches, stringify_properties


def route(rules: list[Rule], name: str = "msg", props: dict[str, str] | None = None, key: str = "evt-key"):  # type: ignore[no-untyped-def]
    return route_event(rules, event_name=name, properties=props or {}, event_instance_key=key, entry_agent="entry")


TABLE = [
    Rule(
        event="deploy",
        properties={"env": "prod"},
        agent="ops",
        instance_key_property="service",
        instance_key_prefix="svc:",
    ),
    Rule(event="deploy", agent="ops", instance_key="  pinned  "),
    Rule(properties={"vip": "true"}, agent="concierge"),
    Rule(event="chat"),
]


@pytest.mark.parametrize(
    ("name", "props", "expected"),
    [
        ("deploy", {"env": "prod", "service": "api"}, ("ops", "svc:api", 0)),
        # property used for the key is missing/empty: the event's own key
        ("deploy", {"env": "prod"}, ("ops", "evt-key", 0)),
        ("deploy", {"env": "prod", "service": ""}, ("ops", "evt-key", 0)),
        # fixed keys are trimmed
        ("deploy", {"env": "dev"}, ("ops", "pinned", 1)),
        ("other", {"vip": "true"}, ("concierge", "evt-key", 2)),
        # exact string comparison: "True" is not "true"
        ("other", {"vip": "True"}, ("entry", "evt-key", None)),
        # a rule without agentRef goes to the entry agent
        ("chat", {}, ("entry", "evt-key", 3)),
        ("unknown", {}, ("entry", "evt-key", None)),
    ],
)
def test_routing_table(name: str, props: dict[str, str], expected: tuple[str, str, int | None]) -> None:
    d = route(TABLE, name, props)
    assert (d.agent, d.instance_key, d.rule_index) == expected


def test_first_matching_rule_wins_even_when_a_later_rule_is_more_specific() -> None:
    rules = [Rule(agent="general"), Rule(event="deploy", properties={"env": "prod"}, agent="ops")]
    assert route(rules, "deploy", {"env": "prod"}).agent == "general"


def test_blank_fixed_key_falls_through_to_the_property_then_event_key() -> None:
    assert route([Rule(instance_key="   ")]).instance_key == "evt-key"


def test_prefix_without_a_property_does_not_change_the_event_key() -> None:
    assert route([Rule(instance_key_prefix="p:")]).instance_key == "evt-key"


def test_properties_are_stringified_for_matching() -> None:
    props = stringify_properties({"n": 42, "ok": True, "off": False, "f": 1.5, "s": "x", "nested": {"a": 1}})
    assert props == {"n": "42", "ok": "true", "off": "false", "f": "1.5", "s": "x"}
    assert rule_matches(Rule(properties={"n": "42", "ok": "true"}), "any", props)


def test_no_rules_means_entry_agent_with_the_event_key() -> None:
    d = route([], "x", {"a": "b"}, key="k1")
    assert (d.agent, d.instance_key, d.rule_index) == ("entry", "k1", None)


texts = st.text(alphabet="abcxyz:-", min_size=0, max_size=4)
prop_maps = st.dictionaries(st.sampled_from(["a", "b", "c"]), texts, max_size=3)
rules_strategy = st.lists(
    st.builds(
        Rule,
        event=st.none() | st.sampled_from(["e1", "e2"]),
        properties=st.none() | prop_maps,
        agent=st.none() | st.sampled_from(["x", "y"]),
        instance_key=st.none() | texts,
        instance_key_property=st.none() | st.sampled_from(["a", "b", "c"]),
        instance_key_prefix=st.none() | texts,
    ),
    max_size=5,
)


@given(rules_strategy, st.sampled_from(["e1", "e2", "e3"]), prop_maps, st.text(min_size=1, max_size=5))
def test_routing_agrees_with_a_direct_reading_of_the_spec(
    rules: list[Rule], name: str, props: dict[str, str], key: str
) -> None:
    decision = route(rules, name, props, key)
    matching = [
        i
        for i, r in enumerate(rules)
        if (r.event is None or r.event == name) and all(props.get(k) == v for k, v in (r.properties or {}).items())
    ]
    if not matching:
        assert (decision.agent, decision.instance_key, decision.rule_index) == ("entry", key, None)
        return
    rule = rules[matching[0]]
    assert decision.rule_index == matching[0]
    assert decision.agent == (rule.agent or "entry")
    if rule.instance_key and rule.instance_key.strip():
        assert decision.instance_key == rule.instance_key.strip()
    elif rule.instance_key_property and props.get(rule.instance_key_property):
        assert decision.instance_key == (rule.instance_key_prefix or "") + props[rule.instance_key_property]
    else:
        assert decision.instance_key == key
    assert decision.instance_key  # never empty: a turn always has a conversation


def test_connector_events_are_checked_and_normalized() -> None:
    from goondan.connectors import check_event, message_text

    event = check_event({"name": "e", "message": "plain", "instanceKey": " k ", "properties": {"a": 1}})
    assert event == {
        "name": "e",
        "message": {"type": "text", "text": "plain"},
        "properties": {"a": 1},
        "instanceKey": "k",
    }
    for bad, why in [
        ({"message": "x", "instanceKey": "k"}, "name"),
        ({"name": "e", "message": "x"}, "instanceKey"),
        ({"name": "e", "message": "x", "instanceKey": "  "}, "instanceKey"),
        ({"name": "e", "message": {"type": "video", "url": "u"}, "instanceKey": "k"}, "message"),
        ({"name": "e", "message": {"type": "file", "url": "u"}, "instanceKey": "k"}, "name"),
        ({"name": "e", "message": "x", "instanceKey": "k", "properties": [1]}, "properties"),
    ]:
        with pytest.raises(ValueError, match=why):
            check_event(bad)
    assert message_text({"type": "image", "url": "http://i"}) == "[image] http://i"
    assert message_text({"type": "file", "url": "http://f", "name": "a.txt"}) == "[file:a.txt] http://f"
