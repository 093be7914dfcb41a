"""A DBOS serializer that stores jigs' types as readable JSON and rebuilds them typed."""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import pickle
from typing import Any

from dbos import Serializer
from jigs.policy._record import Record
from pydantic import BaseModel

__all__ = ["JigsSerializer"]

_TAG = "__jigs__"


class JigsSerializer(Serializer):
    """DBOS ``Serializer`` (``DBOSConfig(serializer=JigsSerializer())``) for jigs workflows.

    Pydantic models (descriptors, :class:`~jigs.AgentSessionRef`, :class:`~jigs.RunMetadata`,
    :class:`~jigs.steps.AgentResult`, events, usage, typed outputs) and dataclasses are stored
    as JSON with their class path and come back as the same class (jigs' own models field by
    field, so a typed output inside a result keeps its class); JSON values stay JSON. Anything else
    (exceptions, datetimes, sets) is stored as pickle inside the JSON, as DBOS' default
    serializer would. Only classes importable by module and qualified name round-trip as JSON.
    The system database must be trusted, as with DBOS' default pickle serializer.

    DBOS' default serializer (pickle) already carries every jigs type; this one makes the
    stored values readable (``dbos workflow get``, SQL) without losing their types.
    """

    def name(self) -> str:
        return "jigs_json"

    def serialize(self, data: Any) -> str:
        return json.dumps(_encode(data), separators=(",", ":"), ensure_ascii=False)

    def deserialize(self, serialized_data: str) -> Any:
        return _decode(json.loads(serialized_data))


def _path(cls: type) -> str | None:
    if "<locals>" in cls.__qualname__:
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


def _pickled(value: Any) -> dict[str, Any]:
    return {_TAG: "pickle", "data": base64.b64encode(pickle.dumps(value)).decode("ascii")}


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return {_TAG: "tuple", "items": [_encode(v) for v in value]}
    if type(value) is dict and _TAG not in value and all(isinstance(k, str) for k in value):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, Record) and (path := _path(type(value))) is not None:
        # field by field, so a typed value inside (an AgentResult's output model) keeps its class
        fields = {name: _encode(getattr(value, name)) for name in type(value).model_fields}
        return {_TAG: "record", "type": path, "fields": fields}
    if isinstance(value, BaseModel) and (path := _path(type(value))) is not None:
        return {_TAG: "model", "type": path, "data": value.model_dump(mode="json")}
    if (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and (path := _path(type(value))) is not None
    ):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {_TAG: "dataclass", "type": path, "fields": fields}
    return _pickled(value)


def _load_type(path: str) -> type:
    module_name, _, qualname = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise TypeError(f"stored type {path!r} is not a class")
    return obj


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag is None:
        return {k: _decode(v) for k, v in value.items()}
    if tag == "tuple":
        return tuple(_decode(v) for v in value["items"])
    if tag == "pickle":
        return pickle.loads(base64.b64decode(value["data"]))
    cls = _load_type(value["type"])
    if tag == "record" and issubclass(cls, Record):
        if "data" in value:  # stored by an earlier jigs (a record's plain data)
            return cls.from_data(value["data"])
        return cls.model_validate({k: _decode(v) for k, v in value["fields"].items()})
    if tag == "model" and issubclass(cls, BaseModel):
        return cls.model_validate(value["data"])
    elif tag == "dataclass" and dataclasses.is_dataclass(cls):
        return cls(**{k: _decode(v) for k, v in value["fields"].items()})
    raise TypeError(f"stored value of type {value['type']!r} cannot be rebuilt as {tag}")
