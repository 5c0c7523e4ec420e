-- Messages a webhook-fed channel (WhatsApp) has taken, by the app's id:
-- the app delivers a message again when it doubts the first delivery
-- arrived, and a restart must not answer it twice either. Rows older than
-- the app's retries are forgotten as new ones come.
CREATE TABLE channel_messages (
    channel    TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seen_at    BIGINT NOT NULL,
    PRIMARY KEY (channel, message_id)
);
CREATE INDEX channel_messages_seen ON channel_messages (seen_at);
