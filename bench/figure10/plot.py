#!/usr/bin/env python3
"""Draws bench/figure10's JSON as the paper's Figure 10: the distributions
(CDFs) of connection setup and first-response latency for DNS + QUIC,
anycast and Artemis.

    python3 bench/figure10/plot.py bench/out/figure10-STAMP.json bench/out/figure10-STAMP.png
"""

import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
sys.dont_write_bytecode = True

from peers_lib import harness  # noqa: E402

SYSTEMS = (("dns+quic", "DNS + QUIC", "tab:orange"), ("anycast", "anycast", "tab:green"), ("artemis", "Artemis", "tab:blue"))
PANELS = (("setup", "connection setup (ms)"), ("first_response", "first response (ms)"))


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: plot.py FIGURE10.json OUT.png")
    harness.ensure_matplotlib(os.path.abspath(__file__), argv, harness.logger("figure10"))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(argv[0]) as f:
        doc = json.load(f)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (key, title) in zip(axes, PANELS):
        for system, label, color in SYSTEMS:
            values = sorted(trial["measured"][system][key] for trial in doc["trials"])
            shares = [(i + 1) / len(values) for i in range(len(values))]
            mean = doc["summary"][system][key]["mean"]
            ax.step(values, shares, where="post", color=color, label="%s (mean %.2f)" % (label, mean))
        ax.set_xscale("log")
        ax.set_xlabel(title)
        ax.set_ylabel("share of connections")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Figure 10 in network namespaces: %d connections of each kind, seed %d"
                 % (doc["args"]["trials"], doc["args"]["seed"]), fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[1], dpi=110)
    print("plot: %s" % argv[1])


if __name__ == "__main__":
    main(sys.argv[1:])
