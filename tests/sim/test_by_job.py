"""simulations/by_job.py on requests CSVs made by hand: each job's
admissions against the ideal's, window by window, and the later jobs'
spread."""
import functools

import requests_csv

SCRIPT = "by_job.py"
run = functools.partial(requests_csv.run, SCRIPT)


def test_each_job_counts_from_its_start_to_the_next_and_windows_split_it(tmp_path):
    # Jobs every 5 s from 3.9 s. Job 0: 2 admitted at 3.95 s (the ideal 1),
    # 3 at 4.05 s (the ideal 3); a request before the first job is not
    # counted. Job 1: 4 admitted at 8.95 s, the ideal 5 there; a refused
    # request at 9.5 s that the ideal admitted, past the windows' span.
    out = run(tmp_path, [
        "1000000,0,0,0,7,1,1",
        "3950000,0,0,0,2,1,0",
        "3960000,1,0,0,1,0,1",
        "4050000,1,0,0,3,1,1",
        "8950000,0,0,0,4,1,0",
        "8960000,1,0,0,5,0,1",
        "9500000,1,0,0,1,0,1",
    ], "--start", "3.9", "--every", "5", "--window", "0.1", "--span", "0.2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "job start_s admitted ideal diff windows(admitted/ideal)"
    assert lines[1] == "0 3.900 5 4 +1 2/1 3/3"
    assert lines[2] == "1 8.900 4 6 -2 4/5 0/0"
    assert lines[3] == ("jobs 1-1: admitted 4, ideal 6, a job -2.0 on average, "
                        "standard deviation 0.0")


def test_the_later_jobs_spread_is_their_differences_standard_deviation(tmp_path):
    # Jobs every second from 0: differences +0 (the first, left out), +2, -3.
    out = run(tmp_path, [
        "0,0,0,0,1,1,1",
        "1000000,0,0,0,3,1,0",
        "1000001,0,0,0,1,0,1",
        "2000000,0,0,0,1,0,1",
        "2000001,0,0,0,2,0,1",
    ], "--start", "0", "--every", "1")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "job start_s admitted ideal diff"
    assert lines[2] == "1 1.000 3 1 +2"
    assert lines[3] == "2 2.000 0 3 -3"
    assert lines[-1] == ("jobs 1-2: admitted 3, ideal 4, a job -0.5 on average, "
                         "standard deviation 2.5")


def test_a_malformed_row_is_named_by_its_line(tmp_path):
    requests_csv.expect_a_malformed_row_named(SCRIPT, tmp_path, "--start", "0", "--every", "1")


def test_no_request_after_the_start_is_an_error(tmp_path):
    out = run(tmp_path, ["0,0,0,0,1,1,1"], "--start", "5", "--every", "1")
    assert out.returncode != 0
    assert "no request at or after 5.0 s" in out.stderr
