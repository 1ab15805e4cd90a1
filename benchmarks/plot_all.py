"""One log-log plot of fit time against n from every committed CPU (or CUDA) benchmark JSON.

    python benchmarks/plot_all.py [cpu|cuda]     # writes benchmarks/results/<device>_all.png

Files are read in date order; where two runs measured the same (model, n), the later one is shown."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_xrfm import MODELS, plot  # noqa: E402


def main(dev="cpu"):
    runs = [json.loads(p.read_text()) for p in sorted((HERE / "results").glob(f"{dev}*.json"))]
    runs.sort(key=lambda d: d["machine"]["date"])
    latest = {}
    for d in runs:
        for r in d["results"]:
            latest[(r["model"], r["n"])] = r
    if not latest:
        print(f"no {dev} results")
        return
    machine = runs[-1]["machine"]
    out = HERE / "results" / f"{dev}_all.png"
    plot(list(latest.values()), [m for m in MODELS if any(k[0] == m for k in latest)], out,
         f"{machine.get('gpu', machine['cpu'])[:40]}, d = {runs[-1]['settings']['d']}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
