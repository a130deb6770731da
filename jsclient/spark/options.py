"""Spark-facing options: one frozen, picklable object parsed from Spark's option map.

Pure data, any thread or process.  Spark lower-cases option keys, so keys are
matched case-insensitively; an unknown key is an error naming it (a typo
must not silently fall back to a default).  The keys Spark adds itself
(``checkpointLocation``, ``queryName``, ``path``) are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..options import Options


def _bool(name: str, value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name} must be true or false, not {value!r}")


def _int(name: str, value: str, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be an integer, not {value!r}") from None
    if number < minimum:
        raise InvalidArgumentError(f"option {name} must be >= {minimum}, not {number}")
    return number


def option_time(name: str, value: str) -> dt.datetime:
    """The ISO 8601 time an option names (UTC when it names no zone)."""
    try:
        parsed = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(f"option {name} must be an ISO 8601 time, not {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@dataclass(frozen=True)
class SparkOptions:
    """Everything the jetstream data source and the executor connections accept."""

    servers: str = "nats://127.0.0.1:4222"
    stream: str | None = None
    subjects: tuple[str, ...] = ()
    user: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    token: str | None = dataclasses.field(default=None, repr=False)
    creds: str | None = None
    nkey: str | None = dataclasses.field(default=None, repr=False)
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # -- reading --
    starting_sequence: int | None = None
    starting_time: dt.datetime | None = None
    ending_sequence: int | None = None
    ending_time: dt.datetime | None = None
    min_partitions: int = 1
    batch_size: int = 100_000
    starting_offsets: str = "earliest"
    max_messages_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    # -- writing --
    subject: str | None = None
    ack_timeout: float = 30.0
    max_pending: int = 4000
    commit_prefix: str | None = None

    #: Spark option key (lower-cased) -> field name.
    KEYS = {
        "servers": "servers",
        "stream": "stream",
        "subjects": "subjects",
        "user": "user",
        "password": "password",
        "token": "token",
        "creds": "creds",
        "nkey": "nkey",
        "tls_ca_file": "tls_ca_file",
        "tls_cert_file": "tls_cert_file",
        "tls_key_file": "tls_key_file",
        "startingsequence": "starting_sequence",
        "startingtime": "starting_time",
        "endingsequence": "ending_sequence",
        "endingtime": "ending_time",
        "minpartitions": "min_partitions",
        "batchsize": "batch_size",
        "startingoffsets": "starting_offsets",
        "maxmessagespertrigger": "max_messages_per_trigger",
        "failondataloss": "fail_on_data_loss",
        "subject": "subject",
        "acktimeout": "ack_timeout",
        "maxpending": "max_pending",
        "commitprefix": "commit_prefix",
    }
    #: Keys Spark itself puts into a data source's options (lower-cased): accepted and ignored.
    SPARK_KEYS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SparkOptions:
        fields: dict[str, Any] = {}
        for raw_key, value in options.items():
            key = str(raw_key).lower().replace("-", "_")
            if key in cls.SPARK_KEYS:
                continue
            name = cls.KEYS.get(key) or cls.KEYS.get(key.replace("_", ""))
            if name is None:
                known = ", ".join(sorted(set(cls.KEYS)))
                raise InvalidArgumentError(f"unknown jetstream option {raw_key!r}; known options: {known}")
            fields[name] = cls._convert(name, raw_key, value)
        return cls(**fields)

    @staticmethod
    def _convert(name: str, key: str, value: Any) -> Any:
        if value is None:
            return None
        if name == "subjects":
            return tuple(s.strip() for s in str(value).split(",") if s.strip())
        if name in ("starting_sequence", "ending_sequence"):
            return _int(key, value, 1)
        if name in ("min_partitions", "batch_size", "max_pending"):
            return _int(key, value, 1)
        if name == "max_messages_per_trigger":
            return _int(key, value, 1)
        if name in ("starting_time", "ending_time"):
            return option_time(key, value)
        if name == "fail_on_data_loss":
            return _bool(key, value)
        if name == "ack_timeout":
            try:
                seconds = float(value)
            except ValueError:
                raise InvalidArgumentError(f"option {key} must be a number of seconds, not {value!r}") from None
            if seconds <= 0:
                raise InvalidArgumentError(f"option {key} must be > 0, not {value!r}")
            return seconds
        return str(value)

    def __post_init__(self) -> None:
        if self.starting_sequence is not None and self.starting_time is not None:
            raise InvalidArgumentError("set startingSequence or startingTime, not both")
        if self.ending_sequence is not None and self.ending_time is not None:
            raise InvalidArgumentError("set endingSequence or endingTime, not both")
        if (
            self.starting_sequence is not None
            and self.ending_sequence is not None
            and self.ending_sequence < self.starting_sequence
        ):
            raise InvalidArgumentError("endingSequence is before startingSequence")
        self.connection_options()  # validates servers, auth and TLS now, on the driver

    def require_stream(self) -> str:
        if not self.stream:
            raise InvalidArgumentError("the jetstream data source needs the option stream")
        return self.stream

    def connection_options(self) -> Options:
        return Options.build(
            [s.strip() for s in self.servers.split(",") if s.strip()],
            name="jsclient-spark",
            user=self.user,
            password=self.password,
            token=self.token,
            creds_file=self.creds,
            nkey_seed=self.nkey,
            tls_ca_file=self.tls_ca_file,
            tls_cert_file=self.tls_cert_file,
            tls_key_file=self.tls_key_file,
            pending_msgs_limit=4_000_000,
            pending_bytes_limit=1 << 31,
        )
