"""Where the benchmarks find the large data sets (BGP dumps, geolocation
databases): the directory the environment variable PHAROS_DATA names, as
for the tests (crates/test-data), else ../shared/data beside the
repository."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def large_data_directory():
    return os.environ.get("PHAROS_DATA") or os.path.join(os.path.dirname(REPO), "shared", "data")
