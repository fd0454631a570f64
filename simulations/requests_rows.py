"""Reads `rlimit-sim --requests FILE` (every request's decision, a row each:
t_us,node,stream,key,cost,admitted,ideal) for the scripts of simulations/."""
import csv
import sys
from typing import Iterator, NamedTuple


class Request(NamedTuple):
    t_us: int
    node: int
    stream: int
    key: int
    cost: int
    admitted: bool  # the cluster's verdict
    ideal: bool     # one perfect limiter's


def read(path: str, script: str) -> Iterator[Request]:
    """Each row of `path`, in order. A row that is not one ends the script
    with a message naming `script`, the file and its line."""
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                yield Request(int(row["t_us"]), int(row["node"]), int(row["stream"]),
                              int(row["key"]), int(row["cost"]), int(row["admitted"]) != 0,
                              int(row["ideal"]) != 0)
            except (KeyError, TypeError, ValueError) as e:
                sys.exit(f"{script}: {path}:{line}: not a --requests row ({e})")
