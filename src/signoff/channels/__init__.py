"""Where approvals are announced and answered beyond the page: webhooks, email and Slack, fed by the
ledger's outbox."""
