-- How many messages of its own earlier runs each run of a job is given
-- (`schedule_add`'s historyMessages; NULL: agent.ownHistoryMessages).
ALTER TABLE jobs ADD COLUMN history_messages BIGINT;
