"""Configuration and trust: the frozen Settings, where they come from (defaults <
config.toml < environment < flags), mcpServers files in every client's dialect, workspace
trust, saved approvals, the tokens logins left on disk, what each server runs under (its
sandbox), and the environment a child process inherits.

May import: common only.
"""
