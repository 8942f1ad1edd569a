"""A fenced job worker for Epoch in Python: the protocol of client/README.md ("Jobs") over the
epoch.v1.Jobs service, with the worker's own duties (lease keep-alive, self-fencing at 70 % of
the TTL, the fencing guard in SQLite, backoff with full jitter). See client/python/README.md."""
