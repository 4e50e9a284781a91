"""Claude Code behind the gate: its hook events ruled on as tool calls (`ruling`), and the one call a
command hook, a permission-prompt tool or an Agent SDK callback makes to a signoff server (`client`).

Nothing is imported here: `signoff hook claude-code` runs once per tool call, and its start is part of
every call's latency, so it loads `client` alone."""
