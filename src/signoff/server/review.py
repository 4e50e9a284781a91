"""The review page an approval email links to (`channels.review.PATH` + token), and its Approve and Deny.

GET never decides: mail scanners and link previews follow links. It shows the call as the inbox does, who
asked, the quorum so far, and a plain HTML form whose POST decides, JavaScript or not (`server.review_page`
renders it; its one script, from /static/, only makes the deadline count down). The POST must come
from that page: a same-origin `Origin` (or, failing it, `Referer`) and the page's nonce. Its body is read
into one typed form before anything else, so a form no page of ours sends is a 400 that decides nothing.

The link is a bearer credential: its decision is that of the principal it names, identified through the
ledger's proven path (`Principals.named`: a record that proves itself, active, still linked to email),
`via` email, judged by the approval's rule with the principal's roles as they are now, exactly as the REST
API judges one. It decides once: its first decision spends it (`core.approval.again`), and the page then
says what was decided and sends the person to the inbox, where changing their mind takes a credential of
their own.

A link that is not genuine is a 404 page, counted as an unanswered refusal; a genuine one that is expired,
for a call that changed, spent or named for someone who no longer may is a page that says so, and an
audit entry in its principal's name. Every status comes from the server's one table (`http.status_of`).
"""

from __future__ import annotations

import html
from typing import Annotated, Literal
from urllib.parse import parse_qsl

import msgspec
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.channels.review import PATH, PURPOSE, Review, nonce, read
from signoff.core.approval import Approval, State
from signoff.core.decision import Decision
from signoff.core.errors import AlreadyDecided, CallMismatch, NotFound, SignoffError
from signoff.core.policy import Policy
from signoff.core.principal import Proven
from signoff.ledger.base import Ledger
from signoff.server.auth import client_of
from signoff.server.edge import same_origin
from signoff.server.http import SERVED, BadInput, Forbidden, LinkGone, status_of
from signoff.server.refusals import Refusals
from signoff.server.review_page import card, form, page

MAX_REASON = 2000
HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; form-action 'self';"
    " frame-ancestors 'none'",  # the page's script and stylesheet come from /static/, nothing inline
    "referrer-policy": "same-origin",  # the token in the path never leaves for another site
    "x-frame-options": "DENY",
}


class ReviewForm(msgspec.Struct, forbid_unknown_fields=True):
    """What the review page's form posts, and nothing else."""

    nonce: str
    decision: Literal["approve", "deny"]
    reason: Annotated[str, msgspec.Meta(max_length=MAX_REASON)] = ""

    @classmethod
    def of(cls, body: bytes) -> ReviewForm:
        """The form in `body`; `BadInput` for anything the page does not send (a field twice, one it has
        not, a choice other than Approve or Deny, bytes that are not UTF-8)."""
        try:
            most = len(cls.__struct_fields__)
            fields = parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=most)
        except (UnicodeDecodeError, ValueError):
            raise BadInput("the form is not the review page's") from None
        given = dict(fields)
        if len(given) != len(fields):
            raise BadInput("the form gives a field twice")
        try:
            return msgspec.convert(given, cls)
        except msgspec.ValidationError as exc:
            raise BadInput(f"the form is not the review page's: {exc}") from None


class EmailReview:
    def __init__(self, ledger: Ledger, policy: Policy, refusals: Refusals) -> None:
        self.ledger = ledger
        self.policy = policy
        self.refusals = refusals
        self.keys = ledger.audit.keyring.derived(PURPOSE)

    def routes(self) -> list[BaseRoute]:
        path = f"{PATH}{{token}}"
        return [Route(path, self.show, methods=["GET"]), Route(path, self.decide, methods=["POST"])]

    async def show(self, request: Request) -> Response:
        token = request.path_params["token"]
        try:
            review, approval = await self._open(request, token)
        except SignoffError as refused:
            return _refused("This link cannot be used", refused)
        now = self.ledger.approvals.clock()
        return _page("Review an approval", card(approval, now, self._form(token, review, approval)))

    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        try:
            review, approval = await self._open(request, token)
            try:
                form = ReviewForm.of(await request.body())
            except BadInput as bad:
                raise await self._refuse(review, bad) from None
            if not self._same_site(request) or form.nonce != nonce(self.keys, token):
                raise await self._refuse(review, Forbidden("the form did not come from its review page"))
            proven = await self._proven(review)
            decision = Decision.of(form.decision == "approve", proven, form.reason)
            after = await self.ledger.approvals.decide(approval.id, decision, policy=self.policy)
        except AlreadyDecided as lost:  # audited by the ledger
            return _refused("Nothing was decided", lost, _settled(lost.winner))
        except SignoffError as refused:  # not genuine, expired, spent, not an approver now: audited
            return _refused("Nothing was decided", refused)
        said = "approved" if form.decision == "approve" else "denied"
        now = self.ledger.approvals.clock()
        return _page(f"You {said} it", f"<p>Thank you.</p>{card(after, now, _inbox(after))}")

    async def _open(self, request: Request, token: str) -> tuple[Review, Approval]:
        """The genuine, unexpired review `token` grants, and its approval as asked when it was sent."""
        review = read(self.keys, token)
        if review is None:
            why = "an email review link that no key of this ledger made"
            self.refusals.note("refuse", "email-link", client_of(request), "bad-link", why, PATH)
            raise NotFound("This link is not one of this server's.")
        try:
            approval = await self.ledger.approvals.get(review.approval)
        except NotFound:
            raise await self._refuse(review, NotFound("its approval is not in the ledger")) from None
        if self.ledger.approvals.clock() > review.expires:
            raise await self._refuse(review, LinkGone("the link expired"))
        if approval.approved_digest != review.digest:
            raise await self._refuse(review, CallMismatch("the call changed since the email was sent"))
        return review, approval

    async def _proven(self, review: Review) -> Proven:
        """The principal the link names, proven now, as the bearer of this very link."""
        proven = await self.ledger.principals.named(review.principal, "email", spends=_spends(review))
        if proven is None:
            why = "its principal is not registered, is revoked, is no longer linked to email, or unproven"
            raise await self._refuse(review, Forbidden(why))
        return proven

    async def _refuse(self, review: Review, refused: SignoffError) -> SignoffError:
        await self.ledger.audit.record(
            "refuse", review.approval, review.principal, why=str(refused), via="email", notice=review.notice
        )
        return refused

    def _same_site(self, request: Request) -> bool:
        host = request.headers.get("host", "")
        origin = request.headers.get("origin") or request.headers.get("referer")
        return origin is not None and same_origin(origin, host)

    def _form(self, token: str, review: Review, approval: Approval) -> str:
        if _spends(review) in approval.spent:
            return f"<p>This link was used already: it decides nothing more.</p>{_settled(approval)}"
        if approval.state is not State.PENDING:
            return _settled(approval)
        if approval.voted(review.principal):
            return f"<p>Your approval is counted; it waits for the others.</p>{_inbox(approval)}"
        return form(nonce(self.keys, token), MAX_REASON)


def _spends(review: Review) -> str:
    """The credential a link is, one per notice and approver: a reminder's link is another."""
    return f"email:{review.notice}/{review.principal}"


def _settled(approval: Approval) -> str:
    if approval.state is State.PENDING:
        return f"<p>It waits for {html.escape(approval.awaited)}.</p>{_inbox(approval)}"
    by = approval.settled_by(owner="the requester")
    return f"<p>It is {approval.state} already, by {html.escape(by)}.</p>"


def _inbox(approval: Approval) -> str:
    """Where a person who changes their mind goes: the inbox, signed in with their own credential."""
    return (
        f"<p>To change your mind, sign in to the <a href='/approvals#{html.escape(approval.id)}'>approvals"
        " inbox</a> and decide there.</p>"
        if approval.state is State.PENDING
        else ""
    )


def _refused(title: str, refused: SignoffError, said: str = "") -> Response:
    """The refusal as a page, with its status from the server's one table; a kind the table lacks is a
    bug, and the server's 500."""
    status = status_of(refused)
    if status is None:
        raise refused
    return _page(title, said or f"<p>{html.escape(str(refused))}</p>", status)


def _page(title: str, body: str, status: int = SERVED) -> Response:
    return HTMLResponse(page(title, body), status, headers=HEADERS)
