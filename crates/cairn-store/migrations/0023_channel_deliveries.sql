-- Webhook deliveries a channel (WhatsApp) took and has not handled yet:
-- written before the app is answered 200 and removed once their messages
-- are taken, so a daemon that dies in between loses nothing (the app does
-- not send a delivery it saw answered again).
CREATE TABLE channel_deliveries (
    id          TEXT PRIMARY KEY,
    channel     TEXT NOT NULL,
    body        TEXT NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX channel_deliveries_channel ON channel_deliveries (channel, received_at);
