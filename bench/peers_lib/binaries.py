"""Where the benchmarks find their programs, and how to build them.

The product's release build is at the repository's root (target/release:
pharos); the benchmarks' tools are a workspace of their own (bench/Cargo.toml,
built into bench/target/release: dnsload, tlsload, apiload, xdpgen, and
netdelay's tailbench).
"""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCT = os.path.join(REPO, "target", "release")
TOOLS = os.path.join(REPO, "bench", "target", "release")
# The programs of the product; anything else is a tool.
PRODUCT_PROGRAMS = ("pharos",)


def path(name):
    """The release build of the program `name`."""
    return os.path.join(PRODUCT if name in PRODUCT_PROGRAMS else TOOLS, name)


def build_command(name):
    """The command, run at the repository's root, that builds `name`."""
    if name in PRODUCT_PROGRAMS:
        return "cargo build --release -p %s" % name
    return "cargo build --release --manifest-path bench/Cargo.toml -p %s" % name


def missing(name):
    """The message for a program that is not built."""
    return "%s not built (%s): run %s" % (name, path(name), build_command(name))
