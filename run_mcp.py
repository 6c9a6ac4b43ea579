#!/usr/bin/env python3
"""Entry point: `python run_mcp.py --help`. All logic lives in agent.cli.main."""

from agent.cli.main import entry

if __name__ == "__main__":
    entry()
