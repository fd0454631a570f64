"""simulations/by_rank.py on requests CSVs made by hand: admitted against the
ideal summed over bands of key index."""
import functools

import requests_csv

run = functools.partial(requests_csv.run, "by_rank.py")


ROWS = [
    "100,0,0,0,1,1,1",        # key 0: admitted, as the ideal
    "200,1,0,0,2,0,1",        # key 0: refused where the ideal admitted 2
    "300,2,0,3,1,1,0",        # key 3: admitted where the ideal refused
    "400,0,0,4,5,0,0",        # key 4: refused by both
    "2000000,1,0,1,1,1,1",    # key 1 at 2 s
    "2000100,1,1,1,3,0,1",    # stream 1's key 1
    "2000200,1,0,9,1,1,1",    # key 9: beyond the last edge
]


def test_bands_sum_cost_units_of_what_was_asked_admitted_and_ideal(tmp_path):
    out = run(tmp_path, ROWS, "--edges", "0,2,5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "keys demand admitted ideal diff diff%",
        "0-2 7 2 7 -5 -71.43%",
        "2-5 6 1 0 +1 -",
        "total demand 13, admitted 3, ideal 7 (-57.14%)",
    ]


def test_from_a_second_and_one_stream(tmp_path):
    out = run(tmp_path, ROWS, "--edges", "0,2,5", "--from", "1")
    assert out.stdout.splitlines()[1] == "0-2 4 1 4 -3 -75.00%"
    out = run(tmp_path, ROWS, "--edges", "0,2,5", "--stream", "0")
    assert out.stdout.splitlines()[1] == "0-2 4 2 4 -2 -50.00%"


def test_bad_edges_and_rows_are_refused_with_what_and_where(tmp_path):
    out = run(tmp_path, ROWS, "--edges", "5,3")
    assert out.returncode != 0 and "need two or more ascending" in out.stderr
    out = run(tmp_path, ROWS, "--edges", "0,x")
    assert out.returncode != 0 and "not a list of integers" in out.stderr
    out = run(tmp_path, ["100,0,0,zero,1,1,1"])
    assert out.returncode != 0 and "requests.csv:2: not a --requests row" in out.stderr
