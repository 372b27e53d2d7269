"""``python -m onstation.harness.fake_agent``: the same program as ``onstation fake-agent``."""

from __future__ import annotations

import sys

from onstation.harness.fake_agent.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
