"""Notifications of a campaign's events through Apprise (mail, chat webhooks, ntfy, JSON
webhooks and more, each configured by one URL): the `[notify]` table (settings.py), which events
of a run are worth telling (notices.py), and the sender that tells them off the cycle's thread
(sender.py). docs/campaign.md, "Notifications"."""
