"""The dashboard's token check, for a dashboard bound to an address others can reach."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qsl, quote, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_COOKIE = "launcher_ui_token"
TOKEN_HEADER = "x-launcher-token"


def same_origin_path(path: str) -> str:
    """A request's `path` (decoded, as in the ASGI scope) as a Location that stays on this
    origin: one leading slash (a browser reads `//host/` and `/\\host/` as another host's
    address), and every character a browser would read as part of an address, or drop (a
    tab, a newline), percent-encoded."""
    return "/" + quote(path.lstrip("/\\"), safe="/")


class TokenGate:
    """Every request must carry the token: an `Authorization: Bearer` or X-Launcher-Token
    header, the cookie, or `?token=` once (which sets the cookie; a page is then
    redirected to its address without the token, so it stays out of history and
    Referer headers)."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token

    def _set_cookie(self, response: Response) -> None:
        response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/")

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        if (
            self._ok(bearer)
            or self._ok(request.headers.get(TOKEN_HEADER))
            or self._ok(request.cookies.get(TOKEN_COOKIE))
        ):
            await self.app(scope, receive, send)
            return
        if self._ok(request.query_params.get("token")):
            if not request.url.path.startswith("/api/"):
                rest = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
                location = same_origin_path(scope["path"]) + (f"?{urlencode(rest)}" if rest else "")
                response: Response = RedirectResponse(location, 303)
                self._set_cookie(response)
                await response(scope, receive, send)
                return

            async def send_with_cookie(message: Message) -> None:
                if message["type"] == "http.response.start":
                    extra = Response()
                    self._set_cookie(extra)
                    message["headers"] = [*message.get("headers", []), *extra.raw_headers[-1:]]
                await send(message)

            await self.app(scope, receive, send_with_cookie)
            return
        await PlainTextResponse(
            "401: this dashboard needs its token: open the address `launcher ui` printed, "
            "or send the X-Launcher-Token header",
            401,
        )(scope, receive, send)
