from . import managed_ledger_pb2 as _managed_ledger_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LedgerComponent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MANAGED_LEDGER: _ClassVar[LedgerComponent]
    MANAGED_CURSOR: _ClassVar[LedgerComponent]
    SCHEMA_STORAGE: _ClassVar[LedgerComponent]
    DELAYED_INDEX_BUCKET: _ClassVar[LedgerComponent]
    COMPACTED_LEDGER: _ClassVar[LedgerComponent]

class LedgerType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEDGER: _ClassVar[LedgerType]
    OFFLOAD_LEDGER: _ClassVar[LedgerType]
    LOAD_TOPIC: _ClassVar[LedgerType]
    REMOTE_SEGMENT: _ClassVar[LedgerType]
MANAGED_LEDGER: LedgerComponent
MANAGED_CURSOR: LedgerComponent
SCHEMA_STORAGE: LedgerComponent
DELAYED_INDEX_BUCKET: LedgerComponent
COMPACTED_LEDGER: LedgerComponent
LEDGER: LedgerType
OFFLOAD_LEDGER: LedgerType
LOAD_TOPIC: LedgerType
REMOTE_SEGMENT: LedgerType

class PendingDeleteLedgerInfo(_message.Message):
    __slots__ = ("topicName", "ledgerComponent", "ledgerType", "ledgerId", "context", "cursorName", "schemaId", "managedLedgerName", "objectKey", "bucket", "planHash", "findingKind", "expectedBytes", "itemId")
    TOPICNAME_FIELD_NUMBER: _ClassVar[int]
    LEDGERCOMPONENT_FIELD_NUMBER: _ClassVar[int]
    LEDGERTYPE_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CURSORNAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMAID_FIELD_NUMBER: _ClassVar[int]
    MANAGEDLEDGERNAME_FIELD_NUMBER: _ClassVar[int]
    OBJECTKEY_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    PLANHASH_FIELD_NUMBER: _ClassVar[int]
    FINDINGKIND_FIELD_NUMBER: _ClassVar[int]
    EXPECTEDBYTES_FIELD_NUMBER: _ClassVar[int]
    ITEMID_FIELD_NUMBER: _ClassVar[int]
    topicName: str
    ledgerComponent: LedgerComponent
    ledgerType: LedgerType
    ledgerId: int
    context: _managed_ledger_pb2.OffloadContext
    cursorName: str
    schemaId: str
    managedLedgerName: str
    objectKey: str
    bucket: str
    planHash: str
    findingKind: str
    expectedBytes: int
    itemId: str
    def __init__(self, topicName: _Optional[str] = ..., ledgerComponent: _Optional[_Union[LedgerComponent, str]] = ..., ledgerType: _Optional[_Union[LedgerType, str]] = ..., ledgerId: _Optional[int] = ..., context: _Optional[_Union[_managed_ledger_pb2.OffloadContext, _Mapping]] = ..., cursorName: _Optional[str] = ..., schemaId: _Optional[str] = ..., managedLedgerName: _Optional[str] = ..., objectKey: _Optional[str] = ..., bucket: _Optional[str] = ..., planHash: _Optional[str] = ..., findingKind: _Optional[str] = ..., expectedBytes: _Optional[int] = ..., itemId: _Optional[str] = ...) -> None: ...
