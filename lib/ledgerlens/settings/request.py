"""One audit's request: every input of a run, resolved once, frozen.

``ledgerlens audit``, ``ledgerlens report`` (its preflight) and the runbooks build it the same way,
``contexts.Settings.audit_request`` (built-in default < context < environment < flags or runbook
parameters), and hand it to ``ledgerlens.audit.pipeline.run_request``. It holds the metadata stores,
the bucket, the thresholds (``AuditConfig``), the output directory and the run's flags; credentials
stay where they are (the environment, files named by reference): no field holds one, and its repr
names the stores by address only, redacted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerlens.settings.config import AuditConfig, BookieSource, S3Source, ZooKeeperSource
from ledgerlens.settings.redact import redact

if TYPE_CHECKING:
    from ledgerlens.sources.stores import Stores

__all__ = ["AuditRequest"]


@dataclass(frozen=True)
class AuditRequest:
    """Everything one Pulsar audit run needs, resolved.

    ``zk``: the live ZooKeeper holding both stores (None when the stores are named otherwise:
    a snapshot, ``--bookkeeper-metadata`` with ``--pulsar-metadata``, the admin API); ``stores``:
    the BookKeeper and Pulsar metadata stores (None: ``zk`` holds both); ``s3``: the tiered-storage
    bucket (None: no offload rules); ``config``: the thresholds and 'now'; ``context``: the context's
    name and every resolved setting as it may be shown (``Settings.public()``), recorded in the
    summary (None: none recorded); ``cluster_name``: the audited Pulsar cluster (None: the single
    one under ``/admin/clusters``); ``bookie``: read entries from the bookies too (``--read-bookies``);
    ``previous`` / ``history_keep``: the run to compare with ("" : the one in ``out_dir``) and the
    runs ``out_dir/history`` keeps; ``fail_on``: the severity that makes ``audit`` exit 3 ("" : none).
    """

    out_dir: Path
    zk: ZooKeeperSource | None
    s3: S3Source | None
    config: AuditConfig
    stores: Stores | None = None
    context: dict[str, Any] | None = field(default=None, hash=False)
    cluster_name: str | None = None
    deep_offload_check: bool = False
    allow_empty_metadata: bool = False
    bookie: BookieSource | None = None
    previous: str = ""
    history_keep: int | None = None
    fail_on: str = ""
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def context_name(self) -> str:
        """The context the inputs came from ("" : none)."""
        return str((self.context or {}).get("name") or "")

    def __repr__(self) -> str:
        """The request as it may be printed: stores by address, redacted; no credential, no reference
        to one."""
        stores: dict[str, Any] = {}
        if self.stores is not None:  # each store by its kind and location
            described: dict[str, Any] = dict(self.stores.describe())
            stores["bookkeeper"] = (described.get("bookkeeper") or {}).get("location")
            stores["pulsar"] = [p.get("location") for p in described.get("pulsar") or ()]
        shown = {
            "out_dir": str(self.out_dir),
            "context": self.context_name,
            "zookeeper": self.zk.hosts if self.zk is not None else "",
            "stores": stores,
            "bucket": self.s3.bucket if self.s3 is not None else "",
            "s3_endpoint": (self.s3.endpoint_url or "") if self.s3 is not None else "",
            "s3_region": (self.s3.region or "") if self.s3 is not None else "",
            "cluster_name": self.cluster_name or "",
            "config": self.config,
            "deep_offload_check": self.deep_offload_check,
            "allow_empty_metadata": self.allow_empty_metadata,
            "read_bookies": self.bookie is not None,
            "previous": self.previous,
            "history_keep": self.history_keep,
            "fail_on": self.fail_on,
            "spark_master": self.spark_master,
        }
        return redact("AuditRequest(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")")

    __str__ = __repr__
