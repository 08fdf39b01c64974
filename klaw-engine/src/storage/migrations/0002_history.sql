-- The agent's history (agent/history/postgres.rs): every message of every chat, as
-- SQLite's agent.db keeps it (the body is the same JSON text), and the tokens each model
-- request used. A chat's messages are read newest first by id.
CREATE TABLE history_messages (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat TEXT NOT NULL,
    body TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX history_messages_chat ON history_messages (chat, id);
CREATE TABLE history_usage (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX history_usage_chat ON history_usage (chat);
