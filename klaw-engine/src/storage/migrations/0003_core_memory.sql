-- Core memory (storage/core_memory.rs): one document, the compact JSON of
-- core_memory.json ({"user": {...}, "agent": {...}}), in one row that every change
-- locks (SELECT ... FOR UPDATE) for its read-modify-write. The engine refuses a change
-- that would make it larger than 8192 bytes; the check below makes sure no writer ever
-- stores more.
CREATE TABLE core_memory (
    id SMALLINT PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    doc TEXT NOT NULL CHECK (octet_length(doc) <= 8192),
    updated TIMESTAMPTZ NOT NULL DEFAULT now()
);
INSERT INTO core_memory (id, doc) VALUES (1, '{"user":{},"agent":{}}');
