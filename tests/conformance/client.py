"""Conformance client for @modelcontextprotocol/conformance, built on the agent's own layer.

The runner appends the server URL as the last argument, names the scenario in
MCP_CONFORMANCE_SCENARIO, the spec revision its mock speaks in
MCP_CONFORMANCE_PROTOCOL_VERSION, and passes scenario data (pre-registered clients, client
credentials, tool calls to replay) as JSON in MCP_CONFORMANCE_CONTEXT. We connect through
MCPServerConnection with the login a user would configure (`oauth`), and the authorization
URL is answered the way a headless browser would: fetched, its redirects followed to our
own loopback callback.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.auth.login import LoginHost  # noqa: E402
from agent.config.settings import OAuthConfig, ServerConfig  # noqa: E402
from agent.tools.mcp import ClientCallbacks, MCPServerConnection, roots_callback  # noqa: E402

CONTEXT: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
VERSION = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
# A client ID metadata document the mock authorization servers accept (they never fetch it).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
STUB_BY_TYPE: dict[str | None, Any] = {"string": "x", "integer": 0, "number": 0, "boolean": False}


def mode_for(scenario: str) -> Literal["legacy", "auto"] | None:
    """The era the scenario's mock speaks; None lets the connection decide (legacy first)."""
    if scenario == "json-schema-ref-no-deref":
        return "legacy"  # its mock speaks only the handshake era whatever the version says
    if VERSION in MODERN_PROTOCOL_VERSIONS:
        return "auto"  # discover first, as a modern client does (the mock checks it)
    return "legacy" if VERSION else None


def oauth_for(scenario: str) -> OAuthConfig | bool:
    """The `oauth` setting a user would write for this scenario's server."""
    if scenario.startswith("auth/client-credentials-basic"):
        return OAuthConfig(
            grant="client_credentials",
            client_id=CONTEXT["client_id"],
            client_secret=CONTEXT["client_secret"],
        )
    if scenario.startswith("auth/") and CONTEXT.get("client_id"):  # pre-registered client
        return OAuthConfig(
            client_id=CONTEXT["client_id"],
            client_secret=CONTEXT.get("client_secret"),
            client_metadata_url=CIMD_URL,
        )
    return OAuthConfig(client_metadata_url=CIMD_URL)


async def follow_authorization(url: str) -> None:
    """A headless browser: no person to ask, so follow the redirects to the callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as http:
        await http.get(url)


async def accept_defaults(context: Any, params: Any) -> types.ElicitResult:
    """Accept a form elicitation, filling every field that has a schema default."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        key: prop["default"]
        for key, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict) and "default" in prop
    }
    if SCENARIO == "sep-2322-client-request-state":
        content.setdefault("confirmed", True)
    return types.ElicitResult(action="accept", content=content)


async def canned_sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="conformance"), model="conformance"
    )


def stub_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Minimal arguments that satisfy a tool's required properties."""
    props = schema.get("properties") or {}
    return {
        name: STUB_BY_TYPE.get((props.get(name) or {}).get("type"), "x")
        for name in schema.get("required") or []
    }


def calls_for(scenario: str, tools: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """What the scenario expects the client to call, from what the server listed."""
    if CONTEXT.get("toolCalls"):  # the runner says exactly what to send
        return [(c["name"], c.get("arguments") or {}) for c in CONTEXT["toolCalls"]]
    fixed: dict[str, list[tuple[str, dict[str, Any]]]] = {
        "tools_call": [("add_numbers", {"a": 5, "b": 3})],
        "request-metadata": [("add_numbers", {"a": 5, "b": 3})],
        "http-standard-headers": [("add_numbers", {"a": 5, "b": 3})],
        "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
        "sse-retry": [("test_reconnection", {})],
        "sep-2322-client-request-state": [
            (name, {})
            for name in (
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            )
        ],
    }
    if scenario in fixed:
        return fixed[scenario]
    if scenario == "json-schema-2020-12-preservation":
        focal = tools.get("json_schema_2020_12_tool", {})
        return [("json_schema_echo", {"schema": focal})]
    if scenario == "http-invalid-tool-headers":
        return [(name, stub_arguments(schema)) for name, schema in tools.items()]
    if scenario.startswith("auth/") and tools:  # any tool shows the token is accepted
        name, schema = next(iter(tools.items()))
        return [(name, stub_arguments(schema))]
    return []


def extension_auth(scenario: str, url: str) -> httpx2.Auth | None:
    """The SDK's providers for the flows `oauth` does not configure (see README)."""
    if scenario == "auth/client-credentials-jwt":
        from mcp.client.auth.extensions.client_credentials import (
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        jwt = SignedJWTParameters(
            issuer=CONTEXT["client_id"],
            subject=CONTEXT["client_id"],
            signing_algorithm=CONTEXT.get("signing_algorithm", "ES256"),
            signing_key=CONTEXT["private_key_pem"],
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=MemoryStorage(),
            client_id=CONTEXT["client_id"],
            assertion_provider=jwt.create_assertion_provider(),
        )
    if scenario == "auth/enterprise-managed-authorization":
        return enterprise_auth(url)
    return None


def enterprise_auth(url: str) -> httpx2.Auth:
    """SEP-990: an ID-JAG from the enterprise IdP, exchanged at the MCP authorization server."""
    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
    from mcp.client.auth.utils import build_protected_resource_metadata_discovery_urls

    prm_url = build_protected_resource_metadata_discovery_urls(None, url)[0]
    issuer = httpx2.get(prm_url, timeout=20).raise_for_status().json()["authorization_servers"][0]

    async def fetch_id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=20) as http:
            answer = await http.post(
                CONTEXT["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": CONTEXT["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": CONTEXT["idp_client_id"],
                },
            )
            return str(answer.raise_for_status().json()["access_token"])

    return IdentityAssertionOAuthProvider(
        server_url=url,
        storage=MemoryStorage(),
        client_id=CONTEXT["client_id"],
        client_secret=CONTEXT["client_secret"],
        issuer=issuer,
        assertion_provider=fetch_id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )


class MemoryStorage:
    """Token storage for the SDK-only providers above (nothing to keep after the run)."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def main(url: str, scenario: str) -> int:
    state = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))  # a fresh token store per run
    config = ServerConfig(
        name="conformance", type="http", url=url, mode=mode_for(scenario), oauth=oauth_for(scenario)
    )
    callbacks = ClientCallbacks(
        sampling=canned_sampling,
        elicitation=accept_defaults,
        list_roots=roots_callback([Path.cwd()]),
    )
    server = MCPServerConnection(
        config,
        connect_timeout=20,
        log_dir=state / "logs",
        callbacks=callbacks,
        login=LoginHost(interactive=True, browser=follow_authorization),
        auth=extension_auth(scenario, url),
    )
    async with anyio.create_task_group() as tg:
        try:
            await server.start(tg)
            tools = {t.name: t.input_schema for t in await server.list_tools()}
            for name, arguments in calls_for(scenario, tools):
                if name in tools:
                    try:  # as the agent does, one failing call does not end the run
                        result = await server.call_tool(name, arguments, timeout=30)
                    except Exception as exc:
                        print(f"{name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                    else:
                        print(f"{name}: is_error={result.is_error}")
        finally:
            await server.close()
    return 0


SCENARIO = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")

if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1], SCENARIO))
