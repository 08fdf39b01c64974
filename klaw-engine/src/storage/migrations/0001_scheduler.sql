-- The scheduler's jobs, runs and leases (scheduler/store/postgres.rs): the columns and
-- types of SQLite's schedule.sqlite, times as whole seconds since the epoch.
CREATE TABLE jobs (
    name TEXT PRIMARY KEY,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    message TEXT NOT NULL,
    model TEXT,
    inject_into TEXT,
    misfire TEXT NOT NULL DEFAULT 'once',
    created BIGINT NOT NULL,
    next_run BIGINT,
    last_run BIGINT,
    last_status TEXT,
    last_error TEXT,
    origin TEXT
);
CREATE INDEX jobs_next_run ON jobs(next_run);
CREATE TABLE runs (
    job TEXT NOT NULL,
    scheduled BIGINT NOT NULL,
    owner TEXT NOT NULL,
    lease_until BIGINT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    attempts BIGINT NOT NULL DEFAULT 1,
    started BIGINT,
    finished BIGINT,
    PRIMARY KEY (job, scheduled)
);
CREATE INDEX runs_running ON runs(status, lease_until);
