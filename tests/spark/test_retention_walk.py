"""The retention walk (``rules.ManagedLedgerReferences``) against a plain Python walk.

The audit walks in order only the managed ledgers whose first step is trimmable, found by
aggregation; this checks that shortcut against the walk as the broker does it, ledger by ledger,
on a few hundred random managed ledgers built to sit on the rule's edges: first ledgers just inside
and outside retention, size limits, grace, slow and failing cursors, broken policies, null and
out-of-order positions, ledger ids beyond what the aggregation key holds.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from ledgerlens.audit import rules
from ledgerlens.audit.materialize import Intermediates
from ledgerlens.audit.rules import retention
from ledgerlens.inventory import schemas
from ledgerlens.runtime.spark import sized_for
from ledgerlens.settings.config import AuditConfig

pytestmark = [pytest.mark.spark, pytest.mark.unit]

NOW = 1_800_000_000_000
MIN = 60_000
MB = 1024 * 1024
CFG = AuditConfig(as_of_ms=NOW)
GRACE = CFG.retention_grace_s * 1000


def _inventory(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    rnd = random.Random(seed)
    ledgers: list[dict[str, Any]] = []
    cursors: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    for n in range(6):
        ns = f"t/ns{n}"
        if n == 0:
            continue  # no policy: the defaults (0 minutes, 0 MB)
        policies.append(
            {
                "namespace": ns,
                "path": f"/admin/policies/{ns}",
                "retention_minutes": rnd.choice([-1, 0, 60, 600]),
                "retention_mb": rnd.choice([-1, 0, 1, 50]),
                "error": "undecodable" if n == 5 else None,
            }
        )
    next_id = 1
    for m in range(500):
        ns = f"t/ns{rnd.randrange(6)}"
        ml = f"{ns}/persistent/topic-{m}"
        count = rnd.choice([1, 2, 2, 3, 4, 6])
        ids = []
        for _ in range(count):
            next_id += rnd.randrange(1, 4)
            ids.append(next_id + (1 << 44) if rnd.random() < 0.03 else next_id)
        positions: list[int | None] = list(range(count))
        if rnd.random() < 0.1:
            rnd.shuffle(positions)  # positions out of id order
        if rnd.random() < 0.05:
            positions[rnd.randrange(count)] = None  # walked first
        age = rnd.choice([0.5, 5.9, 6.1, 20, 200, 200, 200]) * 3_600_000
        for i, (lid, pos) in enumerate(zip(ids, positions, strict=True)):
            last = i == count - 1
            ts = None if last and rnd.random() < 0.5 else int(NOW - age + i * rnd.choice([0, MIN, 3_600_000]))
            ledgers.append(
                {
                    "managed_ledger": ml,
                    "tenant": "t",
                    "namespace": ns,
                    "ledger_id": lid,
                    "position": pos,
                    "is_last": last if rnd.random() > 0.03 else None,
                    "entries": 10,
                    "size": rnd.choice([None, 0, MB // 2, 2 * MB, 30 * MB]),
                    "timestamp_ms": ts if rnd.random() > 0.03 else 0,
                }
            )
        # distinct marks: the slowest cursor is one cursor
        marks = rnd.sample([ids[-1] + 1, *ids], k=min(count + 1, rnd.choice([0, 1, 1, 2, 3])))
        for c, mark in enumerate(marks):
            broken = rnd.random() < 0.05
            cursors.append(
                {
                    "managed_ledger": ml,
                    "cursor": f"sub-{c}",
                    "mark_delete_ledger_id": None if rnd.random() < 0.03 else mark,
                    "error": "undecodable" if broken else None,
                }
            )
    return ledgers, cursors, policies


def _walk(
    ledgers: list[dict[str, Any]], cursors: list[dict[str, Any]], policies: list[dict[str, Any]]
) -> dict[tuple[str, int], tuple[Any, ...] | None]:
    """The broker's walk, ledger by ledger: (ml, ledger id) -> evidence of an overdue ledger, or None."""
    pol = {p["namespace"]: p for p in policies}
    out: dict[tuple[str, int], tuple[Any, ...] | None] = {}
    by_ml: dict[str, list[dict[str, Any]]] = {}
    for row in ledgers:
        by_ml.setdefault(row["managed_ledger"], []).append(row)
    for ml, rows in by_ml.items():
        rows.sort(key=lambda r: (r["position"] is not None, r["position"] or 0, r["ledger_id"]))
        mine = [c for c in cursors if c["managed_ledger"] == ml]
        good = [c for c in mine if c["error"] is None and c["mark_delete_ledger_id"] is not None]
        unknown = len(mine) - len(good)
        flagged = [r["ledger_id"] for r in rows if r["is_last"]]
        last_id = max(flagged) if flagged else max(r["ledger_id"] for r in rows)
        slow = min(good, key=lambda c: c["mark_delete_ledger_id"]) if good else None
        slowest = slow["mark_delete_ledger_id"] if slow else last_id
        p = pol.get(rows[0]["namespace"])
        minutes = p["retention_minutes"] if p else CFG.default_retention_minutes
        mb = p["retention_mb"] if p else CFG.default_retention_mb
        broken = bool(p and p["error"])
        eligible = len(rows) >= 2 and unknown == 0 and not broken
        remaining = sum(r["size"] or 0 for r in rows)
        walking = eligible
        for r in rows:
            ts = r["timestamp_ms"]
            expired = minutes >= 0 and ts is not None and ts + minutes * MIN < NOW
            over = mb >= 0 and remaining > mb * MB
            trimmable = (
                r["ledger_id"] < slowest
                and r["is_last"] is not True
                and ts is not None
                and 0 < ts <= NOW - GRACE
                and (expired or over)
            )
            walking = walking and trimmable
            ev = (remaining, slowest, slow["cursor"] if slow else None, expired, over)
            out[(ml, r["ledger_id"])] = ev if walking else None
            remaining -= r["size"] or 0
    return out


@pytest.mark.parametrize(
    ("kept", "rows", "broadcast"),
    [(True, 10_000_000, True), (True, 10_000_000, False), (True, 100, True), (False, 10_000_000, True)],
    ids=[
        "large-walks-only-trimmable-first-steps",
        "large-with-too-many-to-broadcast",
        "small-walks-all",
        "one-lazy-plan-walks-all",
    ],
)
def test_walk_of_only_the_trimmable_first_steps_is_the_whole_walk(
    spark: Any, monkeypatch: pytest.MonkeyPatch, kept: bool, rows: int, broadcast: bool
) -> None:
    if not broadcast:
        monkeypatch.setattr(retention, "WALK_BROADCAST_ROWS", 0)
    ledgers, cursors, policies = _inventory(seed=186)
    expected = _walk(ledgers, cursors, policies)
    overdue = sum(v is not None for v in expected.values())
    walked_mls = {ml for (ml, _), v in expected.items() if v is not None}
    # the scenario has both sides of the shortcut in numbers
    assert 100 <= overdue and 50 <= len(walked_mls) <= 400, (overdue, len(walked_mls))

    def frame(name: str, records: list[dict[str, Any]]) -> Any:
        return schemas.local_frame(spark, schemas.INVENTORY[name], records)

    keep = Intermediates(enabled=kept)
    with sized_for(spark, rows):  # the inventory size the audit plans the walk for
        refs = (
            rules.ManagedLedgerReferences(
                frame("ml_ledgers", ledgers),
                frame("cursors", cursors),
                frame("namespace_policies", policies),
                CFG,
                keep=keep,
            )
            .of()
            .collect()
        )
        keep.release()
    got: dict[tuple[str, int], tuple[Any, ...] | None] = {}
    for r in refs:
        e = r["ret_ev"]
        got[(r["ref_ml"], r["ledger_id"])] = (
            (
                e["size_from_here"],
                e["slowest_ledger_id"],
                e["slowest_cursor"],
                e["expired"],
                e["over_size"],
            )
            if r["ret_overdue"]
            else None
        )
        assert r["ret_overdue"] == (e is not None)
    assert len(refs) == len(ledgers)
    assert got == expected
