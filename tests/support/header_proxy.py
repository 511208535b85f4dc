"""A trusted reverse proxy for the browser tests of ``--auth header``: it forwards every HTTP request and the
websocket to a Streamlit server and sets one header on each, as nginx's ``proxy_set_header`` or oauth2-proxy does
in front of a real deployment.

Why not the browser's own extra headers: Streamlit reads the identity from the websocket's handshake
(``st.context.headers``), and the headless Chromium here (150, driven by Playwright 1.65) does not add a
context's extra HTTP headers to that handshake, so a test relying on them saw no user at all. A proxy is also
what the mode is for.

Built from what Streamlit's own server runs on (Starlette, uvicorn, websockets) plus requests; it runs in a
thread with its own event loop.
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import requests
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect

# hop-by-hop headers, and those that describe the upstream's encoding of a body requests has already decoded
_DROPPED = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _app(upstream: str, header: str, value: str) -> Starlette:
    async def forward(request: Request) -> Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        headers[header] = value
        body = await request.body()
        url = upstream + request.url.path + (f"?{request.url.query}" if request.url.query else "")
        answer = await anyio.to_thread.run_sync(lambda: requests.request(
            request.method, url, headers=headers, data=body or None, allow_redirects=False, timeout=300))
        out = Response(content=b"" if request.method == "HEAD" else answer.content, status_code=answer.status_code)
        for name in {n.lower() for n in answer.raw.headers} - _DROPPED:
            for item in answer.raw.headers.getlist(name):  # every Set-Cookie on its own line
                out.raw_headers.append((name.encode("latin-1"), item.encode("latin-1")))
        return out

    async def stream(ws: WebSocket) -> None:
        asked = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
        headers = {header: value}
        if "cookie" in ws.headers:
            headers["Cookie"] = ws.headers["cookie"]
        url = "ws" + upstream.removeprefix("http") + ws.url.path + (f"?{ws.url.query}" if ws.url.query else "")
        async with connect(url, additional_headers=headers, subprotocols=asked or None, max_size=None) as up:
            await ws.accept(subprotocol=up.subprotocol)

            async def down() -> None:
                async for message in up:
                    await (ws.send_bytes(message) if isinstance(message, bytes) else ws.send_text(message))

            async def upward() -> None:
                while (message := await ws.receive())["type"] != "websocket.disconnect":
                    await up.send(message["bytes"] if message.get("bytes") is not None else message["text"])

            tasks = [asyncio.create_task(down()), asyncio.create_task(upward())]
            _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()

    return Starlette(routes=[WebSocketRoute("/_stcore/stream", stream),
                             Route("/{path:path}", forward, methods=_METHODS)])


@contextmanager
def header_proxy(upstream: str, header: str, value: str) -> Iterator[str]:
    """The URL of a proxy in front of the Streamlit server at ``upstream`` that sets ``header: value``."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_app(upstream.rstrip("/"), header, value), log_level="warning",
                                           ws="websockets-sansio"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="header-proxy", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the header proxy did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
