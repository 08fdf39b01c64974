//! The loop of `klaw-engine run`: claim what is due, run each claimed occurrence as an
//! unattended agent turn (the subagents' code path: the job's own history, apart from
//! the user's chats, its last messages given to each run; the job's model,
//! the answer delivered through the gateway, `{"silent": true}` sends nothing), keep its
//! lease while it runs, and record how it ended. A failing run is recorded and the job
//! runs again at its next occurrence; nothing a run does stops the loop.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use klaw_tools::Caller;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{CHANNEL, Claim, Schedule, Scheduler};
use crate::agent::subagent::deliver;
use crate::agent::{Agent, own_history_chat};
use crate::gateway::Gateway;
use crate::llm::Model;

/// The longest sleep between two looks at the store: a job another process added is
/// seen within it.
const TICK: Duration = Duration::from_secs(1);

/// How long running jobs get to finish after the stop; the others keep their run
/// `running` and are settled by their misfire policy once the lease passes.
const GRACE: Duration = Duration::from_secs(10);

/// Most runs at once in one engine; the others wait (their lease kept), one per job at
/// most.
const PARALLEL: usize = 4;

/// What the turn of a run is told: which job and occurrence, then the job's message.
pub(crate) fn prompt(claim: &Claim) -> String {
    let when = Schedule::parse_cached(&claim.job.spec.cron, &claim.job.spec.timezone)
        .ok()
        .and_then(|s| jiff::tz::TimeZone::get(s.zone()).ok())
        .map(|tz| claim.scheduled.to_zoned(tz).to_string())
        .unwrap_or_else(|| claim.scheduled.to_string());
    format!(
        "[scheduled job `{}`, run of {when}; nobody is at the keyboard: answer \
         {{\"silent\": true, \"reason\": \"...\"}} when there is nothing to report]\n{}",
        claim.job.spec.name, claim.job.spec.message
    )
}

impl Scheduler {
    /// Fires due jobs until `stop`: claims every due occurrence, runs each on `agent`,
    /// and sleeps until the earliest next run or the end of a run (at most a second, so
    /// jobs added by another process are seen). The store hands out at most one run of
    /// a job at a time, so what waits here is bounded by the number of jobs. A store
    /// that fails is logged and tried again.
    pub(crate) async fn run(&self, agent: Agent, gateway: Gateway, stop: CancellationToken) {
        // The leases of every run of the loop, the grace after the stop included.
        tokio::select! {
            () = self.fire_due(agent, gateway, stop) => {}
            never = self.keep_leases() => match never {},
        }
    }

    /// The loop of [`run`](Self::run), its leases renewed beside it.
    async fn fire_due(&self, agent: Agent, gateway: Gateway, stop: CancellationToken) {
        let limit = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
        let mut running = tokio::task::JoinSet::new();
        loop {
            if stop.is_cancelled() {
                break;
            }
            let claimed = {
                let me = self.clone();
                tokio::task::spawn_blocking(move || {
                    me.store.claim_due(Timestamp::now(), &me.owner, me.lease)
                })
                .await
            };
            let mut failed = false;
            match claimed {
                Ok(Ok(claims)) => {
                    for claim in claims {
                        let (me, agent, gateway, limit) = (
                            self.clone(),
                            agent.clone(),
                            gateway.clone(),
                            Arc::clone(&limit),
                        );
                        running.spawn(async move {
                            let _ = me.fire(claim, &agent, &gateway, Some(limit)).await;
                        });
                    }
                }
                Ok(Err(e)) => {
                    failed = true;
                    tracing::error!(target: "klaw::scheduler", "cannot claim due runs: {e}");
                }
                Err(e) => {
                    failed = true;
                    tracing::error!(target: "klaw::scheduler", "the claim stopped: {e}");
                }
            }
            // Finished runs are collected so the set does not grow.
            while running.try_join_next().is_some() {}
            let next = {
                let store = Arc::clone(&self.store);
                tokio::task::spawn_blocking(move || store.next_due())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
            };
            // After a failure, a second before trying again (never a busy loop).
            let wait = next
                .filter(|_| !failed)
                .map(|t| {
                    let ms = t.as_millisecond() - Timestamp::now().as_millisecond();
                    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
                })
                .unwrap_or(TICK)
                .min(TICK);
            // A run that ends frees its job: what came meanwhile is claimed at once.
            let ended = async {
                if running.is_empty() {
                    std::future::pending::<()>().await;
                } else {
                    let _ = running.join_next().await;
                }
            };
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(wait) => {}
                () = ended => {}
            }
        }
        let all = async { while running.join_next().await.is_some() {} };
        if tokio::time::timeout(GRACE, all).await.is_err() {
            eprintln!(
                "klaw-engine: scheduled runs still going after {}s were stopped; their misfire policy settles them",
                GRACE.as_secs()
            );
        }
    }

    /// Runs `name` once now, off its schedule (`klaw-engine schedule run-now`); `Err`
    /// says why it failed (it is recorded either way).
    pub(crate) async fn run_now(
        &self,
        name: &str,
        agent: &Agent,
        gateway: &Gateway,
    ) -> Result<(), String> {
        let claim = {
            let (me, name) = (self.clone(), name.to_owned());
            tokio::task::spawn_blocking(move || {
                me.store
                    .claim_now(&name, Timestamp::now(), &me.owner, me.lease)
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?
        };
        self.fire(claim, agent, gateway, None).await
    }

    /// Runs one claimed occurrence (once a place of `limit` is free) and records its
    /// end. Its lease is renewed from the start, waiting included: by the loop's
    /// `keep_leases` with a `limit`, by itself without one (`run_now`).
    ///
    /// The run is a root span `scheduled_run {job}` (`klaw.job.name`,
    /// `klaw.job.scheduled`, the occurrence's time, `error.type` and an error status
    /// when it failed), linked to the `schedule_add` call that added the job; its agent
    /// turn is a child.
    async fn fire(
        &self,
        claim: Claim,
        agent: &Agent,
        gateway: &Gateway,
        limit: Option<Arc<tokio::sync::Semaphore>>,
    ) -> Result<(), String> {
        let span = tracing::info_span!(
            target: "klaw::scheduler",
            parent: None,
            "scheduled_run",
            otel.name = format!("scheduled_run {}", claim.job.spec.name),
            otel.status_code = tracing::field::Empty,
            klaw.job.name = claim.job.spec.name.as_str(),
            klaw.job.scheduled = %claim.scheduled,
            error.type = tracing::field::Empty,
        );
        if let Some(origin) = &claim.job.spec.origin {
            crate::telemetry::link(&span, origin);
        }
        let outcome = self
            .fire_in(claim, agent, gateway, limit)
            .instrument(span.clone())
            .await;
        if outcome.is_err() {
            crate::telemetry::failed(&span, "run_failed");
        }
        outcome
    }

    async fn fire_in(
        &self,
        claim: Claim,
        agent: &Agent,
        gateway: &Gateway,
        limit: Option<Arc<tokio::sync::Semaphore>>,
    ) -> Result<(), String> {
        let own_lease = limit.is_none();
        let name = claim.job.spec.name.clone();
        let id = format!("{name}@{}", claim.scheduled);
        let outcome = match self.turn_on(&claim, agent) {
            Err(e) => Err(e),
            Ok(sub) => {
                // The job's own history, shared by its runs (`schedule:<job>`).
                let chat = own_history_chat(CHANNEL, &name);
                let caller = Caller::new(CHANNEL, Some(name.clone()));
                let message = prompt(&claim);
                let turn = async {
                    let _place = match limit {
                        Some(l) => l.acquire_owned().await.ok(),
                        None => None,
                    };
                    tokio::time::timeout(self.timeout, sub.turn(&chat, caller, &message, &())).await
                };
                // The loop's runs are renewed all at once (`keep_leases`); one run now
                // renews its own.
                let answer = if own_lease {
                    tokio::select! {
                        a = turn => a,
                        never = self.keep_lease(&claim) => match never {},
                    }
                } else {
                    turn.await
                };
                deliver(
                    &id,
                    &name,
                    answer,
                    self.timeout,
                    claim.job.spec.inject_into.as_deref(),
                    Some(gateway),
                )
                .await
            }
        };
        if let Err(e) = &outcome {
            tracing::warn!(target: "klaw::scheduler", job = name, scheduled = %claim.scheduled, "the run failed: {e}");
        }
        self.record_end(&claim, &outcome).await;
        outcome
    }

    /// Records the end of `claim`'s run, trying again every second while the store
    /// fails (a database restarted or out of reach): a run whose end was not recorded
    /// would stay `running` under this engine's renewed lease (its job stuck), or be run
    /// again by another engine once the lease passed. The first failure is logged, then
    /// one a minute, and the success after them.
    async fn record_end(&self, claim: &Claim, outcome: &Result<(), String>) {
        let name = &claim.job.spec.name;
        let mut failures: u32 = 0;
        loop {
            let (me, c, recorded) = (self.clone(), claim.clone(), outcome.clone());
            let stored = tokio::task::spawn_blocking(move || {
                me.store.finish(&c, &me.owner, recorded, Timestamp::now())
            })
            .await;
            match stored {
                Ok(Ok(())) => {
                    if failures > 0 {
                        tracing::warn!(target: "klaw::scheduler", job = name, scheduled = %claim.scheduled, "the run's end was recorded after {failures} failed attempt(s)");
                    }
                    return;
                }
                Ok(Err(e)) => {
                    if failures.is_multiple_of(60) {
                        tracing::error!(target: "klaw::scheduler", job = name, scheduled = %claim.scheduled, "the run's end is not recorded yet (trying again every second): {e}");
                    }
                }
                Err(e) => {
                    // The store panicked: trying again would not help.
                    tracing::error!(target: "klaw::scheduler", job = name, "the run's end was not recorded: {e}");
                    return;
                }
            }
            failures = failures.saturating_add(1);
            tokio::time::sleep(TICK).await;
        }
    }

    /// The agent a run uses: on the job's model when it names one, given the last
    /// messages of the job's own history (its `historyMessages`, else
    /// `agent.ownHistoryMessages`).
    fn turn_on(&self, claim: &Claim, agent: &Agent) -> Result<Agent, String> {
        let config = agent.engine().config();
        let own = claim
            .job
            .spec
            .history_messages
            .map_or(config.raw.agent.own_history_messages, |n| {
                usize::try_from(n).unwrap_or(usize::MAX)
            });
        let agent = match &claim.job.spec.model {
            None => agent.clone(),
            Some(m) => Model::from_config(config, Some(m))
                .map(|model| agent.on_model(model))
                .map_err(|e| e.to_string())?,
        };
        Ok(agent.with_own_history(own))
    }

    /// Renews the lease on every run this engine holds, a third of the lease apart, for
    /// as long as it is polled (never returns): one statement each time, so a thousand
    /// jobs waiting cost what one does.
    async fn keep_leases(&self) -> std::convert::Infallible {
        let every = self.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let me = self.clone();
            let renewed = tokio::task::spawn_blocking(move || {
                let until = Timestamp::now()
                    .checked_add(jiff::SignedDuration::try_from(me.lease).unwrap_or_default())
                    .unwrap_or_else(|_| Timestamp::now());
                me.store.renew_all(&me.owner, until)
            })
            .await;
            if let Ok(Err(e)) = renewed {
                tracing::warn!(target: "klaw::scheduler", "cannot renew the leases: {e}");
            }
        }
    }

    /// Renews the lease on `claim` a third of the lease apart, for as long as it is
    /// polled (never returns).
    async fn keep_lease(&self, claim: &Claim) -> std::convert::Infallible {
        let every = self.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let (me, c) = (self.clone(), claim.clone());
            let renewed = tokio::task::spawn_blocking(move || {
                let until = Timestamp::now()
                    .checked_add(jiff::SignedDuration::try_from(me.lease).unwrap_or_default())
                    .unwrap_or_else(|_| Timestamp::now());
                me.store.renew(&c, &me.owner, until)
            })
            .await;
            match renewed {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    tracing::warn!(target: "klaw::scheduler", job = claim.job.spec.name, "the run's lease passed to another engine")
                }
                Ok(Err(e)) => {
                    tracing::warn!(target: "klaw::scheduler", job = claim.job.spec.name, "cannot renew the lease: {e}")
                }
                Err(_) => {}
            }
        }
    }
}
