-- Inbound chat channels (a Telegram bot, …). One row per configured
-- channel: the next update to ask for (so a restart neither loses nor
-- repeats one) and the lease of the one process polling it, so that of
-- several daemons on one database only one polls a bot at a time.
CREATE TABLE channel_cursors (
    channel     TEXT PRIMARY KEY,
    next_update BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until BIGINT
);

-- The channel's users allowed to talk to the agent besides those in the
-- configuration: added by `cairn telegram allow` or by pairing.
CREATE TABLE channel_users (
    channel  TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    origin   TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (channel, user_id)
);

-- Strangers already told how to be allowed: they are told once.
CREATE TABLE channel_strangers (
    channel  TEXT NOT NULL,
    user_id  TEXT NOT NULL,
    told_at  BIGINT NOT NULL,
    PRIMARY KEY (channel, user_id)
);
