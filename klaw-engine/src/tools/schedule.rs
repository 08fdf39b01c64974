//! `schedule_add`, `schedule_remove`, `schedule_list`: the jobs `klaw-engine run` fires
//! (the scheduler itself is `crate::scheduler`). The command line's `schedule add|list|
//! remove` call these same tools. A job past `scheduler.maxJobs` is refused; so is a
//! change from an unattended run ([`scheduler::unattended`]) unless
//! `scheduler.unattendedChanges` allows it.

use std::sync::Arc;

use jiff::Timestamp;
use klaw_tools::{Annotations, Caller, FnTool, Tool, ToolError, ToolOutput, ToolSchema, ToolSpec};
use serde_json::{Value, json};

use crate::agent::subagent::split_target;
use crate::agent::{History, own_history_chat};
use crate::gateway::Gateway;
use crate::llm::Model;
use crate::scheduler::{self, Job, Misfire, NewJob, Schedule, Scheduler, StoreError};
use crate::{Config, Engine};

/// What happens to runs missed while no engine ran.
#[derive(Debug, Clone, Copy, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum MisfireArg {
    /// Один запуск вместо всех пропущенных (по умолчанию)
    #[schema(description_en = "One run for all the missed ones (the default)")]
    Once,
    /// Пропущенные не запускать
    #[schema(description_en = "Do not run the missed ones")]
    Skip,
    /// Каждый пропущенный, до scheduler.maxCatchUpRuns
    #[schema(description_en = "Each missed one, up to scheduler.maxCatchUpRuns")]
    All,
}

/// The arguments of `schedule_add`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddArgs {
    /// Уникальное имя задания
    #[schema(description_en = "The job's unique name")]
    name: String,
    /// Cron: 5 полей (минута час день месяц день_недели), 6 — с секундами первыми, или @daily, @hourly...
    #[schema(
        description_en = "Cron: 5 fields (minute hour day month weekday), 6 with seconds first, or @daily, @hourly..."
    )]
    #[serde(alias = "schedule", alias = "expression")]
    cron: String,
    /// Что агент получит при каждом запуске: полная инструкция, он не видит этот чат
    #[schema(
        description_en = "What the agent is told at each run: the whole instruction, it does not see this chat"
    )]
    message: String,
    /// Модель из llm.models; по умолчанию — основная
    #[schema(description_en = "A model of llm.models; by default the main one")]
    model: Option<String>,
    /// Чат для ответа: <канал>_<id>, например telegram_123456; без него ответ идёт в журнал
    #[schema(
        description_en = "The chat for the answer: <channel>_<id>, e.g. telegram_123456; without it the answer goes to the log"
    )]
    #[serde(alias = "inject_into")]
    inject_into: Option<String>,
    /// Часовой пояс IANA (Europe/Berlin); по умолчанию — пояс пользователя
    #[schema(description_en = "An IANA time zone (Europe/Berlin); by default the user's")]
    #[serde(alias = "tz", alias = "time_zone", alias = "timeZone")]
    timezone: Option<String>,
    /// Что делать с запусками, пропущенными пока движок не работал
    #[schema(description_en = "What to do with runs missed while the engine was down")]
    misfire: Option<MisfireArg>,
    /// Сколько сообщений своих прошлых запусков получает каждый запуск (по умолчанию agent.ownHistoryMessages, 5; 0 — ни одного)
    #[schema(
        description_en = "How many messages of its own earlier runs each run is given (by default agent.ownHistoryMessages, 5; 0: none)"
    )]
    #[serde(alias = "history_messages")]
    history_messages: Option<u32>,
}

/// The arguments of `schedule_remove`.
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RemoveArgs {
    /// Имя задания
    #[schema(description_en = "The job's name")]
    name: String,
}

/// The arguments of `schedule_list` (none).
#[derive(Debug, ToolSchema, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListArgs {}

/// Registers the three tools over `scheduler`, checking `injectInto` against `gateway`.
pub(crate) fn register(
    engine: &Engine,
    scheduler: &Scheduler,
    gateway: &Gateway,
) -> Result<(), klaw_tools::RegistryError> {
    engine.register(add(scheduler.clone(), gateway.clone(), engine.clone()))?;
    engine.register(remove(scheduler.clone(), engine.clone()))?;
    engine.register(list(scheduler.clone()))?;
    Ok(())
}

fn store_error(e: StoreError) -> ToolError {
    match e {
        StoreError::Schedule(crate::scheduler::ScheduleError::Zone { .. }) => {
            ToolError::invalid_arguments("/timezone", e.to_string())
        }
        StoreError::Schedule(_) => ToolError::invalid_arguments("/cron", e.to_string()),
        StoreError::Duplicate(_) => ToolError::invalid_arguments("/name", e.to_string()),
        StoreError::NotFound { .. } => ToolError::not_found(e.to_string()),
        StoreError::Full { .. } | StoreError::Busy { .. } => ToolError::refused(e.to_string()),
        other => ToolError::failed(other.to_string()),
    }
}

/// A job as the tools show it: its next three runs and its last one in its zone.
pub(crate) fn job_json(job: &Job, now: Timestamp) -> Value {
    let schedule = Schedule::parse_cached(&job.spec.cron, &job.spec.timezone).ok();
    let in_zone = |t: Timestamp| match jiff::tz::TimeZone::get(&job.spec.timezone) {
        Ok(tz) => t.to_zoned(tz).strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        Err(_) => t.to_string(),
    };
    let next: Vec<String> = schedule
        .map(|s| {
            // Counted from the stored next run, so a run due now is listed.
            let from = job
                .next_run
                .and_then(|t| t.checked_sub(jiff::SignedDuration::from_secs(1)).ok())
                .unwrap_or(now);
            s.upcoming(from, 3)
                .iter()
                .map(|z| z.strftime("%Y-%m-%d %H:%M:%S %Z").to_string())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "name": job.spec.name,
        "cron": job.spec.cron,
        "timezone": job.spec.timezone,
        "message": job.spec.message,
        "model": job.spec.model,
        "injectInto": job.spec.inject_into,
        "misfire": job.spec.misfire.as_str(),
        "historyMessages": job.spec.history_messages,
        "nextRuns": next,
        "lastRun": job.last_run.map(in_zone),
        "lastStatus": job.last_status,
        "lastError": job.last_error,
    })
}

fn checked(args: AddArgs, config: &Config, gateway: &Gateway) -> Result<NewJob, ToolError> {
    let name = args.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(ToolError::invalid_arguments(
            "/name",
            "must be 1 to 64 characters, none of them control characters",
        ));
    }
    if args.message.trim().is_empty() {
        return Err(ToolError::invalid_arguments("/message", "empty"));
    }
    if let Some(n) = args.history_messages
        && n > 1000
    {
        return Err(ToolError::invalid_arguments(
            "/historyMessages",
            format!("{n} is more than 1000"),
        ));
    }
    if let Some(m) = &args.model {
        Model::from_config(config, Some(m))
            .map_err(|e| ToolError::invalid_arguments("/model", e.to_string()))?;
    }
    if let Some(target) = &args.inject_into {
        let (channel, id) = split_target(target);
        if gateway.channel(channel).is_none() || !gateway.is_allowed(channel, id) {
            return Err(ToolError::invalid_arguments(
                "/injectInto",
                format!(
                    "`{target}` is not a chat the gateway may send to (a channel and gateway.allowedChatIds: telegram_123456, console_me)"
                ),
            ));
        }
    }
    Ok(NewJob {
        name: name.to_owned(),
        cron: args.cron.trim().to_owned(),
        timezone: args
            .timezone
            .filter(|z| !z.trim().is_empty())
            .unwrap_or_else(|| config.timezone.clone()),
        message: args.message,
        model: args.model,
        inject_into: args.inject_into,
        misfire: match args.misfire {
            None | Some(MisfireArg::Once) => Misfire::Once,
            Some(MisfireArg::Skip) => Misfire::Skip,
            Some(MisfireArg::All) => Misfire::All,
        },
        // Its runs link to this call's span (telemetry on).
        origin: crate::telemetry::passed_on()
            .into_iter()
            .find(|(k, _)| *k == "traceparent")
            .map(|(_, v)| v),
        history_messages: args.history_messages,
    })
}

/// Refuses a change of the schedule from an unattended run (a scheduled run, a
/// subagent) unless `scheduler.unattendedChanges` allows it; `own` is a change a
/// scheduled run may make to its own job (removing it).
fn attended(
    scheduler: &Scheduler,
    caller: &Caller,
    what: &str,
    own: bool,
) -> Result<(), ToolError> {
    if !scheduler::unattended(caller) || scheduler.unattended_changes() || own {
        return Ok(());
    }
    Err(ToolError::refused(format!(
        "a scheduled run or a subagent cannot {what}: nobody is there to see it \
         (scheduler.unattendedChanges is off); say in your answer what should change \
         and why, and the user can do it"
    )))
}

fn add(scheduler: Scheduler, gateway: Gateway, engine: Engine) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "schedule_add",
        "Добавляет задание по расписанию cron: в каждый срок агент выполняет message без \
         участия человека (деструктивные вызовы отклоняются) со своей историей и отправляет \
         ответ в чат injectInto; ответ {\"silent\": true, \"reason\": \"...\"} ничего не \
         отправляет. Задания хранятся в базе и переживают перезапуск; их выполняет \
         `klaw-engine run`.",
        Value::Null,
    )
    .with_description_en(
        "Add a job on a cron schedule: at each run the agent carries out message unattended \
         (destructive calls are refused) with its own history and sends the answer to the chat \
         injectInto; an answer {\"silent\": true, \"reason\": \"...\"} sends nothing. Jobs are \
         stored and survive restarts; `klaw-engine run` fires them.",
    )
    .with_title("Добавить задание", Some("Add a scheduled job".into()))
    // Later runs ask the model's provider and may send to a chat; nothing is replaced
    // (a name in use is an error).
    .with_annotations(Annotations {
        open_world: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:scheduler");
    Arc::new(FnTool::typed(spec, move |ctx, args: AddArgs| {
        let (scheduler, gateway, engine) = (scheduler.clone(), gateway.clone(), engine.clone());
        let caller = ctx.caller().clone();
        async move {
            attended(&scheduler, &caller, "add jobs", false)?;
            let job = checked(args, engine.config(), &gateway)?;
            let now = Timestamp::now();
            let store = Arc::clone(scheduler.store());
            let max = scheduler.max_jobs();
            let added = tokio::task::spawn_blocking(move || store.add(&job, now, max))
                .await
                .map_err(|e| ToolError::failed(e.to_string()))?
                .map_err(store_error)?;
            Ok(ToolOutput::json(json!({
                "added": true,
                "job": job_json(&added, now),
            })))
        }
    }))
}

/// Deletes the own history of the job `name` (its runs' messages): in the engine's
/// PostgreSQL, else in `<dataDir>/agent.db` when that exists. Call it off the async
/// threads (PostgreSQL's history waits on the network).
fn forget_history(engine: &Engine, name: &str) -> Result<(), crate::agent::HistoryError> {
    let config = engine.config();
    if engine.database().is_none() && !config.data_dir.join("agent.db").exists() {
        return Ok(());
    }
    History::from_config(config, engine.database())?
        .delete(&own_history_chat(scheduler::CHANNEL, name))
}

fn remove(scheduler: Scheduler, engine: Engine) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "schedule_remove",
        "Удаляет задание по имени вместе с историей его запусков и его собственной историей \
         сообщений. Неизвестное имя — ошибка со списком заданий.",
        Value::Null,
    )
    .with_description_en(
        "Remove a job by name, with its record of runs and its own message history. An \
         unknown name is an error listing the jobs.",
    )
    .with_title("Удалить задание", Some("Remove a scheduled job".into()))
    // The job and its history are gone.
    .with_annotations(Annotations {
        destructive: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:scheduler");
    Arc::new(FnTool::typed(spec, move |ctx, args: RemoveArgs| {
        let (scheduler, engine) = (scheduler.clone(), engine.clone());
        let caller = ctx.caller().clone();
        async move {
            let name = args.name.trim().to_owned();
            // A scheduled run's chat id is its job's name: a job may end itself.
            let own = caller.channel == scheduler::CHANNEL
                && caller.chat_id.as_deref() == Some(name.as_str());
            attended(&scheduler, &caller, "remove another job", own)?;
            let store = Arc::clone(scheduler.store());
            let removed = name.clone();
            tokio::task::spawn_blocking(move || {
                store.remove(&name)?;
                // The job is gone: a history left behind is only a warning (a job added
                // again under the name would find it).
                if let Err(e) = forget_history(&engine, &name) {
                    tracing::warn!(target: "klaw::scheduler", job = name, "the job's own history was not deleted: {e}");
                }
                Ok(())
            })
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?
            .map_err(store_error)?;
            Ok(ToolOutput::json(json!({"removed": removed})))
        }
    }))
}

fn list(scheduler: Scheduler) -> Arc<dyn Tool> {
    let spec = ToolSpec::new(
        "schedule_list",
        "Список заданий: cron, часовой пояс, три следующих запуска в этом поясе, последний \
         запуск, его статус и ошибка.",
        Value::Null,
    )
    .with_description_en(
        "List the jobs: cron, time zone, the next three runs in that zone, the last run, its \
         status and error.",
    )
    .with_title("Задания", Some("Scheduled jobs".into()))
    .with_annotations(Annotations {
        read_only: true,
        ..Default::default()
    })
    .with_origin("klaw-engine:scheduler");
    Arc::new(FnTool::typed(spec, move |_ctx, _args: ListArgs| {
        let scheduler = scheduler.clone();
        async move {
            let store = Arc::clone(scheduler.store());
            let (jobs, holdings) =
                tokio::task::spawn_blocking(move || Ok((store.list()?, store.holdings()?)))
                    .await
                    .map_err(|e| ToolError::failed(e.to_string()))?
                    .map_err(store_error)?;
            let now = Timestamp::now();
            let jobs: Vec<Value> = jobs
                .iter()
                .map(|j| {
                    let mut v = job_json(j, now);
                    // The run going, and the engine that holds it (engines share a
                    // schedule in PostgreSQL).
                    if let Some(h) = holdings.iter().find(|h| h.job == j.spec.name) {
                        v["running"] = json!({
                            "occurrence": h.scheduled.to_string(),
                            "engine": h.engine,
                            "leaseUntil": h.lease_until.to_string(),
                        });
                    }
                    v
                })
                .collect();
            Ok(ToolOutput::json(json!({
                "count": jobs.len(),
                "jobs": jobs,
            })))
        }
    }))
}
