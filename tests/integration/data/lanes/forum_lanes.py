"""Writes the lanes scenario with Forum's own functions and prints each entry as one JSON line.

Run by tests/integration/lanes.rs with $FORUM_PYTHON: the same scenario written by git forum
must give the same kinds, bodies and hashes.
"""

import json
import sys

from forum.lane_gaps import witness_vocabulary_gap
from forum.lanes import LaneRoute, LaneRouteError, witness_route
from forum.ledger import InMemoryStorage, Ledger

TS = float(sys.argv[1]) if len(sys.argv) > 1 else 1700000000.0

storage = InMemoryStorage()
ledger = Ledger(storage, clock=lambda: TS)

ROUTES = [
    LaneRoute("summarize the proofs", "observe", frozenset({"read"}), "formal-proof", 0.9),
    LaneRoute("ship it", "deploy", frozenset({"write", "run"}), None, None),
    LaneRoute("look and run", "observe", frozenset({"run", "read"}), None, 0.5),
    LaneRoute("read the stars", "execute", frozenset({"run"}), "astrology", 0.25),
]
for route in ROUTES:
    try:
        witness_route(ledger, route)
    except LaneRouteError:
        pass

for decided, confidence in [("coder", 0.8), (None, 0.1), (None, 0.35), (None, 0.2)]:
    ledger.append(
        actor="router",
        kind="route",
        payload={"task": "t", "decided": decided, "confidence": confidence},
    )
witness_vocabulary_gap(ledger, domain_signal="general")

for e in storage.all():
    print(
        json.dumps(
            {
                "seq": e.seq,
                "kind": e.kind,
                "actor": e.actor,
                "causal_parent": e.causal_parent,
                "payload": storage.get_payload(e.payload_hash),
                "payload_hash": e.payload_hash,
                "entry_hash": e.entry_hash,
            }
        )
    )
