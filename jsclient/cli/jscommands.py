"""The JetStream subcommands: ``stream``, ``consumer``, ``counter`` and ``kv``.

Runs on the main thread of the command's process; ``kv watch`` reads its watcher there until
interrupted.  With ``--json`` a model is printed in the server's own form (durations in nanoseconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from ..errors import InvalidArgumentError
from .command import EXIT_OK, connection
from .output import emit_json, show_msg, table


def cmd_stream(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            info = js.add_stream(
                name=args.name,
                subjects=args.subjects or [f"{args.name.lower()}.>"],
                storage=args.storage,
                max_msgs=args.max_msgs,
                allow_direct=True,
                **_stream_features(args),
            )
            _out_struct(args, info, f"stream {info.config.name} created with subjects {info.config.subjects}")
        elif args.action == "ls":
            streams = js.streams()
            if args.json:
                emit_json([s.to_dict() for s in streams])
            else:
                rows = [(s.config.name, ", ".join(s.config.subjects or []), s.state.messages, s.state.bytes)
                        for s in streams]
                table(rows, ["stream", "subjects", "messages", "bytes"])
        elif args.action == "info":
            info = js.stream_info(args.name)
            _out_struct(args, info, _describe_stream(info))
        elif args.action == "rm":
            js.delete_stream(args.name)
            _out(args, {"deleted": args.name}, f"stream {args.name} deleted")
        elif args.action == "purge":
            purged = js.purge_stream(args.name, subject=args.subject)
            _out(args, {"purged": purged}, f"purged {purged:,} messages from {args.name}")
    return EXIT_OK


def _stream_features(args: argparse.Namespace) -> dict[str, Any]:
    """The 2.11+ stream options asked for on the command line (none: the server's defaults)."""
    fields: dict[str, Any] = {}
    if args.ttl:
        fields["allow_msg_ttl"] = True
    if args.marker_ttl is not None:
        fields["subject_delete_marker_ttl"] = args.marker_ttl
    if args.counters:
        fields["allow_msg_counter"] = True
    if args.atomic:
        fields["allow_atomic"] = True
    if args.schedules:
        fields["allow_msg_schedules"] = True
    return fields


def _describe_stream(info: Any) -> str:
    c, s = info.config, info.state
    return (
        f"stream {c.name}\n  subjects   {', '.join(c.subjects or [])}\n  storage    {c.storage}\n"
        f"  messages   {s.messages:,}\n  bytes      {s.bytes:,}\n  sequences  {s.first_seq}..{s.last_seq}\n"
        f"  consumers  {s.consumer_count}"
    )


def cmd_consumer(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            info = js.add_consumer(args.stream, durable_name=args.name, ack_policy="explicit",
                                   filter_subject=args.filter)
            _out_struct(args, info, f"pull consumer {info.name} created on {args.stream}")
        elif args.action == "ls":
            consumers = js.consumers(args.stream)
            if args.json:
                emit_json([c.to_dict() for c in consumers])
            else:
                rows = [(c.name, c.num_pending, c.num_ack_pending, c.delivered.stream_seq) for c in consumers]
                table(rows, ["consumer", "pending", "ack pending", "delivered seq"])
        elif args.action == "info":
            info = js.consumer_info(args.stream, args.name)
            _out_struct(args, info, f"consumer {info.name}: {info.num_pending:,} pending, "
                                    f"{info.num_ack_pending:,} awaiting ack")
        elif args.action == "rm":
            js.delete_consumer(args.stream, args.name)
            _out(args, {"deleted": args.name}, f"consumer {args.name} deleted")
        elif args.action == "pause":
            until = _pause_until(args)
            paused = js.pause_consumer(args.stream, _named(args), until)
            _out_struct(args, paused, f"consumer {args.name} paused until {paused.pause_until}")
        elif args.action == "resume":
            _out_struct(args, js.resume_consumer(args.stream, _named(args)), f"consumer {args.name} resumed")
        elif args.action == "unpin":
            js.unpin_consumer(args.stream, _named(args), args.group)
            _out(args, {"unpinned": args.group}, f"group {args.group} of consumer {args.name} unpinned")
        elif args.action == "reset":
            reset = js.reset_consumer(args.stream, _named(args), args.seq)
            _out_struct(args, reset, f"consumer {args.name} delivers again from stream sequence {reset.reset_seq}")
        elif args.action == "next":
            psub = js.pull_subscribe(stream=args.stream, consumer=args.name)
            msgs = psub.fetch(args.count, timeout=args.timeout)
            for msg in msgs:
                show_msg(msg, args)
                msg.ack()
            if not msgs and not args.json:
                print("no messages")
    return EXIT_OK


def _pause_until(args: argparse.Namespace) -> dt.datetime:
    if not args.until:
        return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=args.seconds)
    try:
        return dt.datetime.fromisoformat(args.until)
    except ValueError:
        raise InvalidArgumentError(f"--until {args.until!r} is not an ISO 8601 time") from None


def _named(args: argparse.Namespace) -> str:
    if not args.name:
        raise InvalidArgumentError(f"consumer {args.action} needs the consumer's name")
    return str(args.name)


def cmd_counter(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            total = js.counter_add(args.subject, args.delta)
            _out(args, {"subject": args.subject, "value": str(total)}, f"{args.subject} = {total}")
        else:
            if not args.stream:
                raise InvalidArgumentError("counter get needs --stream")
            total = js.counter_get(args.stream, args.subject)
            _out(args, {"subject": args.subject, "value": str(total)}, str(total))
    return EXIT_OK


def cmd_kv(args: argparse.Namespace) -> int:
    with connection(args) as nc:
        js = nc.jetstream()
        if args.action == "add":
            js.create_key_value(args.bucket, history=args.history, limit_marker_ttl=args.limit_marker_ttl)
            _out(args, {"bucket": args.bucket}, f"bucket {args.bucket} ready")
            return EXIT_OK
        kv = js.key_value(args.bucket)
        if args.action == "get":
            entry = kv.get(args.key)
            _out(args, {"key": entry.key, "value": entry.value, "revision": entry.revision},
                 entry.value.decode(errors="replace"))
        elif args.action == "put":
            if args.ttl is None:
                rev = kv.put(args.key, args.value.encode())
            else:  # ADR-48 allows a TTL only where the key gets its first value
                rev = kv.create(args.key, args.value.encode(), ttl=args.ttl)
            _out(args, {"key": args.key, "revision": rev}, f"{args.key} = {args.value} (revision {rev})")
        elif args.action == "del":
            kv.delete(args.key)
            _out(args, {"deleted": args.key}, f"{args.key} deleted")
        elif args.action == "ls":
            keys = kv.keys()
            if args.json:
                emit_json(keys)
            else:
                for key in keys:
                    print(key)
        elif args.action == "watch":
            watcher = kv.watch(args.key or ">")
            try:
                for update in watcher:
                    if update is None:
                        if not args.json:
                            print("-- current values above, live updates below --", flush=True)
                        continue
                    value = update.value.decode(errors="replace")
                    text = f"{update.operation:5} {update.key} = {value} (revision {update.revision})"
                    _out(args, update._asdict(), text)
            finally:
                watcher.stop()
    return EXIT_OK


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        emit_json(data)
    else:
        print(text)


def _out_struct(args: argparse.Namespace, value: Any, text: str) -> None:
    """JSON in the server's own form (durations in nanoseconds), or the text."""
    if args.json:
        emit_json(value.to_dict())
    else:
        print(text)
