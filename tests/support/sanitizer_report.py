"""Finds a sanitizer's report (ASan, LeakSanitizer, UBSan, TSan) in a child
rlimitd's log, so a pytest suite run against build-asan or build-tsan fails
when a daemon it started reported one, whatever the daemon's exit code. The
Python twin of sanitizer_report.h, with the same markers."""
from __future__ import annotations

from typing import Iterable

MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "WARNING: ThreadSanitizer",
    "SUMMARY: UndefinedBehaviorSanitizer",
    ": runtime error: ",
)


def sanitizer_report(text: str) -> str:
    """The first line of `text` that starts a sanitizer report, or ""."""
    first = min((i for i in (text.find(m) for m in MARKERS) if i >= 0), default=-1)
    if first < 0:
        return ""
    start = text.rfind("\n", 0, first) + 1
    end = text.find("\n", first)
    return text[start:] if end < 0 else text[start:end]


def read_log(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def assert_no_sanitizer_report(logs: Iterable[str]) -> None:
    """Fails (AssertionError) naming every log file that holds a report."""
    found = []
    for path in logs:
        text = read_log(path)
        line = sanitizer_report(text)
        if line:
            found.append(f"{path}: {line}\n---- {path} ----\n{text}")
    assert not found, "sanitizer report in a daemon's log:\n" + "\n".join(found)
