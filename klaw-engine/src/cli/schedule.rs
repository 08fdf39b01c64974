//! `klaw-engine schedule list|add|remove|run-now`: the jobs `run` fires. `list`, `add`
//! and `remove` call the tools `schedule_list`, `schedule_add` and `schedule_remove`
//! (the same checks and output as the agent gets); `run-now` runs a job once, now, as
//! `run` would, and says how it ended.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

use crate::Config;
use crate::llm::Model;

/// A `schedule` subcommand.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Every job: cron, time zone, the next three runs, the last run and how it ended.
    List,
    /// Add a job.
    Add {
        /// Its unique name.
        name: String,
        /// The cron expression: 5 fields, 6 with seconds first, or `@daily`-style.
        cron: String,
        /// What the agent is told at each run.
        message: String,
        /// A model of `llm.models` (default: the main one).
        #[arg(long)]
        model: Option<String>,
        /// The chat for the answer, `<channel>_<id>` (default: the log).
        #[arg(long, value_name = "CHAT")]
        inject_into: Option<String>,
        /// An IANA time zone (default: `timezone`).
        #[arg(long)]
        timezone: Option<String>,
        /// What to do with runs missed while no engine ran: once, skip or all.
        #[arg(long)]
        misfire: Option<String>,
        /// How many messages of its own earlier runs each run is given (default:
        /// `agent.ownHistoryMessages`; 0: none).
        #[arg(long, value_name = "N")]
        history_messages: Option<u32>,
    },
    /// Remove a job, its record of runs and its own history.
    Remove {
        /// The job's name.
        name: String,
    },
    /// Run a job once now, off its schedule (needs a model).
    RunNow {
        /// The job's name.
        name: String,
    },
}

/// Runs `command`.
pub(crate) fn run(config: Config, command: ScheduleCommand) -> ExitCode {
    match command {
        ScheduleCommand::List => super::call::one(config, "schedule_list", "{}".into(), None),
        ScheduleCommand::Add {
            name,
            cron,
            message,
            model,
            inject_into,
            timezone,
            misfire,
            history_messages,
        } => {
            let mut args = json!({"name": name, "cron": cron, "message": message});
            for (key, value) in [
                ("model", model),
                ("injectInto", inject_into),
                ("timezone", timezone),
                ("misfire", misfire),
            ] {
                if let Some(v) = value {
                    args[key] = json!(v);
                }
            }
            if let Some(n) = history_messages {
                args["historyMessages"] = json!(n);
            }
            super::call::one(
                config,
                "schedule_add",
                args.to_string(),
                Some(&["schedule", "add"]),
            )
        }
        ScheduleCommand::Remove { name } => super::call::one(
            config,
            "schedule_remove",
            json!({"name": name}).to_string(),
            Some(&["schedule", "remove"]),
        ),
        ScheduleCommand::RunNow { name } => {
            let model = match Model::from_config(&config, None) {
                Ok(m) => m,
                Err(e) => return super::fail(&e.to_string()),
            };
            super::run_front_on_worker(config, Some(model), |app| async move {
                let Some(agent) = app.agent() else {
                    return super::fail("no agent: a model is needed");
                };
                match app.scheduler().run_now(&name, agent, app.gateway()).await {
                    Ok(()) => {
                        super::out(&format!(
                            "ran `{}`: ok",
                            crate::terminal::terminal_safe(&name)
                        ));
                        ExitCode::SUCCESS
                    }
                    Err(e) => super::fail(&format!(
                        "the run of `{}` failed: {}",
                        crate::terminal::terminal_safe(&name),
                        crate::terminal::terminal_safe(&e)
                    )),
                }
            })
        }
    }
}
