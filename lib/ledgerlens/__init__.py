"""ledgerlens: audit, visualize and safely delete Apache Pulsar storage.

Layout (one module per role):

- ``formats``: pure decoders over bytes (managed-ledger metadata, BookKeeper ledger metadata,
  ledger paths, topic names, schema locators, namespace policies, offload object keys).
- ``sources``: I/O against ZooKeeper and S3, pipelined and rate limited.
- ``collect``: the distributed inventory on Spark, written as Parquet tables.
- ``schemas``: every inventory table and the findings table, declared once.
- ``audit``: Spark transforms from the inventory to findings.
- ``sandbox``: local ZooKeeper and S3 servers and a generated cluster in real wire formats; a
  KRaft Kafka broker with tiered storage (``sandbox.kafka``).
- ``kafka``: Kafka tiered storage (KIP-405): replay of ``__remote_log_metadata``, collection, the
  ``remote_segment_*`` rules, re-verification, the pipeline and figures of its runbook.
- ``cli``, ``report``: the command line and the HTML incident report.
"""

from __future__ import annotations

__version__ = "0.1.0"
