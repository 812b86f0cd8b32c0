"""What the agents' packets carry that the fabric's shaping reads (shared by hosts and testbed.core)."""

from __future__ import annotations

# The IP TOS of everything a receiver sends back on a connection (TCP acknowledgements and
# delivery stamps, never data): the shaping's small class takes it ahead of queued data, so a
# GPU that is sending its own data still tells its senders at once that theirs arrived.
CONTROL_TOS = 0x10
