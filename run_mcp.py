#!/usr/bin/env python3
"""Entry point: `python run_mcp.py --help`. All logic lives in agent.cli."""

import sys

from agent.cli import main

if __name__ == "__main__":
    sys.exit(main())
