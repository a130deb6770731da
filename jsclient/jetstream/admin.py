"""Stream and consumer management: the JetStream API calls behind ``add_stream``, ``consumer_info`` and the rest.

Runs on the calling (user) thread; every call is a request over the
connection's shared reply inbox, and every error the server answers one with
goes through ``Admin._call``.  Nothing here is mutable (the context's
``conn``, ``prefix`` and ``timeout`` are read at each call), so nothing is
locked and one :class:`Admin` may be shared by many threads.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from msgspec import UNSET

from .. import observe
from ..checks import whole
from ..errors import (
    InvalidArgumentError,
    JetStreamAPIError,
    JetStreamNotEnabledError,
    NoRespondersError,
    StreamNotFoundError,
    TimeoutError,
)
from ..protocol import check_subscribe_subject
from ..timeouts import DEFAULT, Timeout, answer_limit
from . import api, features
from .api import AccountInfo, AckPolicy, ConsumerConfig, ConsumerInfo, StoredMsg, StreamConfig, StreamInfo

if TYPE_CHECKING:
    from .context import JetStream

T = TypeVar("T")


class Admin:
    """The management part of a :class:`~jsclient.jetstream.context.JetStream`: one API request per call.

    Each public method is the body of the context's method of the same name,
    whose docstring it keeps; the context supplies the defaults.
    """

    def __init__(self, js: JetStream) -> None:
        self._js = js

    # -- the API call ------------------------------------------------------------
    def _api(self, suffix: str, body: Any = None, timeout: Timeout = DEFAULT, *, level: int = 0) -> bytes:
        """Request ``<prefix>.<suffix>``; a missing JetStream becomes JetStreamNotEnabledError.

        ``level`` > 0 asks the answering server for that API level (ADR-44).
        """
        js = self._js
        payload = b"" if body is None else api.encode_body(body)
        subject = f"{js.prefix}.{suffix}"
        headers = {features.LEVEL_HEADER: str(level)} if level else None
        try:
            reply = js.conn.request(subject, payload, timeout=answer_limit(timeout, js.timeout), headers=headers)
        except NoRespondersError:
            raise JetStreamNotEnabledError(
                503, 0, f"no JetStream responded on {subject!r}: not enabled (or not for this account or domain)"
            ) from None
        except TimeoutError as exc:  # named after the API call; how it ended (a lost link, say) is kept
            raise TimeoutError(f"JetStream API {subject!r}: {exc}", outcome=exc.outcome, failure=exc.failure) from None
        return reply.data

    def _call(self, suffix: str, body: Any, kind: type[T], timeout: Timeout = DEFAULT, *, level: int = 0) -> T:
        """The API call, its reply decoded; the server's error raised, and told to an observer
        (:mod:`jsclient.observe`) on this thread.  Every management request's error comes through here (direct
        gets and pulls, under the same ``$JS.API`` prefix, are answered with statuses instead)."""
        data = self._api(suffix, body, timeout, level=level)
        try:
            return api.decode_reply(data, kind)
        except JetStreamAPIError as exc:
            listener = observe.listener
            if listener is not None and exc.code:  # code 0: a reply we could not read, not the server's error
                listener.api_error(exc.code, exc.err_code)
            raise

    def _paged(self, suffix: str, body: dict[str, Any], kind: type[Any], field: str) -> list[Any]:
        items: list[Any] = []
        while True:
            page = self._call(suffix, {**body, "offset": len(items)}, kind)
            batch = getattr(page, field) or []
            items.extend(batch)
            if not batch or len(items) >= page.total:
                return items

    # -- account -----------------------------------------------------------------
    def account_info(self) -> AccountInfo:
        return self._call("INFO", None, AccountInfo)

    # -- streams -------------------------------------------------------------------
    def add_stream(self, config: StreamConfig | None, fields: dict[str, Any]) -> StreamInfo:
        cfg = api.validate_stream_config(api.merge_config(StreamConfig, config, fields))
        level = self._js.require(*features.stream_features(cfg))
        return self._call(f"STREAM.CREATE.{cfg.name}", cfg, StreamInfo, level=level)

    def update_stream(self, config: StreamConfig | None, fields: dict[str, Any]) -> StreamInfo:
        cfg = api.validate_stream_config(api.merge_config(StreamConfig, config, fields))
        level = self._js.require(*features.stream_features(cfg))
        return self._call(f"STREAM.UPDATE.{cfg.name}", cfg, StreamInfo, level=level)

    def create_or_update_stream(self, config: StreamConfig | None, fields: dict[str, Any]) -> StreamInfo:
        cfg = api.merge_config(StreamConfig, config, fields)
        try:
            return self.update_stream(cfg, {})
        except StreamNotFoundError:
            return self.add_stream(cfg, {})

    def delete_stream(self, name: str) -> bool:
        api.check_name("stream name", name)
        return self._call(f"STREAM.DELETE.{name}", None, api.SuccessReply).success

    def stream_info(self, name: str, subjects_filter: str | None, deleted_details: bool) -> StreamInfo:
        api.check_name("stream name", name)
        body: dict[str, Any] = {}
        if subjects_filter is not None:
            check_subscribe_subject(subjects_filter, "subjects_filter")
            body["subjects_filter"] = subjects_filter
        if deleted_details:
            body["deleted_details"] = True
        info = self._call(f"STREAM.INFO.{name}", body or None, api.StreamInfoPaged)
        subjects = dict(info.state.subjects or {})
        while subjects_filter is not None and info.total > len(subjects) and info.state.subjects:
            info = self._call(f"STREAM.INFO.{name}", {**body, "offset": len(subjects)}, api.StreamInfoPaged)
            subjects.update(info.state.subjects or {})
        state = msgspec.structs.replace(info.state, subjects=subjects or info.state.subjects)
        # Every field of the answer but the paging ones (domain and alternates were dropped when listed by hand).
        fields = {name: getattr(info, name) for name in StreamInfo.__struct_fields__}
        return StreamInfo(**{**fields, "state": state})

    def streams(self, subject: str | None) -> list[StreamInfo]:
        return self._paged("STREAM.LIST", _subject_filter(subject), api.StreamListPage, "streams")

    def stream_names(self, subject: str | None) -> list[str]:
        return self._paged("STREAM.NAMES", _subject_filter(subject), api.StreamNamesPage, "streams")

    def find_stream(self, subject: str) -> str:
        names = self.stream_names(subject)
        if len(names) != 1:
            found = "no stream" if not names else f"{len(names)} streams ({', '.join(names)})"
            raise StreamNotFoundError(404, 10059, f"no matching stream for subject {subject!r}: {found}")
        return names[0]

    def purge_stream(self, name: str, subject: str | None, seq: int | None, keep: int | None) -> int:
        api.check_name("stream name", name)
        if seq is not None and keep is not None:
            raise InvalidArgumentError("purge_stream: seq and keep are mutually exclusive")
        body: dict[str, Any] = {}
        if subject is not None:
            check_subscribe_subject(subject, "purge subject")
            body["filter"] = subject
        for key, value in (("seq", seq), ("keep", keep)):
            if value is not None:
                body[key] = whole(f"purge_stream {key}", value, 0)
        return self._call(f"STREAM.PURGE.{name}", body or None, api.PurgeReply).purged

    def get_msg(
        self,
        stream: str,
        seq: int | None,
        last_by_subj: str | None,
        next_by_subj: str | None,
        start_time: dt.datetime | None,
        timeout: float,
    ) -> StoredMsg:
        api.check_name("stream name", stream)
        body: dict[str, Any] = {}
        if seq is not None:
            body["seq"] = whole("seq", seq)
        if last_by_subj is not None:
            if seq is not None or next_by_subj is not None:
                raise InvalidArgumentError("last_by_subj cannot be combined with seq or next_by_subj")
            check_subscribe_subject(last_by_subj, "last_by_subj")
            body["last_by_subj"] = last_by_subj
        if next_by_subj is not None:
            check_subscribe_subject(next_by_subj, "next_by_subj")
            body["next_by_subj"] = next_by_subj
            body.setdefault("seq", 1)
        if start_time is not None:
            if seq is not None or last_by_subj is not None:
                raise InvalidArgumentError("start_time cannot be combined with seq or last_by_subj")
            if not isinstance(start_time, dt.datetime) or start_time.tzinfo is None:
                raise InvalidArgumentError(f"start_time must be a timezone-aware datetime, not {start_time!r}")
            body.pop("seq", None)
            body["start_time"] = start_time.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
            self._js.require(features.START_TIME_GET)  # 2.10 answers "bad request", or ignores it beside next_by_subj
        if not body:
            raise InvalidArgumentError("get_msg needs seq, last_by_subj, next_by_subj or start_time")
        return self._call(f"STREAM.MSG.GET.{stream}", body, api.MsgGetReply, timeout).message

    def delete_msg(self, stream: str, seq: int, erase: bool) -> bool:
        api.check_name("stream name", stream)
        body: dict[str, Any] = {"seq": whole("seq", seq)}
        if not erase:
            body["no_erase"] = True
        return self._call(f"STREAM.MSG.DELETE.{stream}", body, api.SuccessReply).success

    # -- consumers -----------------------------------------------------------------
    def add_consumer(
        self, stream: str, config: ConsumerConfig | None, action: str, fields: dict[str, Any],
        timeout: Timeout = DEFAULT,
    ) -> ConsumerInfo:
        api.check_name("stream name", stream)
        if action not in ("", "create", "update"):
            raise InvalidArgumentError(f"action must be '', 'create' or 'update', not {action!r}")
        cfg = api.validate_consumer_config(api.merge_config(ConsumerConfig, config, fields))
        if cfg.ack_policy is UNSET:  # the server's default is none: nothing would ever be redelivered
            cfg = api.replace(cfg, ack_policy=AckPolicy.EXPLICIT.value)
        level = self._js.require(*features.consumer_features(cfg))
        name = cfg.name if cfg.name is not UNSET else cfg.durable_name
        body: dict[str, Any] = {"stream_name": stream, "config": cfg}
        if action:
            body["action"] = action
        suffix = f"CONSUMER.CREATE.{stream}" if name is UNSET else f"CONSUMER.CREATE.{stream}.{name}"
        return self._call(suffix, body, ConsumerInfo, timeout, level=level)

    def consumer_info(self, stream: str, consumer: str, timeout: float) -> ConsumerInfo:
        _check_names(stream, consumer)
        return self._call(f"CONSUMER.INFO.{stream}.{consumer}", None, ConsumerInfo, timeout)

    def delete_consumer(self, stream: str, consumer: str) -> bool:
        _check_names(stream, consumer)
        return self._call(f"CONSUMER.DELETE.{stream}.{consumer}", None, api.SuccessReply).success

    def consumers(self, stream: str) -> list[ConsumerInfo]:
        api.check_name("stream name", stream)
        return self._paged(f"CONSUMER.LIST.{stream}", {}, api.ConsumerListPage, "consumers")

    def consumer_names(self, stream: str) -> list[str]:
        api.check_name("stream name", stream)
        return self._paged(f"CONSUMER.NAMES.{stream}", {}, api.ConsumerNamesPage, "consumers")

    def pause_consumer(self, stream: str, consumer: str, until: dt.datetime) -> api.ConsumerPause:
        _check_names(stream, consumer)
        if not isinstance(until, dt.datetime) or until.utcoffset() is None:
            raise InvalidArgumentError(f"until must be a timezone-aware datetime, not {until!r}")
        level = self._js.require(features.CONSUMER_PAUSE)
        body = {"pause_until": until}
        return self._call(f"CONSUMER.PAUSE.{stream}.{consumer}", body, api.ConsumerPause, level=level)

    def resume_consumer(self, stream: str, consumer: str) -> api.ConsumerPause:
        _check_names(stream, consumer)
        level = self._js.require(features.CONSUMER_PAUSE)
        return self._call(f"CONSUMER.PAUSE.{stream}.{consumer}", {}, api.ConsumerPause, level=level)

    def reset_consumer(self, stream: str, consumer: str, seq: int | None) -> api.ConsumerResetInfo:
        _check_names(stream, consumer)
        body = {} if seq is None else {"seq": whole("seq", seq, 1)}
        level = self._js.require(features.CONSUMER_RESET)
        return self._call(f"CONSUMER.RESET.{stream}.{consumer}", body, api.ConsumerResetInfo, level=level)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        _check_names(stream, consumer)
        body = {"group": api.check_group(group)}
        level = self._js.require(features.PRIORITY_GROUPS)
        self._call(f"CONSUMER.UNPIN.{stream}.{consumer}", body, api.SuccessReply, level=level)


def _subject_filter(subject: str | None) -> dict[str, Any]:
    """The body of a stream listing: only the streams that listen on ``subject`` (when given)."""
    if subject is None:
        return {}
    check_subscribe_subject(subject, "subject filter")
    return {"subject": subject}


def _check_names(stream: str, consumer: str) -> None:
    """Both names checked before a consumer's API subject is built from them."""
    api.check_name("stream name", stream)
    api.check_name("consumer name", consumer)
