"""The REST API's OpenAPI 3.1 description, fuzzed by schemathesis against a real `signoff demo`: bounded
examples per operation, with and without the admin token; no answer may be a server error. Event streams
(tagged `stream`) never end by themselves and are exercised by their own tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from signoff.server.openapi import openapi
from tests.servers import DemoServer, demo_server

schema = schemathesis.openapi.from_dict(openapi()).exclude(tag="stream")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    with demo_server(tmp_path_factory.mktemp("openapi")) as running:
        message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "pay 50 USD to Hanako"}]}
        httpx.post(
            f"{running.api}", json={"id": "c1", "messages": [message]}, timeout=30
        )  # something to find
        yield running


def test_the_server_serves_the_description(demo: DemoServer) -> None:
    served = httpx.get(f"{demo.base}/api/openapi.json", timeout=10)
    assert served.status_code == 200 and served.json() == httpx.Response(200, json=openapi()).json()
    assert served.json()["openapi"] == "3.1.0" and len(served.json()["paths"]) == 18


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@pytest.mark.parametrize("credential", ["admin", "none"])
def test_no_input_is_a_server_error(case: schemathesis.Case, demo: DemoServer, credential: str) -> None:
    headers = {"authorization": f"Bearer {demo.token}"} if credential == "admin" else {}
    response = case.call(base_url=demo.base, headers=headers, timeout=20)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
    )
    assert Path(demo.stderr).read_text().count("Traceback") == 0, Path(demo.stderr).read_text()[-2000:]
