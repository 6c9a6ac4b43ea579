"""Elicitation answers typed in the terminal become checked, typed values."""

from __future__ import annotations

import pytest

from agent.ui.forms import enum_choices, field_hint, field_value

TITLED = {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2"}]}
LEGACY = {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]}


def test_enum_titles_are_shown_and_accepted_in_any_case() -> None:
    choices = enum_choices(TITLED)
    assert choices == {"h1": "Superman", "h2": "h2"}
    assert field_hint(TITLED, "string", choices) == "h1=Superman, h2"
    assert field_value("superMAN", TITLED, "string", choices) == "h1"
    assert field_value("h2", TITLED, "string", choices) == "h2"
    with pytest.raises(ValueError, match="choose from h1, h2"):
        field_value("Batman", TITLED, "string", choices)


def test_legacy_enum_names_and_multi_select() -> None:
    assert field_value("Dogs", LEGACY, "string", enum_choices(LEGACY)) == "p2"
    multi = {"type": "array", "items": LEGACY}
    choices = enum_choices(LEGACY)
    assert field_value("cats, p2", multi, "array", choices) == ["p1", "p2"]
    assert field_hint(multi, "array", choices) == "comma-separated: p1=Cats, p2=Dogs"


@pytest.mark.parametrize(
    ("prop", "good", "bad", "complaint"),
    [
        ({"type": "string", "format": "email"}, "a@b.io", "a-at-b", "valid email"),
        ({"type": "string", "format": "uri"}, "https://x.org/p", "x.org", "valid uri"),
        ({"type": "string", "format": "date"}, "2026-11-23", "23/11/2026", "valid date"),
        ({"type": "string", "maxLength": 3}, "abc", "abcd", "at most 3 characters"),
        ({"type": "integer", "minimum": 1, "maximum": 100}, "7", "700", "at most 100"),
        ({"type": "number", "minimum": 0}, "0.5", "-1", "at least 0"),
        ({"type": "boolean"}, "yes", "maybe", "answer yes or no"),
    ],
)
def test_formats_and_bounds_are_checked(
    prop: dict[str, object], good: str, bad: str, complaint: str
) -> None:
    kind = str(prop["type"])
    assert field_value(good, prop, kind, {}) is not None
    with pytest.raises(ValueError, match=complaint):
        field_value(bad, prop, kind, {})
    assert field_hint(prop, kind, {}) == str(prop.get("format") or kind)
