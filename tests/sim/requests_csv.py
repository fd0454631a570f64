"""For the tests of the scripts that read `rlimit-sim --requests`: writes a
requests CSV made by hand and runs a script of simulations/ on it."""
import pathlib
import subprocess
import sys

SIMULATIONS = pathlib.Path(__file__).resolve().parents[2] / "simulations"
HEADER = "t_us,node,stream,key,cost,admitted,ideal\n"


def run(script, tmp_path, rows, *args):
    """Runs simulations/`script` on `rows` (CSV lines, no header) with `args`."""
    path = tmp_path / "requests.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return subprocess.run([sys.executable, str(SIMULATIONS / script), str(path), *args],
                          capture_output=True, text=True, timeout=60)


def expect_a_malformed_row_named(script, tmp_path, *args):
    """Runs simulations/`script` (with `args`) on a CSV whose second row has a
    cost that is not a number: it must fail, naming itself, the file and the
    row's line (simulations/requests_rows.py)."""
    out = run(script, tmp_path, ["0,0,0,0,1,1,1", "10,0,0,0,x,1,1"], *args)
    assert out.returncode != 0
    assert f"{script}: " in out.stderr
    assert "requests.csv:3: not a --requests row" in out.stderr
