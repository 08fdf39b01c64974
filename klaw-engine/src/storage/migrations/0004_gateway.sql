-- The gateway's inbox (gateway/inbox.rs): each channel's cursor (Telegram's offset),
-- the messages received and not handled yet, who serves each chat and who polls;
-- leases in milliseconds since the epoch.
CREATE TABLE gateway_cursors (
    channel TEXT PRIMARY KEY,
    next BIGINT NOT NULL
);
CREATE TABLE gateway_inbox (
    channel TEXT NOT NULL,
    receipt BIGINT NOT NULL,
    chat_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    answerer TEXT,
    PRIMARY KEY (channel, receipt)
);
CREATE INDEX gateway_inbox_chat ON gateway_inbox(channel, chat_id, receipt);
CREATE TABLE gateway_chats (
    channel TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    PRIMARY KEY (channel, chat_id)
);
CREATE TABLE gateway_pollers (
    channel TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    lease_until BIGINT NOT NULL
);
