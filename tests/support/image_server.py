"""A real MCP server (stdio) whose read-only tools return large and many images.

`screenshot` returns one PNG of `--big-mb` megabytes (default 20) each time it is called;
`contact_sheet` returns `--many` (default 500) distinct small PNGs in one result. The PNGs
are real files (signature, IHDR, stored-deflate IDAT, IEND) so their size can be read from
the header. Run as `python tests/support/image_server.py [--big-mb N] [--many N]`.
"""

from __future__ import annotations

import argparse
import base64
import os
import struct
import zlib

import mcp.types as types
from mcp.server.mcpserver import MCPServer


def png(width: int, height: int, payload: int) -> bytes:
    """A PNG of `width` x `height` whose IDAT holds `payload` random bytes (not a valid
    picture inside, but a valid file around it: what counts here is its size)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(os.urandom(payload), 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--big-mb", type=float, default=20)
    parser.add_argument("--many", type=int, default=500)
    parser.add_argument("--many-kb", type=int, default=48)
    args = parser.parse_args()
    big = base64.b64encode(png(2600, 2600, int(args.big_mb * 1024 * 1024))).decode("ascii")
    server = MCPServer("images")
    read_only = types.ToolAnnotations(read_only_hint=True)

    @server.tool(annotations=read_only)
    def screenshot(label: str = "") -> list[types.ContentBlock]:
        """A screenshot of the whole (very large) screen."""
        return [
            types.TextContent(text="the screen"),
            types.ImageContent(data=big, mime_type="image/png"),
        ]

    @server.tool(annotations=read_only)
    def contact_sheet() -> list[types.ContentBlock]:
        """Every picture of the album, one image each."""
        images: list[types.ContentBlock] = [types.TextContent(text=f"{args.many} pictures")]
        for _ in range(args.many):
            data = base64.b64encode(png(128, 128, args.many_kb * 1024)).decode("ascii")
            images.append(types.ImageContent(data=data, mime_type="image/png"))
        return images

    server.run("stdio")


if __name__ == "__main__":
    main()
