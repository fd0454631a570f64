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
