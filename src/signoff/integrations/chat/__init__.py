"""The chat machinery every framework shares: a request checked against its chat (`reply.begin`, `trust`,
`machine`, `state`), the reply a framework's run streams (`driver`, `turn`, `stream`), and the chat's
history in the page's words (`history`, `ui`, `writing`, `acknowledged`). An adapter reaches it through
`signoff.integrations.framework`."""
