"""The connection's machinery, one module per responsibility (see each docstring for its threads and locks).

* :mod:`.state`     the connection state, the one-shot Waiter, the current Link
* :mod:`.writer`    the write buffer, send/write locks, the ``jsclient-flusher`` thread
* :mod:`.reader`    the ``jsclient-reader`` thread, the read token, callers reading their own replies
* :mod:`.router`    parser events to subscriptions, waiters, futures and PONG waiters (no socket, no thread)
* :mod:`.requests`  the reply mux, tokens, waiters, the deadline sweep
* :mod:`.events`    the ``jsclient-events`` thread (user callbacks)
* :mod:`.session`   one process's connection: handshake, pool, loss, reconnect, pings, drain, close
* :mod:`.fork`      after ``os.fork()``: a fresh session in the child
* :mod:`.iface`     ``CoreAPI``, what JetStream, messages and subscriptions use
"""
