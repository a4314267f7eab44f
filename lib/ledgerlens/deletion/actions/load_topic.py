"""``load_topic``: load a topic through the admin REST API (``internalStats``) so that the broker
trims its ledgers by its own rules (retention overdue). Verified first: the managed ledger still
exists and its tenant is this cluster's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerlens.deletion.actions.base import Action, ActionContext, Work
from ledgerlens.deletion.outcomes import Outcome
from ledgerlens.deletion.status import rest, topic_rest_path
from ledgerlens.deletion.verify import (
    LOAD,
    MISMATCH,
    RETRY,
    LiveReader,
    Verdict,
    _Absent,
    _err,
    _tenant_verdict,
    get_many,
    tenant_of_ml,
)


def verify_loads(
    items: Sequence[Mapping[str, Any]], reader: LiveReader, deleted_tenants: Iterable[str] = ()
) -> list[Verdict]:
    """Verdicts for approved ``load_topic`` items."""
    mls = [str(i["expected"]["managed_ledger"]) for i in items]
    nodes = get_many(reader.pulsar, (f"{reader.roots.managed_ledgers}/{m}" for m in mls))
    tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
    live = reader.tenants(tenants) if tenants else {}
    out = []
    for m in mls:
        node = nodes[f"{reader.roots.managed_ledgers}/{m}"]
        tv = _tenant_verdict([tenant_of_ml(m)], live, set(deleted_tenants))
        if tv is not None:
            out.append(tv)
        elif isinstance(node, Exception):
            out.append(Verdict(RETRY, f"managed ledger {m}: {_err(node)}"))
        elif isinstance(node, _Absent):
            out.append(Verdict(MISMATCH, f"managed ledger {m} is gone: nothing to load"))
        else:
            out.append(Verdict(LOAD, "topic exists"))
    return out


class LoadTopic(Action):
    name = "load_topic"

    def verify(self, ctx: ActionContext, group: Sequence[Work], deleted: Sequence[str]) -> None:
        items = [w.item for w in group if w.item is not None]
        for w, verdict in zip(group, verify_loads(items, ctx.reader, deleted), strict=True):
            w.decide(verdict, True)

    def execute(self, ctx: ActionContext, work: Sequence[Work]) -> None:
        for w in work:
            if not ctx.web_url:
                w.fail("no --web-url to load the topic through")
                continue
            topic = str(w.item["expected"]["topic"])  # type: ignore[index]
            try:
                rest(
                    ctx.web_url,
                    "GET",
                    topic_rest_path(topic) + "/internalStats",
                    timeout=60,
                    token=ctx.token(),
                )
                w.outcome, w.reason = Outcome.LOADED, f"loaded {topic}: the broker trims by its own rules"
            except (OSError, ValueError) as e:
                w.fail(f"loading {topic} failed: {e}"[:300])
