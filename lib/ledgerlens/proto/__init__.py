"""Generated protobuf modules (see proto/generate.py). Do not edit."""
