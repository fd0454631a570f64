"""simulations/lost_at_cap.py on requests CSVs made by hand: the room one
bucket per key, charged with what the cluster admitted, loses at its cap."""
import functools

import requests_csv

SCRIPT = "lost_at_cap.py"
run = functools.partial(requests_csv.run, SCRIPT)


def test_room_the_refill_takes_past_the_cap_is_lost_and_an_overshoot_is_not(tmp_path):
    # 10/s, a cap of 10. Key 0: 1 admitted at 0 s (9 left); a refused
    # request at 1 s finds 19 refilled, 9 of them past the cap; 5 admitted at
    # 1.1 s find 11, 1 past it. Key 1: 15 admitted at 0.5 s (-5, an
    # overshoot the ideal refused) and nothing lost by 1.5 s (refilled to 5).
    out = run(tmp_path, [
        "0,0,0,0,1,1,1",
        "500000,1,0,1,15,1,0",
        "1000000,2,0,0,1,0,1",
        "1100000,0,0,0,5,1,0",
        "1500000,1,0,1,1,0,1",
    ], "--rate", "10", "--burst", "10")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1] == "0 16 1 0.0"
    assert lines[2] == "1 5 2 10.0"
    assert lines[-1] == ("from 0 s: admitted 21, ideal 3 (+600.00%), "
                         "lost at the cap 10 (333.33% of the ideal)")
    # From the 1st second on only.
    out = run(tmp_path, ["0,0,0,0,1,1,1", "1000000,2,0,0,1,1,1"], "--rate", "10", "--burst", "10",
              "--from", "1")
    assert out.stdout.splitlines()[-1] == ("from 1 s: admitted 1, ideal 1 (+0.00%), "
                                           "lost at the cap 9 (900.00% of the ideal)")


def test_a_second_whose_requests_nobody_admitted_still_counts_what_it_lost(tmp_path):
    # The 2nd second's only request is refused by both and finds 9 + 20
    # refilled, 19 past the cap: lost there, and in the totals.
    out = run(tmp_path, ["0,0,0,0,1,1,1", "2000000,0,0,0,1,0,0"], "--rate", "10", "--burst", "10")
    assert out.returncode == 0, out.stderr
    assert "2 0 0 19.0" in out.stdout.splitlines()
    assert out.stdout.splitlines()[-1] == ("from 0 s: admitted 1, ideal 1 (+0.00%), "
                                           "lost at the cap 19 (1900.00% of the ideal)")


def test_a_malformed_row_is_named_by_its_line(tmp_path):
    requests_csv.expect_a_malformed_row_named(SCRIPT, tmp_path, "--rate", "10", "--burst", "10")


def test_a_rate_or_burst_of_zero_is_refused(tmp_path):
    out = run(tmp_path, ["0,0,0,0,1,1,1"], "--rate", "0", "--burst", "10")
    assert out.returncode != 0
    assert "must be positive" in out.stderr
