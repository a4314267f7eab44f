"""The state of the deletion flow, read-only: the journal's story per approval, the deletions still
in flight (the subscription backlog) and the dead-letter topic."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from typing import Any

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.journal import Journal
from ledgerlens.errors import DecodeError


def rest(web_url: str, method: str, path: str, timeout: float = 30, token: str | None = None) -> Any:
    """One admin REST call; the JSON answer (None when empty). HTTP errors raise ``HTTPError``."""
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(web_url.rstrip("/") + path, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read().decode(errors="replace")
    return json.loads(text) if text.strip() else None


def topic_rest_path(topic: str) -> str:
    """``persistent://t/ns/local name`` -> ``/admin/v2/persistent/t/ns/<percent-encoded local name>``."""
    domain, tail = topic.split("://", 1)
    tenant, ns, local = tail.split("/", 2)
    return f"/admin/v2/{domain}/{tenant}/{ns}/{urllib.parse.quote(local, safe='')}"


def in_flight(
    web_url: str,
    topic: str = m.DELETION_TOPIC,
    subscription: str = m.SUBSCRIPTION,
    *,
    token: str | None = None,
) -> int:
    """Deletions not yet done: the subscription's backlog on the deletion and retry topics."""
    total = 0
    for t in (topic, m.retry_topic(topic)):
        try:
            stats = rest(web_url, "GET", topic_rest_path(t) + "/stats", token=token)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                continue
            raise
        sub = (stats or {}).get("subscriptions", {}).get(subscription) or {}
        total += int(sub.get("msgBacklog") or 0)
    return total


def dead_letters(client: Any, topic: str = m.DELETION_TOPIC, timeout_ms: int = 2000) -> list[dict[str, Any]]:
    """Everything in the dead-letter topic (read with a non-durable reader): properties and message."""
    import pulsar  # pulsar-client: only when a broker is contacted

    reader = client.create_reader(m.dlq_topic(topic), pulsar.MessageId.earliest)
    out = []
    try:
        while reader.has_message_available():
            msg = reader.read_next(timeout_millis=timeout_ms)
            entry: dict[str, Any] = {"properties": dict(msg.properties())}
            try:
                entry["message"] = m.describe(m.decode(msg.data()))
            except DecodeError as e:
                entry["error"] = str(e)
            out.append(entry)
    finally:
        reader.close()
    return out


def journal_summary(journal: Journal) -> dict[str, Any]:
    """Per approval: items, published, and the last outcome of each item; refusals of no approval."""
    approvals: dict[str, dict[str, Any]] = {}
    last: dict[tuple[str, str], dict[str, Any]] = {}
    refused: list[dict[str, Any]] = []
    dead: list[dict[str, Any]] = []
    published: Counter[str] = Counter()
    for r in journal.records():
        t = r.get("type")
        if t == "approval":
            approvals[str(r["approval_id"])] = r
        elif t == "published":
            published[str(r["approval_id"])] += 1
        elif t == "outcome":
            if r.get("mismatch") in ("unapproved", "forged"):
                refused.append(r)
            elif r.get("plan_hash") and r.get("item_id"):
                last[(str(r["plan_hash"]), str(r["item_id"]))] = r
            if r.get("next") == "dead_letter":
                dead.append(r)
    out = []
    for aid, a in approvals.items():
        outcomes: Counter[str] = Counter()
        for item in a.get("items") or []:
            rec = last.get((str(a["plan_hash"]), str(item["item_id"])))
            outcomes[str(rec["outcome"]) if rec else "pending"] += 1
        out.append(
            {
                "approval_id": aid,
                "plan_hash": a["plan_hash"],
                "approver": a.get("approver"),
                "reason": a.get("reason"),
                "approved_at_ms": a.get("approved_at_ms"),
                "items": len(a.get("items") or []),
                "published": published[aid],
                "outcomes": dict(outcomes),
            }
        )
    return {"approvals": out, "refused": refused, "dead_lettered": dead}


def final_outcomes(journal: Journal) -> dict[tuple[str, str], list[str]]:
    """(plan hash, item id) -> every outcome journaled for the approved item, in order (for audits of
    the journal); refusals of forged or unapproved messages that only claim the item are left out."""
    out: dict[tuple[str, str], list[str]] = {}
    for r in journal.records():
        if r.get("mismatch") in ("unapproved", "forged"):
            continue  # a refused message names an item, but is not that item's deletion
        if r.get("type") == "outcome" and r.get("plan_hash") and r.get("item_id"):
            out.setdefault((str(r["plan_hash"]), str(r["item_id"])), []).append(str(r["outcome"]))
    return out
