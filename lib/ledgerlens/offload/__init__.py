"""Offload segments: verify tiered-storage objects and describe them per topic (the offload notebook)."""
