"""The private names of the mcp SDK that agent/common/sdk_private.py relies on are still there,
in the shape it uses them: a new SDK release that renames or reshapes one fails here, not
on a user's machine. pyproject pins the SDK to the minor version this passed on; to move
the pin, install the new version and run this file first.
"""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientMetadata
from mcp.shared.message import SessionMessage
from pydantic import AnyUrl

from agent.common.sdk_private import (
    ProviderHooks,
    absorb_tool_listing,
    send_raw_request,
    send_stamped_request,
)

PROVIDERS = [OAuthClientProvider, ClientCredentialsOAuthProvider]
# ProviderHooks' overrides: name -> (async generator?, parameters after self)
OVERRIDES = {
    "_initialize": (False, []),
    "_handle_token_response": (False, ["response"]),
    "_perform_authorization": (False, []),
    "_refresh_token": (False, []),
    "_handle_refresh_response": (False, ["response"]),
    "_auth_flow": (True, ["request"]),
}


def _params(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def _session() -> ClientSession:
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    write, _ = anyio.create_memory_object_stream[SessionMessage](1)
    return ClientSession(receive, write)


def test_a_session_has_the_dispatcher_and_stamp_we_send_raw_requests_with() -> None:
    session: Any = _session()
    assert inspect.iscoroutinefunction(session._dispatcher.send_raw_request)
    assert _params(session._dispatcher.send_raw_request)[:3] == ["method", "params", "opts"]
    assert callable(session._stamp) and len(_params(session._stamp)) == 2
    data: dict[str, Any] = {"method": "tasks/get", "params": {"taskId": "t"}}
    session._stamp(data, {})  # before the handshake: stamps nothing, raises nothing
    assert data["params"] == {"taskId": "t"}


def test_a_session_absorbs_a_tool_listing_it_did_not_read() -> None:
    absorb = ClientSession._absorb_tool_listing
    assert _params(absorb) == ["result", "complete"]
    assert inspect.signature(absorb).parameters["complete"].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.anyio
async def test_raw_requests_reach_a_real_server_and_come_back_as_json() -> None:
    server = MCPServer("contract")

    @server.tool()
    def echo(text: str) -> str:
        return text

    with anyio.fail_after(20):
        async with Client(server, mode="legacy") as client:
            stamped = await send_stamped_request(client.session, "tools/list", {}, timeout=5)
            raw = await send_raw_request(client.session, "tools/list", None)
            page = types.ListToolsResult.model_validate(raw, by_name=False)
            absorb_tool_listing(client.session, page, complete=True)
            result = await client.call_tool("echo", {"text": "hi"})
    assert [tool["name"] for tool in stamped["tools"]] == ["echo"]
    assert [tool.name for tool in page.tools] == ["echo"]
    assert result.content == [types.TextContent(text="hi")]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.__name__)
def test_the_oauth_steps_we_override_keep_their_shape(provider: type[OAuthClientProvider]) -> None:
    for name, (generator, params) in OVERRIDES.items():
        step = getattr(provider, name)
        is_right_kind = inspect.isasyncgenfunction if generator else inspect.iscoroutinefunction
        assert is_right_kind(step), f"{provider.__name__}.{name}"
        assert _params(step) == params, f"{provider.__name__}.{name}"
    assert _params(provider._add_auth_header) == ["request"]
    assert not inspect.iscoroutinefunction(provider._add_auth_header)


def test_the_oauth_flow_still_calls_the_steps_we_override() -> None:
    """An override is only a hook while the flow calls it."""
    flow_calls = set(OAuthClientProvider._auth_flow.__code__.co_names)
    assert set(OVERRIDES) - {"_auth_flow"} <= flow_calls
    assert {"_add_auth_header", "_initialized"} <= flow_calls
    assert "_auth_flow" in OAuthClientProvider.async_auth_flow.__code__.co_names


class _Storage:
    async def get_tokens(self) -> None: ...
    async def set_tokens(self, tokens: Any) -> None: ...
    async def get_client_info(self) -> None: ...
    async def set_client_info(self, info: Any) -> None: ...


def test_a_provider_keeps_its_context_and_initialized_flag() -> None:
    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")])
    provider = OAuthClientProvider("https://example.org/mcp", metadata, _Storage())
    assert vars(provider)["_initialized"] is False
    assert isinstance(provider.context, OAuthContext)
    fields = set(OAuthContext.__dataclass_fields__)
    assert {"token_expiry_time", "oauth_metadata", "client_metadata"} <= fields
    assert {"current_tokens", "client_info"} <= fields
    assert callable(provider.context.can_refresh_token)
    assert callable(provider.context.clear_tokens)


@pytest.mark.anyio
async def test_the_hooks_are_called_through_the_sdk_steps() -> None:
    """Our mixin in front of the SDK's provider: its `_initialize` reaches our hook, and a
    reset makes the flow read the store again."""
    called: list[str] = []

    class Hooked(ProviderHooks, OAuthClientProvider):
        async def after_initialize(self) -> None:
            called.append("after_initialize")

    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")])
    provider = Hooked("https://example.org/mcp", metadata, _Storage())
    flow = provider.async_auth_flow(httpx2.Request("GET", "https://example.org/mcp"))
    request = await flow.__anext__()
    await flow.aclose()
    assert str(request.url) == "https://example.org/mcp" and called == ["after_initialize"]
    provider.reread_store()
    assert vars(provider)["_initialized"] is False


def test_the_public_pieces_our_stdio_transport_builds_on_are_there() -> None:
    """Not private, but what agent/tools/mcp_stdio.py is written against."""
    from mcp import StdioServerParameters
    from mcp.client import Transport
    from mcp.client.stdio import get_default_environment

    assert Transport is not None and "PATH" in get_default_environment()
    fields = set(StdioServerParameters.model_fields)
    assert {"command", "args", "env", "cwd", "encoding", "encoding_error_handler"} <= fields
    assert callable(types.jsonrpc_message_adapter.validate_json)
