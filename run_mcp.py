#!/usr/bin/env python3
"""Entry point: `python run_mcp.py --help`. All logic lives in agent.cli."""

from agent.cli import entry

if __name__ == "__main__":
    entry()
