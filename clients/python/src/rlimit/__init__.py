"""Python client for rlimitd, the rlimit daemon (docs/protocol.md).

    import rlimit
    client = rlimit.Client("/run/rlimitd.sock")
    decision = client.check({"user": "alice", "path": "/api/items"})
    if not decision.allowed:
        ...  # 429, Retry-After from decision.retry_after_us
"""
from .aio import AsyncClient
from .client import Client
from ._common import default_socket_path
from .headers import ietf_headers
from .retry import Backoff, check_with_retry, check_with_retry_async
from .types import (
    CheckRequest,
    ClusterMember,
    ClusterMembers,
    DaemonError,
    DaemonStatus,
    Decision,
    DecisionStatus,
    ErrorCode,
    FailMode,
    InlineLimit,
    LeaseStatus,
    Mode,
    ResetResult,
    RlimitError,
    RuleInfo,
    RuleStatus,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Backoff",
    "CheckRequest",
    "Client",
    "ClusterMember",
    "ClusterMembers",
    "DaemonError",
    "DaemonStatus",
    "Decision",
    "DecisionStatus",
    "ErrorCode",
    "FailMode",
    "InlineLimit",
    "LeaseStatus",
    "Mode",
    "ResetResult",
    "RlimitError",
    "RuleInfo",
    "RuleStatus",
    "Unavailable",
    "check_with_retry",
    "check_with_retry_async",
    "default_socket_path",
    "ietf_headers",
]
