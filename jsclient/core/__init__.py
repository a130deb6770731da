"""The connection's machinery, one module per responsibility (each docstring says which threads run it).

* :mod:`.state`     the connection's state machine (a table), the one-shot Waiter, the current Link
* :mod:`.writer`    the write buffer, send/write locks, the ``jsclient-flusher`` thread and its machine (a table)
* :mod:`.reader`    the ``jsclient-reader`` thread
* :mod:`.readside`  the read side of a transport (its token, parser, buffer and polling record), and who
  holds the token when (a table)
* :mod:`.router`    parser events to subscriptions, waiters, futures and PONG waiters (no socket, no thread)
* :mod:`.requests`  the reply mux, tokens, waiters, the deadline sweep
* :mod:`.fastpath`  callers reading their own replies, and every other speed trick of the request path
  (the modules above are the plain path they fall back to; the invariants: docs/guides/internals.rst)
* :mod:`.publish`   publishing a message or a control reply, and flush
* :mod:`.subs`      subscribe, unsubscribe, drain one, the SUBs a new link needs
* :mod:`.pool`      the server pool, discovery, the user's ``server_selector``
* :mod:`.events`    the ``jsclient-events`` thread (user callbacks)
* :mod:`.session`   one process's connection: its parts, handshake, loss, reconnect, pings, drain, close
* :mod:`.fork`      after ``os.fork()``: a fresh session in the child
* :mod:`.iface`     ``CoreAPI`` (its plain calls and the hot paths' mechanics), what the layers above use,
  and ``SessionOwner``, the connection as the core holds it

Locks: this is the one place their order is written; the modules point here.

* ``Connection._reopen_lock`` (:mod:`jsclient.connection`): a forked child
  making its new session.
* ``Requests.mux_lock`` (:mod:`.requests`): creating the request inbox.
* ``ReadSide.token`` (:mod:`.readside`), one per transport: its parser,
  receive buffer and spin count; whoever holds it reads and routes (who
  may take it, and when: the machine in :mod:`.readside`).
* ``Writer.send_lock`` (:mod:`.writer`): socket writes, so buffers leave in
  the order they were filled.
* ``Writer.write_lock`` (:mod:`.writer`): the write buffer, the PINGs and
  their waiters, the connection's state (moved only by
  :func:`.state.apply`), the flusher's state, the outgoing counters; a loss
  is decided under it, once per ``Link.gen``.
* ``Router.sub_lock`` (:mod:`.router`): changes to the subscription table
  and the sid counter (:mod:`.subs`), creating the watchdog.
* ``ServerPool.lock`` (:mod:`.pool`, the session's ``pool_lock``): the
  server pool.
* ``Requests.deadline_lock`` (:mod:`.requests`): whether a sweep is
  scheduled, the requests queued while offline.
* ``settle_lock()`` (:mod:`jsclient.futures`): every ReplyFuture's state.
* ``Subscription._cond`` (:mod:`jsclient.subscription`): one
  subscription's waiting takers and its end.

When nested, they are taken in this order, never against it:
``_reopen_lock``, ``mux_lock``, the read ``token``, ``send_lock``,
``write_lock``, then the leaves (``sub_lock``, ``pool_lock``,
``deadline_lock``, ``settle_lock``, a ``_cond``), under which nothing of
ours is taken (``deadline_lock`` schedules a sweep: the timer's own lock).
The first three are never nested in one another: each is taken with
nothing held (a caller only tries the token, and never waits for it).
Under ``send_lock`` only ``write_lock`` and the transport's own locks are
taken: a failed send is decided under ``write_lock``, and closing or
starting to reconnect runs once ``send_lock`` is released.  So
``close()``, which takes the leaves, may run under one of the first three
(whoever's send or read found the link lost), never under ``send_lock``,
``write_lock`` or a leaf.  Decide under a lock, do I/O and call user code
after releasing it.  A Waiter's lock and the Events (``Link.kick``, a read
side's ``wake``) signal; they exclude nothing and are outside the order.

The layers above (JetStream, services, Spark) take their own locks with
none of these held, or under the read token (a subscription's arrival
hook, a futures kind's settle hook), and may then publish (``send_lock``,
``write_lock``) or wake a subscription (its ``_cond``); none of theirs is
taken under ``send_lock``, ``write_lock`` or a leaf.
"""
