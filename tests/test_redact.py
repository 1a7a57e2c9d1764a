"""URL redaction: no userinfo, query value or fragment survives into text."""

from __future__ import annotations

import urllib.parse

from hypothesis import given
from hypothesis import strategies as st

from thalweg_bytewax._redact import redact_origins_in, redact_text, redact_url

PRESIGNED = (
    "https://bucket.s3.amazonaws.com/c/orders.yaml?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAEXAMPLE%2F20240101&X-Amz-Signature=deadbeefcafe0123#frag-secret"
)


def test_redact_url_userinfo_query_and_fragment() -> None:
    out = redact_url("https://alice:s3cr%40t@host:8443/a/b?token=abcd&x=1#frag")
    assert out == "https://***@host:8443/a/b?token=***&x=***#***"


def test_redact_url_presigned_keeps_names_drops_values() -> None:
    out = redact_url(PRESIGNED)
    assert "deadbeefcafe0123" not in out
    assert "AKIAEXAMPLE" not in out
    assert "frag-secret" not in out
    assert out.startswith("https://bucket.s3.amazonaws.com/c/orders.yaml?X-Amz-Algorithm=***")


def test_redact_url_leaves_plain_paths() -> None:
    assert redact_url("/tmp/contracts/orders.yaml") == "/tmp/contracts/orders.yaml"
    assert redact_url("s3://bucket/key.yaml") == "s3://bucket/key.yaml"


def test_redact_url_password_with_at_and_slash() -> None:
    out = redact_url("https://u:p@ss/w@rd@host/x")
    assert out == "https://***@host/x"


def test_redact_text_finds_urls_in_messages() -> None:
    text = f"cannot fetch `{PRESIGNED}`: HTTP 403 for https://bob:hunter22@h/x"
    out = redact_text(text)
    assert "deadbeefcafe0123" not in out
    assert "hunter22" not in out


def test_redact_origins_in_removes_decoded_and_partial_quotes() -> None:
    url = "https://alice:p%40ssword99@host/c.yaml?sig=abc%2Fdef123"
    # A client message quoting only the host part, the decoded password and signature.
    text = "auth failed for alice (password p@ssword99) at host/c.yaml?sig=abc/def123"
    out = redact_origins_in(text, url)
    assert "p@ssword99" not in out
    assert "abc/def123" not in out
    assert "alice" not in out


_secret = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="`'\"<>"),
    min_size=4,
    max_size=24,
)


@given(user=_secret, password=_secret, signature=_secret)
def test_property_no_secret_survives(user: str, password: str, signature: str) -> None:
    quoted = [urllib.parse.quote(s, safe="") for s in (user, password, signature)]
    url = f"https://{quoted[0]}:{quoted[1]}@host.example/c.yaml?X-Amz-Signature={quoted[2]}"
    for text in (
        f"contract `{url}`: cannot fetch: boom",
        f"boom {url} and decoded {password} / {signature} / {user}",
    ):
        out = redact_origins_in(text, url)
        for s in (password, signature, *quoted[1:]):
            assert s not in out
