"""One session, opened the same way for every front end: its Settings (from the front
end's options, the folder's trust settled), the model, the transcript, the servers, skills,
the catalog, the agent and its hooks; closed in the task that opened it.

May import: ui, apps, loop and everything below them. Never cli.
"""
