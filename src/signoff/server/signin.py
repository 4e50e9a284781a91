"""Signing in on the page, so a server without `--anonymous-chats` is never a dead end in a browser.

- `GET /api/session`: who the request is from, and how one may sign in here (a token; the issuer's login
  where one is configured).
- `POST /api/session` `{"token": …}`: the same tokens a bearer header takes, checked by the same edge
  code (`Authenticator.sign_in`), answered with a login cookie (see `server.login`); `DELETE` signs out.
- `GET /auth/login?next=PATH`: the authorization code flow with PKCE (S256) at the OIDC issuer, through
  Authlib's Starlette client, which keeps its state, nonce and verifier in a short-lived session cookie of
  its own. `GET /auth/callback`: Authlib takes the code back and checks the ID token (signature against
  the issuer's keys, issuer, audience, nonce, expiry); its subject is then signed in as `oidc:<sub>`, with
  the roles its roles claim holds, as a bearer JWT from that issuer would be, and the browser goes back
  to `next`, a path on this server only.

A sign-in refused, or an issuer's answer that proves nobody, is audited like any refused credential.
"""

from __future__ import annotations

from typing import Any

import msgspec
from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import OAuth
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core.principal import Principal
from signoff.core.views import principal_json
from signoff.server.auth import Authenticator, principal_of
from signoff.server.http import DECISION_BODY, json_response, read_body
from signoff.server.login import LOGIN_COOKIE, LoginCookies, OidcLogin, bound_to, local_path, set_login
from signoff.server.oidc import claimed

CALLBACK = "/auth/callback"
OAUTH_SESSION = "signoff_oauth"
"""The cookie Authlib keeps a login's state in, between the redirect and the callback."""


class TokenBody(msgspec.Struct, forbid_unknown_fields=True):
    token: str


class SignIn:
    def __init__(self, auth: Authenticator, cookies: LoginCookies, login: OidcLogin | None) -> None:
        self.auth = auth
        self.cookies = cookies
        self.login = login
        self.oauth = OAuth()
        if login is not None:
            self.oauth.register(
                "issuer",
                client_id=login.client_id,
                client_secret=login.client_secret or None,
                server_metadata_url=f"{login.issuer.rstrip('/')}/.well-known/openid-configuration",
                client_kwargs={"scope": "openid profile email", "code_challenge_method": "S256"},
            )

    @staticmethod
    def state(key: bytes) -> Middleware:
        """Where Authlib keeps a login's state, nonce and PKCE verifier between the redirect and the
        callback: Starlette's signed session cookie, for ten minutes, sent back only to this site."""
        return Middleware(
            SessionMiddleware,
            secret_key=key.hex(),
            session_cookie=OAUTH_SESSION,
            max_age=600,
            same_site="lax",
        )

    def routes(self) -> list[BaseRoute]:
        session = Route("/api/session", self.session, methods=["GET", "POST", "DELETE"])
        if self.login is None:
            return [session]
        return [
            session,
            Route("/auth/login", self.begin, methods=["GET"]),
            Route(CALLBACK, self.callback, methods=["GET"], name="signoff-callback"),
        ]

    async def session(self, request: Request) -> Response:
        if request.method == "POST":
            body = await read_body(request, TokenBody, limit=DECISION_BODY, what="sign-in")
            principal = await self.auth.sign_in(request, body.token)
            bound = bound_to(body.token) if principal.via == "bootstrap" else ""
            return self._signed_in(request, principal, json_response(principal_json(principal)), bound)
        if request.method == "DELETE":
            answer = json_response({"signed_out": True})
            answer.delete_cookie(LOGIN_COOKIE, path="/")
            return answer
        me = principal_of(request)
        ways: dict[str, Any] = {"token": True}
        if self.login is not None:
            ways["oidc"] = {"issuer": self.login.issuer, "login": "/auth/login"}
        return json_response({"principal": principal_json(me) if me else None, "sign_in": ways})

    async def begin(self, request: Request) -> Response:
        request.session["next"] = local_path(request.query_params.get("next"))
        client = self.oauth.create_client("issuer")
        answer: Response = await client.authorize_redirect(request, str(request.url_for("signoff-callback")))
        return answer

    async def callback(self, request: Request) -> Response:
        assert self.login is not None
        client = self.oauth.create_client("issuer")
        try:
            token = await client.authorize_access_token(request)
        except OAuthError as exc:
            raise self.auth.refused(request, "oidc-invalid", f"the issuer's login failed: {exc}") from None
        claims = token.get("userinfo") or {}
        if not claims.get("sub"):
            raise self.auth.refused(request, "oidc-invalid", "the issuer's login names no subject")
        principal = claimed(claims, self.login.roles_claim)
        back = RedirectResponse(local_path(request.session.pop("next", "/")))
        return self._signed_in(request, principal, back)

    def _signed_in(
        self, request: Request, principal: Principal, answer: Response, bound: str = ""
    ) -> Response:
        set_login(answer, self.cookies.make(principal, bound=bound), secure=request.url.scheme == "https")
        return answer
