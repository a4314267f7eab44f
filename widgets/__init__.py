"""ipywidgets components for ledgerlens notebooks (they depend on ``ledgerlens``, never the reverse)."""

from __future__ import annotations

from ledgerlens_widgets.bucket_explorer import BucketExplorer
from ledgerlens_widgets.deletion_approval import ApprovalWidget
from ledgerlens_widgets.findings_explorer import FindingsExplorer
from ledgerlens_widgets.topic_picker import TopicPicker

__all__ = ["ApprovalWidget", "BucketExplorer", "FindingsExplorer", "TopicPicker"]
