//! The `scheduler` section of `engine.json`: how `klaw-engine run` fires scheduled jobs.

use super::keys::{at_least, between, section};

section! {
    /// The `scheduler` section of `engine.json`: how `klaw-engine run` fires the jobs of
    /// `schedule_add`. Every key is optional.
    pub struct SchedulerSection {
        keys {
            /// Whether `klaw-engine run` fires due jobs (with a model configured).
            enabled: bool = true;
                key "enabled", env "KLAW_SCHEDULER_ENABLED", type "`true` or `false`";
            /// How long an engine holds a run it claimed, in seconds; renewed while the
            /// run goes on. The run of an engine that died is settled by the job's misfire
            /// policy once this has passed.
            lease_seconds: u64 = 60;
                key "leaseSeconds", env "KLAW_SCHEDULER_LEASE_SECONDS", type "integer ≥ 3",
                check at_least(3);
            /// Time limit of one run (an agent turn), in seconds.
            run_timeout_seconds: u64 = 600;
                key "runTimeoutSeconds", env "KLAW_SCHEDULER_RUN_TIMEOUT_SECONDS",
                type "integer ≥ 1", check at_least(1);
            /// Most missed runs a job with misfire `all` catches up (the latest ones, one
            /// after another); older ones are recorded as skipped.
            max_catch_up_runs: u32 = 10;
                key "maxCatchUpRuns", env "KLAW_SCHEDULER_MAX_CATCH_UP_RUNS",
                type "integer, 1 to 1000", check between(1, 1000);
            /// Most jobs the schedule holds; adding one more is an error that names this
            /// cap. Each job has at most one run waiting or running at a time.
            max_jobs: u32 = 100;
                key "maxJobs", env "KLAW_SCHEDULER_MAX_JOBS", type "integer ≥ 1",
                check at_least(1);
            /// Whether unattended runs (scheduled runs, subagents) may add jobs and remove
            /// other jobs with `schedule_add` and `schedule_remove`; off, they are refused
            /// with a reason the model reads (a scheduled run may still remove its own
            /// job).
            unattended_changes: bool = false;
                key "unattendedChanges", env "KLAW_SCHEDULER_UNATTENDED_CHANGES",
                type "`true` or `false`";
        }
    }
}
