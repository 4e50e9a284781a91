"""`/approvals/email/{token}`: the page an approval email links to, and its Approve and Deny buttons.

GET never decides: mail scanners and link previews follow links. It shows the call as the inbox does,
who asked, the quorum so far, and a plain HTML form (no JavaScript) whose POST decides. The POST must come
from that page: a same-origin `Origin` (or, failing it, `Referer`) and the page's nonce. The decision is
the token's principal's, `via` email, judged by the approval's rule with the principal's roles as they
are now, exactly as the REST API judges one (see `channels.review` for the token).

A link that is not genuine is a 404 page, counted as an unanswered refusal; a genuine one that is
expired, for a call that changed, or replayed after its decision is a page that says so, and an audit
entry in its principal's name.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.channels.review import PURPOSE, Review, details_html, nonce, read
from signoff.core.approval import Approval, State
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyDecided, NotFound, SignoffError
from signoff.core.policy import Policy
from signoff.core.principal import Principal
from signoff.ledger.base import Ledger
from signoff.server.auth import client_of
from signoff.server.edge import same_origin
from signoff.server.refusals import Refusals

MAX_REASON = 2000
HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self';"
    " frame-ancestors 'none'",
    "referrer-policy": "same-origin",  # the token in the path never leaves for another site
    "x-frame-options": "DENY",
}
STYLE = "body{font:16px system-ui;max-width:40em;margin:2em auto;padding:0 1em}pre{white-space:pre-wrap}"


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


class EmailReview:
    def __init__(self, ledger: Ledger, policy: Policy, refusals: Refusals) -> None:
        self.ledger = ledger
        self.policy = policy
        self.refusals = refusals
        self.keys = ledger.audit.keyring.derived(PURPOSE)

    def routes(self) -> list[BaseRoute]:
        path = "/approvals/email/{token}"
        return [Route(path, self.show, methods=["GET"]), Route(path, self.decide, methods=["POST"])]

    async def show(self, request: Request) -> Response:
        token = request.path_params["token"]
        try:
            review, approval = await self._open(request, token)
        except _Refused as refused:
            return _page("This link cannot be used", f"<p>{html.escape(refused.message)}</p>", refused.status)
        return _page("Review an approval", details_html(approval) + self._form(token, review, approval))

    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        try:
            review, approval = await self._open(request, token)
            form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
            if not self._same_site(request) or form.get("nonce", [""])[0] != nonce(self.keys, token):
                raise await self._refuse(review, "the form did not come from its review page", 403)
            choice, reason = form.get("decision", [""])[0], form.get("reason", [""])[0][:MAX_REASON]
            if choice not in ("approve", "deny"):
                raise _Refused(400, "choose Approve or Deny")
            principal = await self._principal(review)
            decision = Decision.of(choice == "approve", principal, reason)
            after = await self.ledger.approvals.decide(approval.id, decision, policy=self.policy)
        except _Refused as refused:
            return _page("Nothing was decided", f"<p>{html.escape(refused.message)}</p>", refused.status)
        except AlreadyDecided as lost:
            await self.ledger.audit.record(
                "refuse", approval.id, review.principal, why=str(lost), via="email"
            )
            return _page("Nothing was decided", f"<p>{html.escape(_settled(lost.winner))}</p>", 409)
        except SignoffError as exc:  # not an approver now, voted already, unproven: audited by the ledger
            return _page("Nothing was decided", f"<p>{html.escape(str(exc))}</p>", 403)
        said = "approved" if choice == "approve" else "denied"
        return _page(f"You {said} it", f"<p>Thank you.</p>{details_html(after)}")

    async def _open(self, request: Request, token: str) -> tuple[Review, Approval]:
        """The genuine, unexpired review `token` grants, and its approval as asked when it was sent."""
        review = read(self.keys, token)
        if review is None:
            why = "an email review link that no key of this ledger made"
            self.refusals.note("refuse", "email-link", client_of(request), "bad-link", why, request.url.path)
            raise _Refused(404, "This link is not one of this server's.")
        try:
            approval = await self.ledger.approvals.get(review.approval)
        except NotFound:
            raise await self._refuse(review, "its approval is not in the ledger", 404) from None
        if self.ledger.approvals.clock() > review.expires:
            raise await self._refuse(review, "the link expired", 410)
        if approval.approved_digest != review.digest:
            raise await self._refuse(review, "the call changed since the email was sent", 409)
        return review, approval

    async def _principal(self, review: Review) -> Principal:
        try:
            registered = await self.ledger.principals.get(review.principal)
        except NotFound:
            raise await self._refuse(review, "its principal is not registered", 403) from None
        if not registered.active or not registered.email:
            raise await self._refuse(review, "its principal is revoked or no longer linked to email", 403)
        return msgspec.structs.replace(registered.principal, via="email")

    async def _refuse(self, review: Review, why: str, status: int) -> _Refused:
        await self.ledger.audit.record(
            "refuse", review.approval, review.principal, why=why, via="email", notice=review.notice
        )
        return _Refused(status, f"Nothing was decided: {why}.")

    def _same_site(self, request: Request) -> bool:
        host = request.headers.get("host", "")
        origin = request.headers.get("origin") or request.headers.get("referer")
        return origin is not None and same_origin(origin, host)

    def _form(self, token: str, review: Review, approval: Approval) -> str:
        if approval.state is not State.PENDING:
            return f"<p>{html.escape(_settled(approval))}</p>"
        voted = any(v.decision.by == review.principal for v in approval.votes)
        if voted:
            return "<p>Your approval is counted; it waits for the others.</p>"
        hidden = f"<input type='hidden' name='nonce' value='{html.escape(nonce(self.keys, token))}'>"
        return (
            f"<form method='post'>{hidden}"
            "<p><label>Reason (optional)<br>"
            "<textarea name='reason' rows='3' cols='50'></textarea></label></p>"
            "<button name='decision' value='approve'>Approve</button> "
            "<button name='decision' value='deny'>Deny</button></form>"
        )


def _settled(approval: Approval) -> str:
    return f"It is {approval.state} already, by {approval.settled_by(owner='the requester')}."


def _page(title: str, body: str, status: int = 200) -> Response:
    text = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(text, status, headers=HEADERS)
