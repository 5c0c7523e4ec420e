-- Notifications addressed to a conversation (channel `conversation:<session
-- id>`) wait unread in the inbox until that conversation takes them; the
-- chat polls for them by channel, so they need an index of their own.
CREATE INDEX notifications_channel_unread ON notifications (channel, read_at);
