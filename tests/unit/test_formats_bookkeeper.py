from __future__ import annotations

import base64

import pytest
from google.protobuf import text_format
from google.protobuf.internal import encoder

from ledgerlens.errors import DecodeError, UnknownVersionError
from ledgerlens.formats.bookkeeper import LedgerMetadata, decode_ledger_metadata, ledger_metadata_from_binary
from ledgerlens.proto import bookkeeper_pb2 as pb

pytestmark = pytest.mark.unit

PATH = "/ledgers/00/0001/L2345"


def header(version: int | str) -> bytes:
    return f"BookieMetadataFormatVersion\t{version}\n".encode()


def sample() -> pb.LedgerMetadataFormat:
    md = pb.LedgerMetadataFormat(
        quorumSize=2,
        ensembleSize=3,
        length=123456,
        lastEntryId=999,
        state=pb.LedgerMetadataFormat.CLOSED,
        digestType=pb.LedgerMetadataFormat.CRC32C,
        password=b"",
        ackQuorumSize=2,
        ctime=1_700_000_000_000,
        cToken=42,
    )
    md.segment.add(ensembleMember=["b1:3181", "b2:3181", "b3:3181"], firstEntryId=0)
    md.segment.add(ensembleMember=["b1:3181", "b4:3181", "b3:3181"], firstEntryId=500)
    md.customMetadata.add(key="application", value=b"pulsar")
    md.customMetadata.add(key="component", value=b"managed-ledger")
    md.customMetadata.add(key="pulsar/managed-ledger", value=b"public/default/persistent/t")
    md.customMetadata.add(key="blob", value=b"\xff\x00\xfe")
    return md


def v3(md: pb.LedgerMetadataFormat) -> bytes:
    body = md.SerializeToString()
    return header(3) + encoder._VarintBytes(len(body)) + body


def check_sample(meta: LedgerMetadata, version: int) -> None:
    assert meta.format_version == version
    assert meta.state == "CLOSED"
    assert (meta.ensemble_size, meta.write_quorum, meta.ack_quorum) == (3, 2, 2)
    assert meta.length == 123456
    assert meta.last_entry_id == 999
    assert meta.ctime_ms == 1_700_000_000_000
    assert meta.digest_type == "CRC32C"
    assert meta.ensembles == (
        (0, ("b1:3181", "b2:3181", "b3:3181")),
        (500, ("b1:3181", "b4:3181", "b3:3181")),
    )
    assert meta.bookies == ["b1:3181", "b2:3181", "b3:3181", "b4:3181"]
    assert meta.custom_metadata["application"] == b"pulsar"
    text = meta.custom_text()
    assert text["pulsar/managed-ledger"] == "public/default/persistent/t"
    assert text["blob"] == "base64:" + base64.b64encode(b"\xff\x00\xfe").decode()


def test_v3_round_trip():
    meta = decode_ledger_metadata(v3(sample()), path=PATH)
    check_sample(meta, 3)
    assert meta.ctoken == 42


def test_v3_large_message_multibyte_varint():
    md = sample()
    md.customMetadata.add(key="big", value=b"x" * 300)
    meta = decode_ledger_metadata(v3(md), path=PATH)
    assert meta.custom_metadata["big"] == b"x" * 300


def test_v2_text_round_trip():
    md = sample()
    md.ClearField("cToken")  # v2 never writes cToken
    data = header(2) + text_format.MessageToString(md).encode()
    meta = decode_ledger_metadata(data, path=PATH)
    check_sample(meta, 2)
    assert meta.ctoken is None


def test_v2_java_style_text():
    text = (
        "quorumSize: 2\n"
        "ensembleSize: 3\n"
        "length: 0\n"
        "lastEntryId: -1\n"
        "state: OPEN\n"
        "segment {\n"
        '  ensembleMember: "bookie1:3181"\n'
        '  ensembleMember: "bookie2:3181"\n'
        '  ensembleMember: "bookie3:3181"\n'
        "  firstEntryId: 0\n"
        "}\n"
        "digestType: CRC32\n"
        'password: ""\n'
        "customMetadata {\n"
        '  key: "application"\n'
        '  value: "pulsar"\n'
        "}\n"
        "customMetadata {\n"
        '  key: "bin"\n'
        '  value: "\\377\\000"\n'
        "}\n"
    )
    meta = decode_ledger_metadata(header(2) + text.encode(), path=PATH)
    assert meta.state == "OPEN"
    assert meta.ack_quorum == 2  # defaults to the write quorum
    assert meta.last_entry_id == -1
    assert meta.ctime_ms is None
    assert meta.digest_type == "CRC32"
    assert meta.custom_metadata == {"application": b"pulsar", "bin": b"\xff\x00"}
    assert meta.bookies == ["bookie1:3181", "bookie2:3181", "bookie3:3181"]


def test_v1_closed():
    body = b"2\n3\n4096\n0\tb1:3181\tb2:3181\tb3:3181\n100\tb1:3181\tb4:3181\tb3:3181\n250\tCLOSED\n"
    meta = decode_ledger_metadata(header(1) + body, path=PATH)
    assert meta.format_version == 1
    assert meta.state == "CLOSED"
    assert (meta.write_quorum, meta.ack_quorum, meta.ensemble_size, meta.length) == (2, 2, 3, 4096)
    assert meta.last_entry_id == 250
    assert meta.ensembles[1] == (100, ("b1:3181", "b4:3181", "b3:3181"))
    assert meta.digest_type is None and meta.ctime_ms is None and meta.ctoken is None


def test_v1_open_and_in_recovery():
    open_ = decode_ledger_metadata(header(1) + b"2\n2\n0\n0\ta:1\tb:1\n", path=PATH)
    assert open_.state == "OPEN" and open_.last_entry_id == -1
    rec = decode_ledger_metadata(header(1) + b"2\n2\n0\n0\ta:1\tb:1\n-102\tCLOSED\n", path=PATH)
    assert rec.state == "IN_RECOVERY"


def test_states_and_digests():
    for state, name in [(1, "OPEN"), (2, "IN_RECOVERY"), (3, "CLOSED")]:
        for digest, dname in [(1, "CRC32"), (2, "HMAC"), (3, "CRC32C"), (4, "DUMMY")]:
            md = pb.LedgerMetadataFormat(
                quorumSize=1, ensembleSize=1, length=0, state=state, digestType=digest
            )
            meta = decode_ledger_metadata(v3(md), path=PATH)
            assert (meta.state, meta.digest_type) == (name, dname)
            assert meta.last_entry_id == -1
            assert meta.digest_type is not None


def test_headerless_binary():
    meta = ledger_metadata_from_binary(sample().SerializeToString(), path="k")
    check_sample(meta, 0)


def check_error(data: bytes, *fragments: str, kind: type[DecodeError] = DecodeError) -> DecodeError:
    with pytest.raises(kind) as info:
        decode_ledger_metadata(data, path=PATH)
    assert info.value.where == PATH
    assert PATH in str(info.value)
    for fragment in fragments:
        assert fragment in info.value.problem
    return info.value


def test_no_header():
    check_error(b"\x0a\x05hello", "not a BookKeeper ledger metadata header")
    check_error(b"", "not a BookKeeper ledger metadata header")


def test_header_without_version():
    check_error(b"BookieMetadataFormatVersion\t\n", "version")
    check_error(b"BookieMetadataFormatVersion\tx\n", "version")
    check_error(b"BookieMetadataFormatVersion\t3", "version")
    check_error(b"BookieMetadataFormatVersion\t12345678901\n", "version")


@pytest.mark.parametrize("version", [0, 4, 99])
def test_unknown_version(version):
    err = check_error(header(version) + b"\x00", str(version), kind=UnknownVersionError)
    assert isinstance(err, DecodeError)


def test_v3_length_does_not_fit():
    data = v3(sample())
    check_error(data[:-1], "declares")


def test_v3_truncated_varint():
    check_error(header(3) + b"\xff", "varint")
    check_error(header(3), "varint")


def test_v3_garbage_body():
    check_error(header(3) + b"\x03\xff\xff\xff", "LedgerMetadataFormat")


def test_v3_missing_required():
    body = pb.LedgerMetadataFormat(quorumSize=1, length=0).SerializePartialToString()
    check_error(header(3) + encoder._VarintBytes(len(body)) + body, "ensembleSize")


def test_v2_garbage_text():
    check_error(header(2) + b"this is { not text format", "TextFormat")
    check_error(header(2) + b"\xff\xfe", "UTF-8")


def test_v2_missing_required():
    check_error(header(2) + b"quorumSize: 1\n", "ensembleSize")


def test_v1_garbage():
    check_error(header(1) + b"2\n", "lines")
    check_error(header(1) + b"two\n3\n0\n", "quorumSize")
    check_error(header(1) + b"2\n3\n0\nbogus\n", "line 4")
    check_error(header(1) + b"2\n3\n0\nx\tb:1\n", "firstEntryId")
