"""tools/free_threaded_python.py: which apt sources it takes a Debian archive from."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/, a folder of scripts
from free_threaded_python import apt_mirrors  # noqa: E402

DEB822 = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
"""
ONE_LINE = """# a comment
deb [signed-by=/k.gpg] https://other.example/debian/ bookworm main
deb https://packages.example/apt cloud-sdk main
"""


def test_takes_the_distributions_archives_from_both_formats_each_once():
    assert apt_mirrors([DEB822, ONE_LINE, DEB822]) == [
        "http://mirror.example/debian",
        "https://other.example/debian",
    ]


def test_no_sources_no_mirrors():
    assert apt_mirrors([]) == []
