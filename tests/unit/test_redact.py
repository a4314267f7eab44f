"""The one redaction function: every credential form, idempotence, identifiers untouched."""

from __future__ import annotations

import json
import logging

import pytest

from ledgerlens import cli, report
from ledgerlens.errors import SourceError
from ledgerlens.settings.redact import MASK, RedactingFilter, redact, redact_html, redact_notebook, redact_obj

pytestmark = pytest.mark.unit

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY"
ENV = {"AWS_SECRET_ACCESS_KEY": SECRET, "HOME": "/root", "SHORT_TOKEN": "abc"}

CASES = [
    # URL userinfo, any scheme, every occurrence
    (
        f"cannot reach https://AKIAEXAMPLE:{SECRET}@s3.local:9000/b and https://AKIAEXAMPLE:x9@s3.local",
        "cannot reach https://***@s3.local:9000/b and https://***@s3.local",
    ),
    ("http://tok3n@host/p, zk://u:p@h:2181/c", "http://***@host/p, zk://***@h:2181/c"),
    # key=value (query strings, properties), quoted values, presigned URL parameters
    (
        "aws_secret_access_key=abc123 password='p w' token=\"x y\" X-Amz-Signature=dead&x=1",
        "aws_secret_access_key=*** password=*** token=*** X-Amz-Signature=***&x=1",
    ),
    # JSON and Python-repr forms, headers among them
    (
        '{"password": "hunter2", "secretKey":"a\\"b", "object_key": "ledgers/1"}',
        '{"password": "***", "secretKey":"***", "object_key": "ledgers/1"}',
    ),
    (
        "{'Authorization': 'AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=abc', 'Host': 'h'}",
        "{'Authorization': '***', 'Host': 'h'}",
    ),
    # HTTP header lines
    (
        "Authorization: Bearer abc.def\nX-Amz-Security-Token: FQoGZXIvYXdz\nHost: s3",
        "Authorization: ***\nX-Amz-Security-Token: ***\nHost: s3",
    ),
    # YAML / properties colon form for unmistakable names; prose stays readable
    (
        "aws_secret_access_key: abcd\ntoken: expected a value",
        "aws_secret_access_key: ***\ntoken: expected a value",
    ),
    # ZooKeeper digest credentials
    (
        "addauth digest alice:s3cret; digest:bob:pw2, zookeeper.digest=carol:pw3",
        "addauth digest alice:***; digest:bob:***, zookeeper.digest=carol:***",
    ),
    # Pulsar token authentication (JWT), bearer tokens
    (
        "authParams=token:eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2ln; "
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
        "authParams=***; ***",
    ),
    # an environment secret's value anywhere, even without a key
    (f"boto3 said {SECRET} was wrong", "boto3 said *** was wrong"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_redact_forms(text: str, expected: str) -> None:
    assert redact(text, ENV) == expected
    assert redact(expected, ENV) == expected  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "orphan_ledger 12345 in tenant/ns/persistent/topic-token-1 (key ledgers/1, 2.0 GiB)",
        "min_orphan_age=24h as_of=2026-11-22T03:00:00Z ledgers_root=/ledgers",
        "digest or SASL credentials and TLS from config or environment",
        "ZooKeeper 127.0.0.1:2181/pulsar: connection refused",
        "s3://bucket/offload/ledger-7-abc and http://host/path@x",
        "short env values (abc) are not secrets",
    ],
)
def test_ordinary_text_untouched(text: str) -> None:
    assert redact(text, ENV) == text


def test_redact_obj_keys_and_nested_values() -> None:
    obj = {"error": f"x {SECRET}", "items": [{"url": "https://k:s@h/"}], f"k-{SECRET}": 3, "n": 1}
    assert redact_obj(obj, ENV) == {
        "error": "x ***",
        "items": [{"url": "https://***@h/"}],
        "k-***": 3,
        "n": 1,
    }


def test_scripts_keep_working_and_text_around_them_is_redacted() -> None:
    js = "n.withCredentials=e.credentials===!0;var password=f(x);"
    html = f"<p>password=abc {SECRET}</p><script type='text/javascript'>{js} // {SECRET}</script>"
    assert (
        redact_html(html, ENV)
        == f"<p>password=*** ***</p><script type='text/javascript'>{js} // ***</script>"
    )


def test_notebook_sources_outputs_and_html() -> None:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["s3_endpoint = 'https://K:S@h'\n", f"x = '{SECRET}'"],
                "outputs": [
                    {"output_type": "stream", "name": "stderr", "text": ["WARN password=", "hunter2\n"]},
                    {"output_type": "error", "evalue": "https://K:S@h refused", "traceback": ["token=abc"]},
                    {
                        "output_type": "display_data",
                        "data": {"text/html": ["<script>a.password=b</script>", "<b>token=x</b>"]},
                        "metadata": {},
                    },
                    {  # recorded data: lists stay lists, strings in it are redacted
                        "output_type": "display_data",
                        "data": {"application/json": {"stages": ["a", "b"], "url": "https://K:S@h"}},
                        "metadata": {},
                    },
                ],
            }
        ],
        "metadata": {"papermill": {"parameters": {"s3_endpoint": "https://K:S@h"}}},
    }
    clean = redact_notebook(nb, ENV)
    text = json.dumps(clean)
    assert SECRET not in text and "K:S@" not in text and "hunter2" not in text and "token=abc" not in text
    cell = clean["cells"][0]
    assert cell["source"] == ["s3_endpoint = 'https://***@h'\n", "x = '***'"]
    assert cell["outputs"][0]["text"] == ["WARN password=***\n"]
    assert cell["outputs"][2]["data"]["text/html"] == ["<script>a.password=b</script><b>token=***</b>"]
    assert cell["outputs"][3]["data"]["application/json"] == {"stages": ["a", "b"], "url": "https://***@h"}
    assert clean["metadata"]["papermill"]["parameters"]["s3_endpoint"] == "https://***@h"


def test_log_records_are_redacted() -> None:
    record = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "endpoint %s failed", ("https://K:S@h",), None
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "endpoint https://***@h failed"


def test_cli_error_line_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(args: object) -> int:
        raise SourceError("S3 https://KEY:SECRET@s3.local", "connect failed: https://KEY:SECRET@s3.local/b")

    monkeypatch.setitem(cli.COMMANDS, "audit", fail)
    code = cli.main(["audit", "--zookeeper", "127.0.0.1:1", "--out", "/tmp/x"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR
    assert err == "ledgerlens audit: error: S3 https://***@s3.local: connect failed: https://***@s3.local/b\n"


def test_report_refuses_credentials_in_parameters() -> None:
    with pytest.raises(report.SecretLeakError, match="credential") as e:
        report.check_no_secrets(json.dumps({"s3_endpoint": "https://KEY:SECRET@h"}), "runbook parameters", {})
    assert "SECRET" not in str(e.value)
    with pytest.raises(report.SecretLeakError, match="AWS_SECRET_ACCESS_KEY"):
        report.check_no_secrets(f"x {SECRET}", "runbook parameters", ENV)
    report.check_no_secrets(json.dumps({"zookeeper": "127.0.0.1:2181/pulsar"}), "runbook parameters", ENV)


def test_mask_is_stable() -> None:
    assert MASK == "***"


def test_notebook_json_outputs_keep_their_lists() -> None:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["x = 1\n", "y = 2"],
                "outputs": [
                    {
                        "output_type": "display_data",
                        "data": {"application/json": {"stages": ["a", "b"], "url": "http://u:s3cr3t@h/"}},
                        "metadata": {},
                    }
                ],
            }
        ]
    }
    out = redact_notebook(nb)
    data = out["cells"][0]["outputs"][0]["data"]["application/json"]
    assert data["stages"] == ["a", "b"]  # a recorded list is data, not lines of text
    assert "s3cr3t" not in data["url"]
    assert out["cells"][0]["source"] == ["x = 1\n", "y = 2"]
