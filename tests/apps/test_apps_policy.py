"""An app page gets the browser rights its metadata asks for, and no more (SEP-1865,
"Host Behavior"): the spec's restrictive default, declared origins added where they belong,
anything that is not a plain origin dropped, permissions only as declared."""

from __future__ import annotations

from agent.apps.policy import (
    allow_attribute,
    content_security_policy,
    granted,
    permissions_policy,
    refused,
)
from agent.tools.uimeta import tool_ui


def directives(csp: str) -> dict[str, str]:
    return {d.split(" ", 1)[0]: d.split(" ", 1)[1] for d in csp.split("; ")}


def test_no_metadata_gets_the_specs_restrictive_default() -> None:
    policy = directives(content_security_policy({}))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self' 'unsafe-inline' blob: data:"  # code it holds
    assert policy["img-src"] == "'self' data: blob:"
    assert policy["worker-src"] == "'self' blob: data:"  # PDF.js's worker: blob imports data
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
    assert policy["script-src"] == "'self' 'unsafe-inline' blob: data: https://*.cdn.example"
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
    assert policy["script-src"] == "'self' 'unsafe-inline' blob: data:"
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


def test_entries_for_this_machine_or_its_network_are_refused_each_with_its_reason() -> None:
    """Issue 29 #10: the page is served from 127.0.0.1, so nothing in the browser stands
    between it and a local service once its CSP names one (the browser test shows it)."""
    local = [
        "http://127.0.0.1:*",
        "http://127.0.0.1:5432",
        "http://127.1",  # browsers read these as 127.0.0.1 too
        "http://0x7f.0.0.1",
        "http://2130706433",
        "http://localhost:3000",
        "http://app.localhost",
        "https://printer.local",
        "http://[::1]:8080",
        "http://[::ffff:127.0.0.1]",
        "http://169.254.169.254",
        "http://10.0.0.8",
        "https://192.168.1.1",
        "https://100.64.0.1",
        "http://0.0.0.0:8000",
        "http://intranet",
        "https://127.0.0.1.nip.io",
        "https://*.com",
        "https://*.co.uk",
        "https://api.example:*",
        "169.254.169.254",
        "*",
    ]
    fine = ["https://api.weather.example", "wss://live.example:8443", "https://*.cdn.example"]
    ui = {"csp": {"connectDomains": local + fine, "frameDomains": ["http://[fe80::1]"]}}
    reasons = {entry: reason for _, entry, reason in refused(ui)}
    assert set(reasons) == {*local, "http://[fe80::1]"}
    assert reasons["http://127.0.0.1:*"] == "a loopback address (this machine)"
    assert reasons["http://169.254.169.254"].startswith("a link-local address")
    assert reasons["https://*.com"] == "a wildcard as wide as a top-level domain"
    assert reasons["https://api.example:*"] == "any port"
    policy = directives(content_security_policy(ui))
    assert policy["connect-src"] == " ".join(fine)
    assert policy["frame-src"] == "'none'"
    assert granted(ui)["csp"] == {"connectDomains": fine}


def test_webrtc_is_blocked_where_csp_can_and_undeclared_features_are_off() -> None:
    assert directives(content_security_policy({}))["webrtc"] == "'block'"
    features = permissions_policy({"permissions": {"camera": {}}}).split(", ")
    assert "camera=(self)" in features
    assert {"microphone=()", "geolocation=()", "display-capture=()", "usb=()"} <= set(features)
