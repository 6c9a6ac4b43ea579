"""What the user and servers add around the loop: hooks (Claude Code's shape), skills
(folders and servers' skills) and telemetry (OpenTelemetry spans).

May import: tools, auth, model, config, common. Never the loop or anything above it.
"""
