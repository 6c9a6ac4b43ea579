"""An app page gets the browser rights its metadata asks for, and no more (SEP-1865,
"Host Behavior"): the spec's restrictive default, declared origins added where they belong,
anything that is not a plain origin dropped, permissions only as declared."""

from __future__ import annotations

from agent.apps.policy import allow_attribute, content_security_policy, granted
from agent.tools.uimeta import tool_ui


def directives(csp: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.split(" ", 1)[1] for d in csp.split("; ")}


def test_no_metadata_gets_the_specs_restrictive_default() -> None:
    policy = directives(content_security_policy({}))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self' 'unsafe-inline'"
    assert policy["img-src"] == "'self' data:"
    assert policy["connect-src"] == "'none'"
    assert policy["frame-src"] == "'none'"
    assert policy["base-uri"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert allow_attribute({}) == ""


def test_declared_origins_go_to_their_directives_only() -> None:
    ui = {
        "csp": {
            "connectDomains": ["https://api.weather.example", "wss://live.example:8443"],
            "resourceDomains": ["https://*.cdn.example"],
            "frameDomains": ["https://player.example"],
        },
        "permissions": {"microphone": {}, "clipboardWrite": {}},
    }
    policy = directives(content_security_policy(ui))
    assert policy["connect-src"] == "https://api.weather.example wss://live.example:8443"
    assert policy["script-src"] == "'self' 'unsafe-inline' https://*.cdn.example"
    assert policy["style-src"].endswith("https://*.cdn.example")
    assert policy["frame-src"] == "https://player.example"
    assert "cdn.example" not in policy["connect-src"]
    assert allow_attribute(ui) == "microphone; clipboard-write"
    assert granted(ui)["permissions"] == {"microphone": {}, "clipboardWrite": {}}


def test_a_server_cannot_loosen_the_policy_by_writing_it() -> None:
    ui = {
        "csp": {
            "connectDomains": ["*", "'unsafe-eval'", "https://ok.example; script-src *", "data:"],
            "resourceDomains": ["https://x.example 'unsafe-eval'", "javascript:alert(1)"],
        },
        "permissions": {"camera": {}, "usb": {}, "display-capture": {}},
    }
    csp = content_security_policy(ui)
    assert "unsafe-eval" not in csp and "*;" not in csp and "javascript" not in csp
    policy = directives(csp)
    assert policy["connect-src"] == "'none'"
    assert policy["script-src"] == "'self' 'unsafe-inline'"
    assert allow_attribute(ui) == "camera"  # unknown features are not granted
    assert granted(ui)["csp"] == {}


def test_tool_visibility_and_page_are_read_from_both_meta_forms() -> None:
    assert tool_ui({"ui": {"resourceUri": "ui://a/b.html", "visibility": ["app"]}}) == (
        "ui://a/b.html",
        ("app",),
    )
    assert tool_ui({"ui/resourceUri": "ui://old/form.html"}) == (
        "ui://old/form.html",
        ("model", "app"),
    )
    # A typo never hides a tool from the model; a page must be a ui:// uri.
    assert tool_ui({"ui": {"visibility": ["App"]}}) == (None, ("model", "app"))
    assert tool_ui({"ui": {"resourceUri": "https://x.example/page"}}) == (None, ("model", "app"))
    assert tool_ui(None) == (None, ("model", "app"))
