from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchemaType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[SchemaType]
    STRING: _ClassVar[SchemaType]
    JSON: _ClassVar[SchemaType]
    PROTOBUF: _ClassVar[SchemaType]
    AVRO: _ClassVar[SchemaType]
    BOOLEAN: _ClassVar[SchemaType]
    INT8: _ClassVar[SchemaType]
    INT16: _ClassVar[SchemaType]
    INT32: _ClassVar[SchemaType]
    INT64: _ClassVar[SchemaType]
    FLOAT: _ClassVar[SchemaType]
    DOUBLE: _ClassVar[SchemaType]
    DATE: _ClassVar[SchemaType]
    TIME: _ClassVar[SchemaType]
    TIMESTAMP: _ClassVar[SchemaType]
    KEYVALUE: _ClassVar[SchemaType]
    INSTANT: _ClassVar[SchemaType]
    LOCALDATE: _ClassVar[SchemaType]
    LOCALTIME: _ClassVar[SchemaType]
    LOCALDATETIME: _ClassVar[SchemaType]
    PROTOBUFNATIVE: _ClassVar[SchemaType]
    EXTERNAL: _ClassVar[SchemaType]
NONE: SchemaType
STRING: SchemaType
JSON: SchemaType
PROTOBUF: SchemaType
AVRO: SchemaType
BOOLEAN: SchemaType
INT8: SchemaType
INT16: SchemaType
INT32: SchemaType
INT64: SchemaType
FLOAT: SchemaType
DOUBLE: SchemaType
DATE: SchemaType
TIME: SchemaType
TIMESTAMP: SchemaType
KEYVALUE: SchemaType
INSTANT: SchemaType
LOCALDATE: SchemaType
LOCALTIME: SchemaType
LOCALDATETIME: SchemaType
PROTOBUFNATIVE: SchemaType
EXTERNAL: SchemaType

class PositionInfo(_message.Message):
    __slots__ = ("ledgerId", "entryId")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    entryId: int
    def __init__(self, ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ...) -> None: ...

class IndexEntry(_message.Message):
    __slots__ = ("version", "position", "hash")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    version: int
    position: PositionInfo
    hash: bytes
    def __init__(self, version: _Optional[int] = ..., position: _Optional[_Union[PositionInfo, _Mapping]] = ..., hash: _Optional[bytes] = ...) -> None: ...

class SchemaEntry(_message.Message):
    __slots__ = ("schema_data", "index")
    SCHEMA_DATA_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    schema_data: bytes
    index: _containers.RepeatedCompositeFieldContainer[IndexEntry]
    def __init__(self, schema_data: _Optional[bytes] = ..., index: _Optional[_Iterable[_Union[IndexEntry, _Mapping]]] = ...) -> None: ...

class SchemaLocator(_message.Message):
    __slots__ = ("info", "index")
    INFO_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    info: IndexEntry
    index: _containers.RepeatedCompositeFieldContainer[IndexEntry]
    def __init__(self, info: _Optional[_Union[IndexEntry, _Mapping]] = ..., index: _Optional[_Iterable[_Union[IndexEntry, _Mapping]]] = ...) -> None: ...

class KeyValuePair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class SchemaInfo(_message.Message):
    __slots__ = ("schema_id", "user", "type", "schema", "timestamp", "deleted", "props")
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    PROPS_FIELD_NUMBER: _ClassVar[int]
    schema_id: str
    user: str
    type: SchemaType
    schema: bytes
    timestamp: int
    deleted: bool
    props: _containers.RepeatedCompositeFieldContainer[KeyValuePair]
    def __init__(self, schema_id: _Optional[str] = ..., user: _Optional[str] = ..., type: _Optional[_Union[SchemaType, str]] = ..., schema: _Optional[bytes] = ..., timestamp: _Optional[int] = ..., deleted: _Optional[bool] = ..., props: _Optional[_Iterable[_Union[KeyValuePair, _Mapping]]] = ...) -> None: ...
