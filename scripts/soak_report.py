#!/usr/bin/env python3
"""scripts/soak.sh's sampler and report (standard library only).

  soak_report.py sample OUT_DIR START END INTERVAL
      every INTERVAL s from START to END (epoch seconds; the last at END),
      append one row to OUT_DIR/soak.csv; stops early on SIGTERM
  soak_report.py report OUT_DIR WARMUP_S  write OUT_DIR/soak.svg and OUT_DIR/summary.md

`sample` reads, per node i (1..3), OUT_DIR/node<i>.pid (absent while the node
is down on purpose) and OUT_DIR/node<i>.http (its /metrics address), the load
tool's OUT_DIR/load.json and the events soak.sh appended to
OUT_DIR/events.pending since the last row (taken by a rename, so an event
appended meanwhile goes to the next row). Per node: VmRSS and open fds from /proc, CPU seconds, keys
held (rlimit_keys) and ledger keys (rlimit_ledger_keys) from /metrics, rules
version. Load: cumulative admitted/denied/unavailable per class, the ideal,
and the ratios admitted / ideal, cumulative and over the last interval.
"""
import csv
import json
import os
import signal
import sys
import time
import urllib.request

NODES = (1, 2, 3)
CLK_TCK = os.sysconf("SC_CLK_TCK")
METRICS_TIMEOUT_S = 3


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def proc_sample(pid):
    """(rss_kib, fds, cpu_s) of a live process, or None."""
    status = read_text(f"/proc/{pid}/status")
    stat = read_text(f"/proc/{pid}/stat")
    if status is None or stat is None:
        return None
    rss = next((int(l.split()[1]) for l in status.splitlines() if l.startswith("VmRSS:")), -1)
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = -1
    fields = stat.rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime
    return rss, fds, cpu_s


def metrics(address):
    """{name: value} of the unlabelled samples, plus rules_version."""
    out = {}
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=METRICS_TIMEOUT_S) as r:
            text = r.read().decode()
    except (OSError, ValueError):
        return out
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        if line.startswith("rlimit_rules_info{"):
            labels = line[line.index("{") + 1 : line.index("}")]
            for part in labels.split(","):
                k, _, v = part.partition("=")
                if k == "version":
                    out["rules_version"] = v.strip('"')
            continue
        name, _, value = line.rpartition(" ")
        if "{" not in name:
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def columns():
    cols = ["t_s"]
    for i in NODES:
        cols += [f"n{i}_up", f"n{i}_pid", f"n{i}_rss_kib", f"n{i}_fds", f"n{i}_cpu_s",
                 f"n{i}_keys", f"n{i}_ledger_keys", f"n{i}_rules_version"]
    cols += ["load_s", "global_admitted", "global_denied", "global_unavailable", "global_ideal",
             "global_ratio", "global_ratio_interval", "hot_admitted", "hot_denied",
             "hot_unavailable", "hot_ideal", "hot_ratio", "hot_ratio_interval", "cold_admitted",
             "cold_denied", "cold_unavailable", "cold_admitted_share", "other", "skipped",
             "events"]
    return cols


def ratio(a, b):
    return round(a / b, 4) if b > 0 else ""


def sample(out_dir, start_epoch_s):
    path = os.path.join(out_dir, "soak.csv")
    global PREV
    prev = PREV
    row = {}
    for i in NODES:
        pid = (read_text(os.path.join(out_dir, f"node{i}.pid")) or "").strip()
        p = proc_sample(pid) if pid else None
        row[f"n{i}_up"] = 1 if p else 0
        row[f"n{i}_pid"] = pid if p else ""
        if p:
            row[f"n{i}_rss_kib"], row[f"n{i}_fds"], row[f"n{i}_cpu_s"] = p[0], p[1], round(p[2], 2)
            m = metrics((read_text(os.path.join(out_dir, f"node{i}.http")) or "").strip())
            row[f"n{i}_keys"] = int(m["rlimit_keys"]) if "rlimit_keys" in m else ""
            row[f"n{i}_ledger_keys"] = int(m["rlimit_ledger_keys"]) if "rlimit_ledger_keys" in m else ""
            row[f"n{i}_rules_version"] = m.get("rules_version", "")
    load = json.loads(read_text(os.path.join(out_dir, "load.json")) or "{}")
    row["t_s"] = round(time.time() - float(start_epoch_s), 1)
    if load:
        row["load_s"] = load["elapsed_s"]
        for c in ("global", "hot", "cold"):
            for o in ("admitted", "denied", "unavailable"):
                row[f"{c}_{o}"] = load[f"{c}_{o}"]
        row["other"] = sum(load[f"{c}_other"] for c in ("global", "hot", "cold"))
        row["skipped"] = load["skipped"]
        for c in ("global", "hot"):
            row[f"{c}_ideal"] = load[f"{c}_ideal"]
            row[f"{c}_ratio"] = ratio(load[f"{c}_admitted"], load[f"{c}_ideal"])
            if prev and prev.get(f"{c}_ideal"):
                row[f"{c}_ratio_interval"] = ratio(
                    load[f"{c}_admitted"] - int(prev[f"{c}_admitted"]),
                    load[f"{c}_ideal"] - float(prev[f"{c}_ideal"]))
        answered = load["cold_admitted"] + load["cold_denied"]
        row["cold_admitted_share"] = ratio(load["cold_admitted"], answered)
    # Events soak.sh logged since the previous row.
    taken = os.path.join(out_dir, "events.taken")
    try:
        os.rename(os.path.join(out_dir, "events.pending"), taken)
    except OSError:
        pass
    events = (read_text(taken) or "").splitlines()
    row["events"] = "; ".join(e.split(" ", 1)[1] for e in events if " " in e)
    if events:
        os.remove(taken)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns())
        if prev is None:
            w.writeheader()
        w.writerow(row)
    PREV = {k: str(v) for k, v in row.items()}


PREV = None
STOP = False


def sample_loop(out_dir, start_s, end_s, interval_s):
    def on_term(signum, frame):
        global STOP
        STOP = True
    signal.signal(signal.SIGTERM, on_term)
    k = 0
    while not STOP:
        due = min(start_s + k * interval_s, end_s)
        while not STOP and time.time() < due:
            time.sleep(min(0.2, max(0.0, due - time.time())))
        if STOP:
            break
        sample(out_dir, start_s)
        if due >= end_s:
            break
        k += 1


# ---- report ---------------------------------------------------------------

def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def series(rows, col):
    return [(float(r["t_s"]), num(r[col])) for r in rows if num(r[col]) is not None]


COLORS = {1: "#1f77b4", 2: "#2ca02c", 3: "#d62728"}


def svg_panel(x0, y0, w, h, title, ylabel, lines, t_max, events, y_min=None, y_max=None):
    """One panel: lines = [(label, color, [(t, v)], dashed)]."""
    vals = [v for _, _, pts, _ in lines for _, v in pts]
    lo = min(vals) if vals else 0
    hi = max(vals) if vals else 1
    lo = y_min if y_min is not None else lo
    hi = y_max if y_max is not None else hi
    if hi <= lo:
        hi = lo + 1
    pad = (hi - lo) * 0.05
    lo, hi = (lo - pad if y_min is None else lo), hi + pad
    tx = lambda t: x0 + w * t / max(t_max, 1)
    ty = lambda v: y0 + h - h * (v - lo) / (hi - lo)
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#888"/>',
           f'<text x="{x0}" y="{y0 - 8}" font-size="13" font-weight="bold">{title}</text>',
           f'<text x="{x0 - 50}" y="{y0 + h / 2}" font-size="11" transform="rotate(-90 '
           f'{x0 - 50} {y0 + h / 2})" text-anchor="middle">{ylabel}</text>']
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{ty(v):.1f}" y2="{ty(v):.1f}" '
                   f'stroke="#eee"/>')
        label = f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"
        out.append(f'<text x="{x0 - 4}" y="{ty(v) + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{label}</text>')
    step = 60 if t_max <= 900 else 600
    t = 0
    while t <= t_max:
        out.append(f'<text x="{tx(t):.1f}" y="{y0 + h + 14}" font-size="10" '
                   f'text-anchor="middle">{t / 60:.0f}</text>')
        t += step
    for t, kind in events:
        color = "#d62728" if kind == "kill" else "#bbb"
        out.append(f'<line x1="{tx(t):.1f}" x2="{tx(t):.1f}" y1="{y0}" y2="{y0 + h}" '
                   f'stroke="{color}" stroke-width="0.7" stroke-dasharray="3,3"/>')
    n = 0
    for label, color, pts, dashed in lines:
        if pts:
            d = " ".join(f"{'M' if k == 0 else 'L'}{tx(t):.1f},{ty(v):.1f}"
                         for k, (t, v) in enumerate(pts))
            dash = ' stroke-dasharray="5,3"' if dashed else ""
            out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.4"{dash}/>')
        if label:
            out.append(f'<text x="{x0 + w + 8}" y="{y0 + 14 + 14 * n}" font-size="11" '
                       f'fill="{color}">{label}</text>')
            n += 1
    return out


def node_segments(rows, i, col):
    """A node's series split at restarts (pid changes), so lives are not joined."""
    segs, cur, pid = [], [], None
    for r in rows:
        v = num(r[col])
        if v is None or r[f"n{i}_pid"] != pid:
            if cur:
                segs.append(cur)
            cur, pid = [], r[f"n{i}_pid"]
        if v is not None:
            cur.append((float(r["t_s"]), v))
    if cur:
        segs.append(cur)
    return segs


def report(out_dir, warmup_s):
    with open(os.path.join(out_dir, "soak.csv")) as f:
        rows = list(csv.DictReader(f))
    t_max = float(rows[-1]["t_s"])
    events = []
    for r in rows:
        for e in filter(None, r["events"].split("; ")):
            kind = "kill" if e.startswith("kill") else "reload" if "reload" in e or "apply" in e else ""
            if kind:
                events.append((float(r["t_s"]), kind))

    W, H, left, top, gap = 900, 170, 80, 40, 60
    parts = []
    y = top
    specs = [
        ("VmRSS per node (node3 is SIGKILLed and restarted at the red lines; grey: rules reloads)",
         "MiB", lambda: [(l, c, [(t, v / 1024) for t, v in p], d)
                         for l, c, p, d in node_lines_col(rows, "rss_kib")], None),
        ("Open file descriptors per node", "fds", lambda: node_lines_col(rows, "fds"), 0),
        ("Keys held (rlimit_keys, solid) and ledger keys (rlimit_ledger_keys, dashed)", "keys",
         lambda: node_lines_col(rows, "keys", dashed=False) +
         [(f"n{i} ledger" if k == 0 else "", COLORS[i], seg, True)
          for i in NODES for k, seg in enumerate(node_segments(rows, i, f"n{i}_ledger_keys"))], 0),
        ("Accuracy: admitted / ideal (cumulative, solid; per 10 s, thin dashed)", "ratio",
         lambda: [("global", "#9467bd", series(rows, "global_ratio"), False),
                  ("hot users", "#ff7f0e", series(rows, "hot_ratio"), False),
                  ("global 10 s", "#9467bd", series(rows, "global_ratio_interval"), True),
                  ("hot 10 s", "#ff7f0e", series(rows, "hot_ratio_interval"), True),
                  ("cold admitted share", "#17becf", series(rows, "cold_admitted_share"), False)],
         None),
    ]
    for title, ylabel, lines_fn, y_min in specs:
        parts += svg_panel(left, y, W, H, title, ylabel, lines_fn(), t_max, events, y_min=y_min)
        y += H + gap
    height = y + 10
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + W + 130}" height="{height}" '
           f'font-family="sans-serif">', '<rect width="100%" height="100%" fill="white"/>']
    svg += parts
    svg.append(f'<text x="{left + W / 2}" y="{height - 8}" font-size="11" '
               f'text-anchor="middle">minutes</text>')
    svg.append("</svg>")
    with open(os.path.join(out_dir, "soak.svg"), "w") as f:
        f.write("\n".join(svg) + "\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(summary(rows, warmup_s))


def node_lines_col(rows, what, dashed=None):
    lines = []
    for i in NODES:
        for k, seg in enumerate(node_segments(rows, i, f"n{i}_{what}")):
            lines.append((f"node{i}" if k == 0 else "", COLORS[i], seg,
                          (i == 3) if dashed is None else dashed))
    return lines


def summary(rows, warmup_s):
    out = []
    t_max = float(rows[-1]["t_s"])
    kills = sum(r["events"].count("kill node") for r in rows)
    crashes = sum(r["events"].count("CRASH") for r in rows)
    reloads = sum(e.startswith("reload") for r in rows for e in r["events"].split("; "))
    out.append(f"samples {len(rows)}, {t_max:.0f} s; node kills {kills}, crashes {crashes}, "
               f"reloads {reloads}")
    for i in NODES:
        pids = [r[f"n{i}_pid"] for r in rows if r[f"n{i}_pid"]]
        lives = len(dict.fromkeys(pids))
        after = [r for r in rows if float(r["t_s"]) >= warmup_s and num(r[f"n{i}_rss_kib"])]
        if lives == 1 and after:
            first, last = after[0], after[-1]
            rss0, rss1 = num(first[f"n{i}_rss_kib"]), num(last[f"n{i}_rss_kib"])
            rss_max = max(num(r[f"n{i}_rss_kib"]) for r in after)
            fds = [int(num(r[f"n{i}_fds"])) for r in after]
            out.append(f"node{i} (one life): RSS after warm-up (t={float(first['t_s']):.0f} s) "
                       f"{rss0 / 1024:.1f} MiB, last (t={float(last['t_s']):.0f} s) "
                       f"{rss1 / 1024:.1f} MiB, drift {100 * (rss1 - rss0) / rss0:+.1f}%, max "
                       f"{rss_max / 1024:.1f} MiB; fds first {fds[0]} last {fds[-1]} "
                       f"min {min(fds)} max {max(fds)}; CPU {num(last[f'n{i}_cpu_s']):.0f} s")
        elif after:
            # A node restarted during the run: compare its lives at the end of each.
            ends = []
            for seg in node_segments(rows, i, f"n{i}_rss_kib"):
                ends.append(seg[-1][1] / 1024)
            fd_ends = [seg[-1][1] for seg in node_segments(rows, i, f"n{i}_fds")]
            out.append(f"node{i} ({lives} lives): RSS at the end of each life (MiB) "
                       + ", ".join(f"{v:.1f}" for v in ends)
                       + "; fds at the end of each life " + ", ".join(f"{v:.0f}" for v in fd_ends))
        keys = [num(r[f"n{i}_keys"]) for r in after if num(r[f"n{i}_keys"]) is not None]
        ledger = [num(r[f"n{i}_ledger_keys"]) for r in after
                  if num(r[f"n{i}_ledger_keys"]) is not None]
        if keys:
            out.append(f"node{i} keys after warm-up: held {min(keys):.0f}..{max(keys):.0f}, "
                       f"ledger {min(ledger, default=0):.0f}..{max(ledger, default=0):.0f}")
    last = rows[-1]
    if last.get("global_ideal"):
        g = [num(r["global_ratio_interval"]) for r in rows if num(r["global_ratio_interval"])]
        h = [num(r["hot_ratio_interval"]) for r in rows if num(r["hot_ratio_interval"])]
        sent = sum(int(num(last[f"{c}_{o}"]) or 0) for c in ("global", "hot", "cold")
                   for o in ("admitted", "denied", "unavailable")) + int(num(last["other"]) or 0)
        out.append(f"load: {sent} checks in {float(last['load_s']):.0f} s = "
                   f"{sent / float(last['load_s']):.0f} checks/s")
        for c, vals in (("global", g), ("hot", h)):
            out.append(f"{c} per 10 s: {len(vals)} windows, within 2% of the ideal "
                       f"{sum(abs(v - 1) <= 0.02 for v in vals)}, within 5% "
                       f"{sum(abs(v - 1) <= 0.05 for v in vals)}")
        out.append(f"global: admitted "
                   f"{last['global_admitted']} / ideal {float(last['global_ideal']):.0f} = "
                   f"{last['global_ratio']} (per 10 s: min {min(g, default=0):.3f}, max "
                   f"{max(g, default=0):.3f}); unavailable {last['global_unavailable']}")
        out.append(f"hot users: admitted {last['hot_admitted']} / ideal "
                   f"{float(last['hot_ideal']):.0f} = {last['hot_ratio']} (per 10 s: min "
                   f"{min(h, default=0):.3f}, max {max(h, default=0):.3f}); unavailable "
                   f"{last['hot_unavailable']}")
        out.append(f"cold keys: admitted {last['cold_admitted']}, denied {last['cold_denied']} "
                   f"(admitted share {last['cold_admitted_share']}), unavailable "
                   f"{last['cold_unavailable']}; other outcomes {last['other']}, skipped "
                   f"{last['skipped']}")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "sample":
        sample_loop(sys.argv[2], *map(float, sys.argv[3:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "report":
        report(sys.argv[2], float(sys.argv[3]))
        sys.stdout.write(open(os.path.join(sys.argv[2], "summary.md")).read())
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
