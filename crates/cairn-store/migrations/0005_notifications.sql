-- Notifications: recorded before any delivery is tried (the outbox), each
-- attempt kept, delivery status apart from whatever produced them. A pending
-- notification is delivered by the process holding its lease; one that
-- cannot be delivered ends in the person's inbox with the reason.
CREATE TABLE notifications (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL,
    channel         TEXT NOT NULL,
    title           TEXT NOT NULL,
    body            TEXT NOT NULL,
    priority        TEXT NOT NULL,
    tags            TEXT NOT NULL DEFAULT '[]',
    data            TEXT,
    source          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    status          TEXT NOT NULL,
    attempts        BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    lease_owner     TEXT,
    lease_until     BIGINT,
    delivered_at    BIGINT,
    last_error      TEXT,
    in_inbox        BIGINT NOT NULL DEFAULT 0,
    read_at         BIGINT
);

CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
CREATE INDEX notifications_inbox ON notifications (user_id, in_inbox, read_at);
CREATE INDEX notifications_recent ON notifications (created_at);

CREATE TABLE notification_attempts (
    notification_id TEXT NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    attempt         BIGINT NOT NULL,
    at              BIGINT NOT NULL,
    delivered       BIGINT NOT NULL,
    detail          TEXT NOT NULL,
    PRIMARY KEY (notification_id, attempt)
);
