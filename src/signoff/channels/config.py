"""The channels file (`--channels FILE`): where approvals are announced, each channel a TOML table.

```toml
public_url = "https://signoff.example.com"   # where links in messages point; the server's own by default

[webhook.ops]
url = "https://ops.example.com/hooks/signoff"
secret_env = "SIGNOFF_WEBHOOK_OPS"           # whsec_<base64>, as Standard Webhooks defines it
```

Secrets never sit in the file: it names the environment variables that hold them, so the file can be
reviewed and versioned. Everything is checked before a server starts, and the first fault refuses to
start it with one line naming the key: an unknown key, a missing secret, a malformed URL, or a webhook
aimed at a private address it was not allowed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from yarl import URL

from signoff.channels.addresses import refused_host
from signoff.core.errors import SignoffError
from signoff.core.policy import Policy
from signoff.core.rule_settings import CHANNEL_NAME, Invalid, parse_duration

DEFAULT_RETRY_SCHEDULE = (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 36000.0)
"""The Standard Webhooks retry schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after each failure."""
GIVE_UP_AFTER = 86400.0


class ChannelsError(SignoffError, ValueError):
    """The channels file is wrong; the message names the file and the key."""


@dataclass(frozen=True)
class WebhookChannel:
    name: str
    url: str
    secret: str = field(repr=False)
    allow_private: bool = False
    retry_schedule: tuple[float, ...] = DEFAULT_RETRY_SCHEDULE
    give_up_after: float = GIVE_UP_AFTER


@dataclass(frozen=True)
class EmailChannel:
    name: str
    smtp: str
    sender: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SlackChannel:
    name: str
    channel: str
    token: str = field(repr=False)
    signing_secret: str = field(repr=False)
    api_url: str = "https://slack.com/api/"


Channel = WebhookChannel | EmailChannel | SlackChannel


@dataclass(frozen=True)
class Channels:
    """Every channel by its name in a rule's `notify` (`webhook:ops`)."""

    by_name: Mapping[str, Channel] = field(default_factory=dict)
    public_url: str | None = None

    def check(self, policy: Policy) -> None:
        """Refuse a policy whose rules notify a channel this file does not define."""
        for tool, rules in policy.rules.items():
            for index, each in enumerate(rules):
                for name in each.notify:
                    if name not in self.by_name:
                        known = ", ".join(sorted(self.by_name)) or "none"
                        raise ChannelsError(
                            f"policy rule {tool}[{index}] notifies {name}, which the channels file does not"
                            f" define (defined: {known})"
                        )


def load_channels(path: str | Path, environ: Mapping[str, str]) -> Channels:
    """The channels in the file at `path`, their secrets read from `environ`."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ChannelsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_channels(text, str(path), environ)


def parse_channels(text: str, source: str, environ: Mapping[str, str]) -> Channels:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ChannelsError(f"{source}: invalid TOML: {exc}") from None
    reader = _Reader(source, environ)
    for key in data:
        if key not in ("public_url", *_KINDS):
            reader.fail(key, f"unknown key (expected public_url, {', '.join(_KINDS)})")
    public_url = data.get("public_url")
    if public_url is not None:
        public_url = reader.url("public_url", public_url, ("http", "https")).rstrip("/")
    found: dict[str, Channel] = {}
    for kind, make in _KINDS.items():
        tables = data.get(kind, {})
        if not isinstance(tables, dict):
            reader.fail(kind, f"must be tables such as [{kind}.NAME]")
        for name, table in tables.items():
            path = f"{kind}.{name}"
            if not CHANNEL_NAME.fullmatch(name):
                reader.fail(path, "a channel's name is letters, digits, - and _, at most 64")
            if not isinstance(table, dict):
                reader.fail(path, "must be a table")
            found[f"{kind}:{name}"] = make(reader, path, name, table)
    return Channels(found, public_url)


class _Reader:
    def __init__(self, source: str, environ: Mapping[str, str]) -> None:
        self.source = source
        self.environ = environ

    def fail(self, path: str, message: str) -> NoReturn:
        raise ChannelsError(f"{self.source}: {path}: {message}")

    def keys(
        self, path: str, table: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...]
    ) -> None:
        for key in table:
            if key not in required + optional:
                self.fail(f"{path}.{key}", f"unknown key (expected {', '.join(required + optional)})")
        for key in required:
            if key not in table:
                self.fail(f"{path}.{key}", "is required")

    def text(self, path: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, f"must be a non-empty string, not {value!r}")
        return str(value)

    def secret(self, path: str, value: Any) -> str:
        """The secret in the environment variable that `value` names."""
        name = self.text(path, value)
        secret = self.environ.get(name)
        if not secret:
            self.fail(path, f"the environment variable {name} is not set")
        return str(secret)

    def url(self, path: str, value: Any, schemes: tuple[str, ...]) -> str:
        url = self.text(path, value)
        parts = urlsplit(url)
        if parts.scheme not in schemes or not parts.hostname:
            self.fail(path, f"{url!r} is not a {' or '.join(s + '://' for s in schemes)} URL with a host")
        try:
            parts.port  # noqa: B018 - a malformed port raises here
        except ValueError:
            self.fail(path, f"{url!r} has a malformed port")
        return url

    def flag(self, path: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(path, f"must be true or false, not {value!r}")
        return bool(value)

    def duration(self, path: str, value: Any) -> float:
        try:
            return parse_duration(value)
        except (Invalid, TypeError, ValueError) as exc:
            self.fail(path, str(exc))


def _webhook(reader: _Reader, path: str, name: str, table: Mapping[str, Any]) -> WebhookChannel:
    reader.keys(path, table, ("url", "secret_env"), ("allow_private", "retry_schedule", "give_up_after"))
    url = reader.url(f"{path}.url", table["url"], ("http", "https"))
    try:
        host = URL(url).raw_host or ""  # the host aiohttp connects to, which yarl may have folded
    except ValueError as exc:
        reader.fail(f"{path}.url", f"{url!r} is malformed: {exc}")
    secret = reader.secret(f"{path}.secret_env", table["secret_env"])
    if not secret.startswith("whsec_"):
        reader.fail(f"{path}.secret_env", "the secret must be whsec_ and base64, as Standard Webhooks has it")
    try:
        from standardwebhooks.webhooks import Webhook

        Webhook(secret)
    except Exception:  # the library raises what base64 does on a malformed secret
        reader.fail(f"{path}.secret_env", "the secret after whsec_ is not base64")
    allow_private = reader.flag(f"{path}.allow_private", table.get("allow_private", False))
    if not allow_private and (why := refused_host(host)):
        reader.fail(f"{path}.url", f"{url} {why}; set allow_private = true to allow it")
    schedule = table.get("retry_schedule", DEFAULT_RETRY_SCHEDULE)
    if isinstance(schedule, str) or not isinstance(schedule, list | tuple) or not schedule:
        reader.fail(f"{path}.retry_schedule", 'must be a list of durations such as ["5s", "5m"]')
    delays = tuple(reader.duration(f"{path}.retry_schedule", delay) for delay in schedule)
    give_up = reader.duration(f"{path}.give_up_after", table.get("give_up_after", GIVE_UP_AFTER))
    return WebhookChannel(name, url, secret, allow_private, delays, give_up)


def _email(reader: _Reader, path: str, name: str, table: Mapping[str, Any]) -> EmailChannel:
    reader.keys(path, table, ("smtp", "from"), ("username_env", "password_env"))
    smtp = reader.url(f"{path}.smtp", table["smtp"], ("smtp", "smtps"))
    sender = reader.text(f"{path}.from", table["from"])
    if ("username_env" in table) != ("password_env" in table):
        reader.fail(path, "username_env and password_env go together")
    username = password = None
    if "username_env" in table:
        username = reader.secret(f"{path}.username_env", table["username_env"])
        password = reader.secret(f"{path}.password_env", table["password_env"])
    return EmailChannel(name, smtp, sender, username, password)


def _slack(reader: _Reader, path: str, name: str, table: Mapping[str, Any]) -> SlackChannel:
    reader.keys(path, table, ("channel", "token_env", "signing_secret_env"), ("api_url",))
    channel = reader.text(f"{path}.channel", table["channel"])
    token = reader.secret(f"{path}.token_env", table["token_env"])
    signing = reader.secret(f"{path}.signing_secret_env", table["signing_secret_env"])
    api_url = reader.url(f"{path}.api_url", table.get("api_url", "https://slack.com/api/"), ("http", "https"))
    return SlackChannel(name, channel, token, signing, api_url.rstrip("/") + "/")


_KINDS: dict[str, Callable[[_Reader, str, str, Mapping[str, Any]], Channel]] = {
    "webhook": _webhook,
    "email": _email,
    "slack": _slack,
}
