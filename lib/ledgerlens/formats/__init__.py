"""Pure decoders over bytes. No I/O here: sources read, these functions decode.

Every decoder takes the bytes and the ``path`` (znode) or key they came from, and raises
``ledgerlens.errors.DecodeError`` naming that path and the problem when the bytes are bad.
"""
